"""The one list of experiments: what each is called in a result, which lab module implements it,
which verb runs it, the columns its frames have and the parameter columns that define one of its
points; and the contract each module fulfils.

Verbs, `report`, `diff`, the exporters and the Jupyter view read this list and nothing else, so
an experiment registered here cannot be forgotten by one of them. It imports no numpy:
`perflab --help` may read it.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, cast, runtime_checkable

from perflab.errors import PerflabError

if TYPE_CHECKING:
    import pandas as pd

    from perflab.analysis.summary import Summary


@runtime_checkable
class ExperimentModule(Protocol):
    """What a registered lab module provides: the summary of a frame it wrote, which every
    reader renders (a verb's tables, `perflab report`, the exports, the notebook view)."""

    def summary(self, frame: pd.DataFrame, meta: dict[str, Any]) -> Summary:
        """Sentences, tables, values and the figure of this frame and its metadata."""
        ...


@dataclass(frozen=True)
class Experiment:
    """One experiment: its name in a result's metadata, its module, its verb and its points."""

    name: str  # the "experiment" value its results carry
    module: str  # the lab module implementing ExperimentModule
    verb: str | None  # how the CLI runs it ("sweep env-size"); None: the Python API only
    columns: frozenset[str]  # the columns a frame of it always has (how a bare CSV is recognised)
    points: tuple[str, ...]  # the parameter columns that define a point, for diff
    value: str | None = None  # the column diff compares (None: the frame's own value column)
    ok: str = "ok"  # the status of a row diff may compare

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
        return self.load().summary(frame, meta)


def _e(name: str, module: str, verb: str | None, columns: set[str], points: tuple[str, ...],
       value: str | None = None, ok: str = "ok") -> Experiment:  # fmt: skip
    return Experiment(name, f"perflab.lab.{module}", verb, frozenset(columns), points, value, ok)


EXPERIMENTS: dict[str, Experiment] = {
    e.name: e
    for e in (
        _e("env-size", "env_size", "sweep env-size", {"env_size", "rep", "status", "ticks"},
           ("env_size",)),
        _e("link-order", "link_order", "sweep link-order",
           {"link_order", "perm", "rep", "status", "ticks"}, ("link_order",)),
        _e("compare", "compare", "compare", {"setup", "side", "env_size", "status", "ticks"},
           ("side", "env_size", "link_order")),
        _e("memcpy", "memcpy", "sweep memcpy", {"kernel", "size", "ticks", "ticks_per_byte"},
           ("kernel", "size"), "ticks"),
        _e("pagefault", "pagefault", "run pagefault",
           {"condition", "pages", "rep", "ticks_per_page"}, ("condition",), "ticks_per_page"),
        _e("trig", "trig", "run trig", {"call", "mode", "rep", "ticks"}, ("call", "mode"),
           "ticks"),
        _e("cswitch", "cswitch", "run cswitch",
           {"placement", "realtime", "rt_applied", "alone_us_each", "cswitch_us_each"},
           ("placement", "realtime"), "cswitch_us_each"),
        _e("syscalls", "syscalls", "run syscalls", {"call", "rep", "ticks", "ns"}, ("call",),
           "ticks"),
        _e("core-vs-ht", "threads.core_vs_ht", "run core-vs-ht",
           {"placement", "label", "threads", "cpu_ns", "wall_ns"}, ("placement", "threads"),
           "cpu_ns"),
        _e("threads", "threads.thread_count", "sweep threads",
           {"threads", "rep", "loops", "release_ns", "end_ns", "bytes", "cpu_ns"}, ("threads",),
           "cpu_ns"),
        _e("threads-program", "threads.program", "sweep threads",
           {"threads", "rep", "status", "wall_ns", "utime_ns", "stime_ns"}, ("threads",),
           "wall_ns"),
        _e("fauxplat", "threads.fauxplat", "run fauxplat",
           {"condition", "fauxplat_per_s", "fauxplat_wall_per_s"}, ("condition",),
           "fauxplat_per_s"),
        _e("counters", "counters", "counters", {"event", "kind", "count", "status"}, ("event",),
           "count", ok="counts"),
        _e("clocks", "clocks", "clocks", {"method", "rep", "ns", "ticks"}, ("method",), "ns"),
        _e("profile", "profile", "profile",
           {"pid", "tid", "comm", "cpu_ns", "lifetime_ns", "blocked_ns"}, ("comm",), "cpu_ns"),
        _e("contention", "contention", None,
           {"kind", "threads", "rep", "wall_ms", "utilisation", "blocked_pct"},
           ("kind", "threads"), "wall_ms"),
    )
}  # fmt: skip


def get(name: str) -> Experiment:
    """The experiment a result names; one line naming the known ones when it is none of them."""
    if name not in EXPERIMENTS:
        known = ", ".join(sorted(EXPERIMENTS))
        raise PerflabError(f"unknown experiment {name!r}; perflab knows {known}")
    return EXPERIMENTS[name]


def recognise(columns: set[str]) -> Experiment | None:
    """The experiment whose columns a frame without metadata has (the most specific one)."""
    fits = [e for e in EXPERIMENTS.values() if e.columns <= columns]
    return max(fits, key=lambda e: len(e.columns)) if fits else None
