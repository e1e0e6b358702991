"""Every experiment's public readers of a frame (summary, summarize, plot, as
perflab.NAME.reader and perflab.threads.KIND.reader) given what is no result of theirs say so in
one line: a PerflabError naming the reader, never a raw exception from inside it."""

import inspect

import pandas as pd
import pytest

import perflab

THREADS = ("core_vs_ht", "thread_count", "fauxplat", "program")


def _readers() -> list[tuple[str, object]]:
    """(name, function) of each public reader: perflab.NAME's for every experiment module of
    the public API, and each threads experiment's."""
    owners = [getattr(perflab, name) for name, module in perflab.MODULES.items()
              if module.startswith("perflab.lab.")]  # fmt: skip
    owners += [getattr(perflab.threads, kind) for kind in THREADS]
    found = []
    for owner in owners:
        for reader in ("summary", "summarize", "plot"):
            fn = getattr(owner, reader, None)
            if callable(fn):
                found.append((f"{owner.__name__.rsplit('.', 1)[-1]}.{reader}", fn))
    return found


READERS = _readers()
BAD = {
    "none": (None, {}),
    "a list": ([1, 2], {}),
    "no rows": (pd.DataFrame(), {}),
    "foreign columns": (pd.DataFrame({"side": ["A"], "x": [1.0]}), {}),
    "meta a number": (pd.DataFrame({"side": ["A"], "x": [1.0]}), 3),
}


def test_every_experiment_has_readers():
    names = {n.split(".")[0] for n, _ in READERS}
    assert {"history", "bisect", "trig", "env_size", "program", "core_vs_ht"} <= names
    assert len(READERS) >= 30


def _takes_meta(name: str, fn) -> bool:
    return list(inspect.signature(fn).parameters)[1:2] == ["meta"]


CASES = [(name, fn, given) for name, fn in READERS for given in BAD
         if given != "meta a number" or _takes_meta(name, fn)]  # fmt: skip


@pytest.mark.parametrize(("name", "fn", "given"), CASES,
                         ids=[f"{name}-{given}" for name, _, given in CASES])  # fmt: skip
def test_a_reader_given_no_result_of_its_own_says_so_in_one_line(name, fn, given):
    frame, meta = BAD[given]
    with pytest.raises(perflab.PerflabError) as exc:
        fn(frame, meta) if _takes_meta(name, fn) else fn(frame)
    assert "\n" not in str(exc.value) and name.split(".")[-1] in str(exc.value)
