"""The one list of experiments: what each is called in a result, which lab module implements it,
which verb runs it, the columns its frames have and the parameter columns that define one of its
points (plan/experiment.py's `Experiment`). An experiment that is a package states its entry
there (`EXPERIMENT`, in its light __init__) and is listed here by one line of PACKAGES.

Verbs, `report`, `diff`, the exporters and the Jupyter view read this list and nothing else, so
an experiment registered here cannot be forgotten by one of them. It imports no numpy:
`perflab --help` may read it.
"""

from __future__ import annotations

import importlib

from perflab.errors import PerflabError
from perflab.plan.experiment import Experiment, ExperimentModule

__all__ = ["EXPERIMENTS", "PACKAGES", "Experiment", "ExperimentModule", "describe", "get"]

# The experiments that are packages of lab/, one line each.
PACKAGES = (
    "pagefault",
    "spin_cost",
    "trig",
    "syscalls",
    "cswitch",
    "contention",
    "memcpy",
    "hugepage_fault",
    "clocks",
    "threads",
    "link_order",
    "env_size",
    "compare",
    "counters",
    "profile",
    "warmup",
    "bisect",
)


def _packaged() -> tuple[Experiment, ...]:
    """The entries the packages state, in the order PACKAGES lists them."""
    found: list[Experiment] = []
    for name in PACKAGES:
        module = importlib.import_module(f"perflab.lab.{name}")
        found.extend(getattr(module, "EXPERIMENTS", None) or (module.EXPERIMENT,))
    return tuple(found)


EXPERIMENTS: dict[str, Experiment] = {e.name: e for e in _packaged()}


def get(name: str) -> Experiment:
    """The experiment a result names; one line naming the known ones when it is none of them."""
    if name not in EXPERIMENTS:
        known = ", ".join(sorted(EXPERIMENTS))
        raise PerflabError(f"unknown experiment {name!r}; perflab knows {known}")
    return EXPERIMENTS[name]


def describe(name: str) -> str:
    """How a user makes a result of `name`: its verb, with the experiment's name where two share
    the verb, and --cluster for a campaign ("sweep threads (threads-program)")."""
    base = name.removesuffix(" campaign")
    e = EXPERIMENTS.get(base)
    if e is None or e.verb is None:
        said = base
    elif sum(other.verb == e.verb for other in EXPERIMENTS.values()) > 1:
        said = f"{e.verb} ({e.name})"
    else:
        said = e.verb
    return f"{said} --cluster" if base != name else said


def recognise(columns: set[str]) -> Experiment | None:
    """The experiment whose columns a frame without metadata has (the most specific one)."""
    fits = [e for e in EXPERIMENTS.values() if e.columns <= columns]
    return max(fits, key=lambda e: len(e.columns)) if fits else None
