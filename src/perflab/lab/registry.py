"""The one list of experiments: what each is called in a result, which lab module implements it,
which verb runs it, and the parameter columns that define one of its points.

Verbs, `report`, `diff`, the exporters, the Jupyter view and campaigns read this list and nothing
else, so an experiment registered here cannot be forgotten by one of them. It imports no numpy:
`perflab --help` reads it.
"""

import importlib
from dataclasses import dataclass
from types import ModuleType

from perflab.errors import PerflabError


@dataclass(frozen=True)
class Experiment:
    """One experiment: its name in a result's metadata, its module, its verb and its points."""

    name: str  # the "experiment" value its results carry
    module: str  # the lab module implementing the contract (docs/architecture.md)
    verb: str  # how the CLI runs it: "sweep env-size"
    columns: frozenset[str]  # the columns a frame of it always has (how a bare CSV is recognised)
    points: tuple[str, ...]  # the parameter columns that define a point, for diff
    value: str | None = None  # the column diff compares (None: the frame's own value column)

    def load(self) -> ModuleType:
        """The lab module, imported now (it may import numpy, pandas and the C core)."""
        return importlib.import_module(self.module)


def _e(name: str, module: str, verb: str, columns: set[str], points: tuple[str, ...],
       value: str | None = None) -> Experiment:  # fmt: skip
    return Experiment(name, f"perflab.lab.{module}", verb, frozenset(columns), points, value)


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
           {"placement", "realtime", "rt_applied", "alone_us_each"}, ("placement", "realtime"),
           "cswitch_us_each"),
        _e("syscalls", "syscalls", "run syscalls", {"call", "rep", "ticks", "ns"}, ("call",),
           "ticks"),
        _e("core-vs-ht", "threads.core_vs_ht", "run core-vs-ht",
           {"placement", "label", "threads", "cpu_ns", "wall_ns"}, ("placement", "threads"),
           "cpu_ns"),
        _e("threads", "threads.thread_count", "sweep threads",
           {"threads", "rep", "loops", "release_ns", "end_ns"}, ("threads",), "cpu_ns"),
        _e("threads-program", "threads.program", "sweep threads",
           {"threads", "rep", "status", "wall_ns"}, ("threads",), "wall_ns"),
        _e("fauxplat", "threads.fauxplat", "run fauxplat",
           {"condition", "fauxplat_per_s", "fauxplat_wall_per_s"}, ("condition",),
           "fauxplat_per_s"),
        _e("counters", "counters", "counters", {"event", "count", "status"}, ("event",),
           "count"),
        _e("clocks", "clocks", "clocks", {"method", "ns", "ticks"}, ("method",), "ns"),
        _e("profile", "profile", "profile", {"tid", "comm", "cpu_ns"}, ("comm",), "cpu_ns"),
        _e("contention", "contention", "profile", {"kind", "threads", "tid", "cpu_ns"},
           ("kind", "threads", "comm"), "cpu_ns"),
    )
}  # fmt: skip


def get(name: str) -> Experiment:
    """The experiment a result names; one line naming the known ones when it is none of them."""
    if name not in EXPERIMENTS:
        known = ", ".join(sorted(EXPERIMENTS))
        raise PerflabError(f"unknown experiment {name!r}; perflab knows {known}")
    return EXPERIMENTS[name]
