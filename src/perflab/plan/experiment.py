"""What an experiment is, for every face that lists, runs or reads one: its registry entry
(name, module, verb, columns, points, plan) and the contract its measuring module fulfils.

Light: the verbs' --help reads it without numpy. Each experiment's package states its own
entry; lab/registry.py lists the packages."""

from __future__ import annotations

import functools
import importlib
import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, cast, runtime_checkable

from perflab.errors import PerflabError
from perflab.plan.base import Plan

if TYPE_CHECKING:
    import pandas as pd

    from perflab.analysis.summary import Summary

F = TypeVar("F", bound=Callable[..., Any])
READERS = ("summary", "summarize", "plot")  # the public functions of a frame an experiment has


@runtime_checkable
class ExperimentModule(Protocol):
    """What a registered lab module provides: the summary of a frame it wrote, which every
    reader renders (a verb's tables, `perflab report`, the exports, the notebook view)."""

    def summary(self, frame: pd.DataFrame, meta: dict[str, Any]) -> Summary:
        """Sentences, tables, values and the figure of this frame and its metadata."""
        ...


@dataclass(frozen=True)
class Fleet:
    """A --cluster campaign of an experiment: what each host measures at each point, the run's
    parameters (what a resume must repeat), the columns naming one row, and the verb's table
    of the hosts: the median of `value` per `index` and host, titled, under `key` in --json."""

    measure: Callable[..., Any]
    points: list[dict[str, Any]]
    params: dict[str, Any]
    unique: tuple[str, ...]
    index: str
    value: str
    title: str
    key: str
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Experiment:
    """One experiment: its name in a result's metadata, its module, its verb and its points."""

    name: str  # the "experiment" value its results carry
    module: str  # the lab module implementing ExperimentModule
    verb: str | None  # how the CLI runs it ("sweep env-size"); None: the Python API only
    columns: frozenset[str]  # the columns a frame of it always has (how a bare CSV is recognised)
    points: tuple[str, ...]  # the parameter columns that define a point, for diff
    value: str | None = None  # the column diff compares (None: the frame's own value column)
    # The run parameters (the journal's "params") that define what a point's value measures (a
    # loop count, a page count): diff refuses two results that differ in one. The program is
    # not one of them: comparing two builds of it is what diff is for.
    defines: tuple[str, ...] = ()
    # Run parameters that are conditions of the whole run, not points (memcpy's kernel): diff
    # compares two results that differ in one point by point, and names it.
    conditions: tuple[str, ...] = ()
    ok: str = "ok"  # the status of a row diff may compare
    weighs_change: bool = False  # its summary weighs undecided points against a change (--change)
    help: str = ""  # the first paragraph of its verb's help (on one experiment per verb)
    rows: tuple[str, ...] = ()  # the columns that name one recorded row (what a resume skips)
    # The plan its verb is built from (cli/verbs.py): each field with option metadata is one
    # option; None: the verb is written by hand in cli/ (its module named as the verb).
    plan: type[Plan] | None = None
    examples: str = ""  # the help's lines after its first paragraph (a verb built from the plan)
    journaled: bool = True  # a built verb takes --resume and --discard-bad
    label: str = ""  # what its progress bar counts (a built verb; {field} is the plan's value)
    # The module's function of the frame giving the lines a built verb says on stderr after
    # the result (cswitch: real time refused); "": none. Each hook names an attribute of load().
    epilogue: str = ""
    # The module's function of the verb's values returning them completed as run takes them,
    # before the progress label is formatted (memcpy: the default --max, chosen once); "": none.
    prepare: str = ""
    # The module's function of (frame, values, output) returning the Tables a built verb prints
    # as text before the result (memcpy --full: every size), or raising what makes the frame
    # no result (nothing the timer resolved); "": none.
    preface: str = ""
    # The module's function of the plan's values returning the Fleet a built verb runs with
    # --cluster (then --resume is a campaign's; without one a run not journaled refuses it).
    campaign: str = ""
    # The help's paragraphs after the first, wrapped as click wraps them (before the examples,
    # which keep their lines); "": none.
    details: str = ""
    # The shared output options a built verb adds after the plan's, by parameter name (-o,
    # --json, --plot); a plan field of one of these names states that option itself, with its
    # own help and place (counters: its -o and --json first, and no --plot).
    outputs: tuple[str, ...] = ("output", "as_json", "plot_path")
    # The module's function of the frame giving the exit status of the program its run ran (as
    # a shell says it), or None where it ran none. A built verb with one runs its user's program:
    # once, not journaled, with run(stdout=, stderr=) where the plan's program_output field says;
    # its text on stderr where a program ran (stdout is the program's), and it exits with that
    # status. "": a verb of measurements.
    exit_status: str = ""
    # A runner's status line on a terminal's stderr once its run has lasted a second: its run
    # takes progress(seconds, count), which fill {seconds} and {count}; "": none.
    ticker: str = ""

    def load(self) -> ExperimentModule:
        """The lab module, imported now (it may import numpy, pandas and the C core)."""
        return cast("ExperimentModule", importlib.import_module(self.module))

    def summary(self, frame: pd.DataFrame, meta: dict[str, Any]) -> Summary:
        """The module's summary; a frame without this experiment's columns is one error."""
        from perflab.analysis.summary import Summary

        missing = sorted(self.columns - set(map(str, frame.columns)))
        if missing:
            raise PerflabError(
                f"a {self.name} result without column(s) {', '.join(missing)}: "
                "damaged, or not written by perflab"
            )
        if frame.empty:
            return Summary([f"no rows: the {self.name} run recorded nothing"], [])
        try:
            return self.load().summary(frame, meta)
        except KeyError as exc:  # a column some runs' summary reads (outer_ticks without a probe)
            raise _lacking(self.name, "summary", exc, frame) from None


def _lacking(what: str, reader: str, exc: KeyError, frame: pd.DataFrame) -> KeyError | PerflabError:
    """A KeyError a reader of a frame raised, as the one line its user reads where the key
    is a column or metadata key the frame lacks; else the error itself (a bug)."""
    key = str(exc.args[0]) if exc.args else ""
    absent = key not in map(str, frame.columns) and key.isidentifier()
    if key.startswith("None of [") and key.endswith("are in the [columns]"):  # df[[a, b]]
        named = "the columns"
    elif absent or key.endswith(" not in index"):
        named = f"the {key.removesuffix(' not in index')} (a column or metadata key)"
    else:
        return exc
    return PerflabError(f"{what}.{reader}: a result without {named} it needs: damaged, or not "
                        "written by perflab")  # fmt: skip


def reads_frame(what: str, *entries: Experiment) -> Callable[[F], F]:
    """A public summary or plot of `what`'s frames, fn(frame[, meta], ...), with its arguments
    checked first: a frame that is no DataFrame, has no rows or lacks a column every frame of
    one of `entries` has, or metadata that is no mapping, is one line."""
    return functools.partial(_checked, what, entries)


def _checked(what: str, entries: Sequence[Experiment], fn: F) -> F:
    """reads_frame's wrapper of fn."""
    takes_meta = list(inspect.signature(fn).parameters)[1:2] == ["meta"]
    whole = fn.__name__ != "summarize"  # summarize also tables a part of one (a test's rows)

    @functools.wraps(fn)
    def checked(frame: Any, *args: Any, **kwargs: Any) -> Any:
        import pandas as pd

        name = f"{what}.{fn.__name__}"
        if not isinstance(frame, pd.DataFrame):
            raise PerflabError(f"{name}: the frame a {what} run returned (or results.load read), "
                               f"not {type(frame).__name__}")  # fmt: skip
        meta = args[0] if args else kwargs.get("meta")
        if takes_meta and not isinstance(meta, Mapping):
            raise PerflabError(f"{name}: meta is the frame's metadata (results.metadata(frame)), "
                               f"not {type(meta).__name__}")  # fmt: skip
        if frame.empty:
            raise PerflabError(f"{name}: a frame without rows: nothing a {what} run recorded")
        have = set(map(str, frame.columns))
        gaps: list[frozenset[str]] = [e.columns - have for e in entries]
        if whole and gaps and all(gaps):  # a summary or plot reads a whole result
            lacks = sorted(sorted(gaps, key=len)[0])
            raise PerflabError(f"{name}: a frame without column(s) {', '.join(lacks)}: not a "
                               f"{what} result, or a damaged one")  # fmt: skip
        try:
            return fn(frame, *args, **kwargs)
        except KeyError as exc:
            raise _lacking(what, fn.__name__, exc, frame) from None

    return cast("F", checked)


def lazy_api(
    package: str,
    module: str,
    names: Sequence[str],
    elsewhere: Mapping[str, Sequence[str]] | None = None,
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """A package's __getattr__ and __dir__ that load `names` from its measuring module on first
    use, so the package (its plan and entry) stays light and perflab.NAME.run still works;
    elsewhere: more names, by the package's module that holds them."""
    return lazy_modules(package, {module: names, **(elsewhere or {})})


def lazy_modules(
    package: str, homes: Mapping[str, Sequence[str]]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """lazy_api for a package whose public names live in several modules (module -> names); a
    name that is a module of the package (`threads.program`) is that module."""
    home = {name: module for module, names in homes.items() for name in names}
    what = package.rsplit(".", 1)[-1]
    checked: dict[str, Any] = {}  # each reader wrapped once: perflab.trig.plot is itself

    def getattr_(name: str) -> Any:
        if name not in home:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module = importlib.import_module(home[name])
        if home[name] == f"{package}.{name}":
            return module
        found = getattr(module, name)
        if name in READERS and callable(found):
            return checked.setdefault(name, _checked(what, _entries(package, home[name]), found))
        return found

    def dir_() -> list[str]:
        return sorted({*home, *vars(importlib.import_module(package))})

    return getattr_, dir_


def _entries(package: str, module: str) -> tuple[Experiment, ...]:
    """The registry entries a package states whose results `module`'s readers read: those
    naming the module, else all of them."""
    pkg = importlib.import_module(package)
    stated = tuple(getattr(pkg, "EXPERIMENTS", None) or (getattr(pkg, "EXPERIMENT", None),))
    stated = tuple(e for e in stated if isinstance(e, Experiment))
    return tuple(e for e in stated if e.module == module) or stated
