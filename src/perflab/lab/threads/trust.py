"""Measurements that say when they cannot be trusted: too short for this machine's timer and
noise, or disturbed by other tasks (the false -30 % hog effects of 6 ms runs in issue 22: the
rule every verb shares, analysis/disturbance.py)."""

from __future__ import annotations

import functools
from dataclasses import asdict, dataclass

import numpy as np

from perflab.analysis.disturbance import disturbed as disturbed
from perflab.analysis.disturbance import others_share as others_share
from perflab.lab import clocks
from perflab.running import spawn

TOLERANCE = 0.05  # one disturbance of the machine's usual size may move a run by at most 5 %
IDLE_RUNS = 30  # trivial children that show the spawn cost and its spread, once per session


@dataclass(frozen=True)
class Floor:
    """The shortest run this machine measures within TOLERANCE, and what it was derived from."""

    tick_ns: int  # CLOCK_MONOTONIC_COARSE resolution: the kernel's tick, a preemption's grain
    spawn_ns: float  # median wall time of a trivial child: exec + exit, in every run
    jitter_ns: float  # p90 - median of those runs: the machine's run-to-run noise
    min_ns: float

    def why(self) -> str:
        return (
            f"timer tick {self.tick_ns / 1e6:.3g} ms, spawn {self.spawn_ns / 1e6:.3g} ms "
            f"± {self.jitter_ns / 1e6:.3g} ms, for {TOLERANCE:.0%}"
        )

    def as_dict(self) -> dict:
        return {**asdict(self), "tolerance": TOLERANCE}


def tick_ns() -> int:
    """The kernel tick as the coarse clock's resolution (readable without root, unlike HZ)."""
    res = clocks.resolution_table().set_index("clock")["res_ns"]
    return int(res["CLOCK_MONOTONIC_COARSE"])


def derive(tick: int, idle_wall_ns: np.ndarray) -> Floor:
    """The floor from the tick and the wall times of trivial runs: a lost tick, the spawn cost
    or the usual jitter must each stay within TOLERANCE of a run."""
    spawn_ns = float(np.median(idle_wall_ns))
    jitter = float(np.percentile(idle_wall_ns, 90) - spawn_ns)
    return Floor(tick, spawn_ns, jitter, max(tick, spawn_ns, jitter) / TOLERANCE)


@functools.cache
def floor(cpus: tuple[int, ...] = ()) -> Floor:
    """This session's floor for children pinned to cpus, measured once with `true`."""
    argv = (spawn.check_program("true"),)
    options = spawn.SpawnOptions(cpus=cpus, timeout=10.0)
    runs = spawn.run_batch([argv], np.zeros(IDLE_RUNS, np.int64), options=options)
    ok = runs[runs["status"] == 0]["wall_ns"]
    return derive(tick_ns(), ok.astype(float) if ok.size else np.array([0.0]))


def too_short(wall_ns: float, spread: float, where: str, limit: Floor, lengthen: str) -> str | None:
    """The warning for a median run shorter than the floor (None when long enough); a tiny
    spread is called out, since it makes a short run look trustworthy when it is not."""
    if wall_ns >= limit.min_ns:
        return None
    tight = f"; its spread of {spread:.1%} does not make it trustworthy" if spread < 0.02 else ""
    return (
        f"{where} took {wall_ns / 1e6:.3g} ms (median), shorter than the "
        f"{limit.min_ns / 1e6:.3g} ms this machine needs ({limit.why()}){tight}: {lengthen}"
    )
