"""Every experiment's public entry point given the wrong type for each annotated parameter and
each field of its plan (issue 59, item 5): an object of a class perflab never heard of, and a
string where a sequence is meant, are each one PerflabError line naming the parameter, raised
before anything is measured or written. A call that is not refused is stopped by an alarm and
fails the test."""

import dataclasses
import inspect
import signal
import typing
from collections import abc

import pandas as pd
import pytest

import perflab
from perflab.errors import PerflabError
from perflab.lab.compare.plan import ComparePlan
from perflab.lab.env_size.plan import EnvSizePlan
from perflab.lab.link_order import LinkOrderPlan
from perflab.lab.threads.plan import ThreadsPlan

ALARM_S = 3  # a refusal takes milliseconds; a call still running then has started measuring


class Foreign:
    """No sequence, mapping, path, number, text, function or class of perflab's."""

    def __repr__(self) -> str:
        return "<foreign>"


def flat() -> None:
    """A callable warmup may time."""


def _side() -> object:
    return perflab.compare.program_side("A", ["/bin/true"])


# entry point -> (its function, the arguments it cannot do without, the plan its **params fill)
ENTRIES: dict[str, tuple[typing.Callable[[], typing.Any], typing.Callable[[], dict], type | None]]
ENTRIES = {
    "env_size.sweep": (lambda: perflab.env_size.sweep, dict, EnvSizePlan),
    "link_order.sweep": (lambda: perflab.link_order.sweep, dict, LinkOrderPlan),
    "compare.compare": (lambda: perflab.compare.compare, lambda: {"a": _side(), "b": _side()},
                        ComparePlan),
    "bisect.bisect": (lambda: perflab.bisect.bisect,
                      lambda: {"good": "a", "bad": "b", "build": ["make"], "run": ["./p"]}, None),
    "history.track": (lambda: perflab.history.track,
                      lambda: {"revisions": "HEAD", "build": ["make"], "run": ["./p"]}, None),
    "history.history": (lambda: perflab.history.history, dict, None),
    **{f"{m}.run": ((lambda m=m: getattr(perflab, m).run), dict, None)
       for m in ("memcpy", "pagefault", "trig", "cswitch", "syscalls", "clocks", "counters",
                 "profile", "contention")},
    "threads.core_vs_ht.run": (lambda: perflab.threads.core_vs_ht.run, dict, None),
    "threads.thread_count.run": (lambda: perflab.threads.thread_count.run,
                                 lambda: {"max_threads": 1}, None),
    "threads.fauxplat.run": (lambda: perflab.threads.fauxplat.run, dict, None),
    "threads.program.run": (lambda: perflab.threads.program.run,
                            lambda: {"command": ["/bin/true"]}, ThreadsPlan),
    "warmup": (lambda: perflab.warmup, lambda: {"fn": flat}, None),
}  # fmt: skip
OWN = {"compare.compare": ("digests",)}  # plan fields the entry point sets itself


def _kind(fn: typing.Any, param: inspect.Parameter) -> typing.Any:
    """A parameter's annotation as the check reads it: one it cannot resolve goes unchecked,
    so it fails here."""
    kind = param.annotation
    return eval(kind, inspect.unwrap(fn).__globals__) if isinstance(kind, str) else kind


def _sequence(kind: typing.Any) -> bool:
    """Whether the annotation takes a sequence (alone or in a union) and not a text too (as
    metrics takes one comma list)."""
    origin = typing.get_origin(kind)
    if origin in (typing.Union, type(int | None)):
        options = typing.get_args(kind)
        return str not in options and any(_sequence(a) for a in options)
    return origin in (list, tuple, abc.Sequence, abc.Iterable)


def _cases() -> list[tuple[str, str, str]]:
    """(entry point, keyword, "foreign" or "text") for every annotated parameter and plan field."""
    cases = []
    for entry, (function, _, plan) in ENTRIES.items():
        fn = function()
        for param in inspect.signature(fn).parameters.values():
            if param.annotation is param.empty or param.kind is param.VAR_KEYWORD:
                continue  # **params: the plan's fields, below
            cases.append((entry, param.name, "foreign"))
            if _sequence(_kind(fn, param)):
                cases.append((entry, param.name, "text"))
        hints = typing.get_type_hints(plan) if plan else {}
        for f in dataclasses.fields(plan) if plan else ():
            if f.init and f.name not in OWN.get(entry, ()):
                cases.append((entry, f.name, "foreign"))
                if _sequence(hints[f.name]):
                    cases.append((entry, f.name, "text"))
        cases.append((entry, "nonsense", "foreign"))  # a keyword that is none of its own
    return cases


class Ran(BaseException):
    """The alarm: the call was not refused (no except Exception inside perflab takes it)."""


def _alarm(signum, frame):
    raise Ran(f"not refused: still running after {ALARM_S} s")


@pytest.fixture(autouse=True)
def alarm():
    """Every call here is stopped, failing its test, once it has run for ALARM_S."""
    before = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, ALARM_S)
    yield
    signal.setitimer(signal.ITIMER_REAL, 0)
    signal.signal(signal.SIGALRM, before)


@pytest.mark.parametrize(("entry", "keyword", "given"), _cases())
def test_a_wrong_type_is_one_line_before_anything_runs(entry, keyword, given, tmp_path,
                                                       monkeypatch):  # fmt: skip
    monkeypatch.chdir(tmp_path)
    function, required, _ = ENTRIES[entry]
    value = Foreign() if given == "foreign" else "ab"
    with pytest.raises(PerflabError) as caught:
        function()(**{**required(), keyword: value})
    said = str(caught.value)
    assert "\n" not in said and keyword in said, said
    assert keyword == "nonsense" or repr(value) in said, said  # refused for what it is
    assert not list(tmp_path.iterdir())


def test_every_parameter_of_an_entry_point_is_checked():
    """Each annotation resolves where the check reads it (one only a type checker imports
    would pass unchecked)."""
    for function, _, _ in ENTRIES.values():
        fn = function()
        assert fn is not inspect.unwrap(fn), f"{fn.__qualname__} checks no argument"
        for param in inspect.signature(fn).parameters.values():
            if param.annotation is not param.empty:
                _kind(fn, param)


# What the foreign object does not reach: an item of a sequence or mapping, a literal's value,
# a value whose repr spans lines. (entry point, keywords, what the one line says)
ITEMS = [
    ("threads.core_vs_ht.run", {"perturb": ["cpu@0"]},
     "perturb: 'cpu@0' is not a Perturbation (Perturbation.parse('cpu@0'))"),
    ("env_size.sweep", {"extra_meta": {1: "x"}}, "extra_meta key: 1 is not a text"),
    ("profile.run", {"env": {"A": 1}}, "env['A']: 1 is not a text"),
    ("warmup", {"fn": flat, "fresh": "thread"},
     "fresh: 'thread' is not one of auto, interpreter, fork"),
    ("link_order.sweep", {"ldflags": ["-lm"]}, "ldflags: ['-lm'] is not a text"),
    ("trig.run", {"calls": ["sin(1.0)", 2]}, "calls: 2 is not a text"),
]  # fmt: skip


@pytest.mark.parametrize(("entry", "kwargs", "said"), ITEMS, ids=[e for e, _, _ in ITEMS])
def test_an_item_of_the_wrong_type_is_one_line(entry, kwargs, said, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(PerflabError) as caught:
        ENTRIES[entry][0]()(**kwargs)
    assert str(caught.value) == said
    assert not list(tmp_path.iterdir())


def test_a_value_whose_repr_spans_lines_is_named_by_its_class():
    frame = pd.DataFrame({"a": [1, 2]})
    with pytest.raises(PerflabError) as caught:
        perflab.link_order.sweep(ldflags=frame)
    assert str(caught.value) == "ldflags: a DataFrame is not a text"
