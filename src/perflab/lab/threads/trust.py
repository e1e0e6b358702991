"""Measurements that say when they cannot be trusted: too short for this machine's timer and
noise, or disturbed by other tasks (the false -30 % hog effects of 6 ms runs in issue 22)."""

from __future__ import annotations

import functools
from dataclasses import asdict, dataclass

import numpy as np

from perflab.core.lazy import pd
from perflab.engine import spawn
from perflab.lab import clocks

TOLERANCE = 0.05  # one disturbance of the machine's usual size may move a run by at most 5 %
IDLE_RUNS = 30  # trivial children that show the spawn cost and its spread, once per session
# Involuntary switches per CPU-second above which a run shared its CPUs with other tasks: a
# thread alone on its CPU is preempted only by short kernel work, a few times a second.
PREEMPT_PER_CPU_S = 50.0
DROP = 0.2  # a run whose utilisation is 20 % below its peers' median lost CPU they did not
# Run-queue wait of all a run's threads, summed, as a share of its wall time, above which it
# waited for CPUs others held: a program whose threads each have a CPU waits only for wakeups
# (well under 1 %); a CPU hog sharing one of its CPUs makes it wait about half the run.
RUNQ_SHARE = 0.1
# Share of a run's CPU time (its CPUs x its wall time) that other tasks took, at most which
# the CPUs were the run's: its preemptions and run-queue wait were its own threads' doing (xz's
# main thread beside its -T2 workers on 2 CPUs: 59 preemptions per CPU-second, others 1-2 %).
OTHERS_SHARE = 0.05
# /proc/stat counts each CPU in 10 ms steps, so a share is judged only in runs long enough
# for one step to be at most half of OTHERS_SHARE (400 ms); shorter ones keep the rules above.
BUSY_STEP_NS = 10_000_000


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


def others_share(busy_ns: pd.Series, cpu_ns: pd.Series, wall_ns: pd.Series,
                 ncpus: int) -> pd.Series:  # fmt: skip
    """Per run, the share of its CPUs' time (ncpus x wall) that other tasks took: their busy
    time around it less its own CPU time; NaN where not read or too short to judge."""
    wall = wall_ns.astype(float)
    share = (busy_ns - cpu_ns).clip(lower=0) / (ncpus * wall)
    return share.where(wall * OTHERS_SHARE / 2 >= BUSY_STEP_NS)


def disturbed(cpu_ns: pd.Series, wall_ns: pd.Series, nivcsw: pd.Series, group: pd.Series,
              alone: pd.Series, runq_ns: pd.Series | None = None,
              others: pd.Series | None = None) -> pd.Series:  # fmt: skip
    """Why each run looks disturbed ('' when it does not): preempted or waiting for a CPU
    (only where its threads had a CPU each, `alone`, and the share of its CPUs other tasks
    took, `others`, is not known to be at most OTHERS_SHARE: then they were its own threads';
    runq_ns or others NaN: not read or not judged), with that share said where it was larger;
    or far less busy than its peers. Others busy on a CPU the run did not want (a 1-thread run
    on 2 CPUs beside a hog) is no disturbance by itself."""
    util = cpu_ns / wall_ns
    rate = nivcsw / (cpu_ns / 1e9).clip(lower=1e-9)
    peers = util.groupby(group).transform("median")
    why = pd.Series("", index=cpu_ns.index, dtype=object)

    def add(hit: pd.Series, texts: list[str]) -> None:
        why[hit] = [", ".join(filter(None, [w, t])) for w, t in zip(why[hit], texts, strict=True)]

    if others is not None:
        alone = alone & ~(others <= OTHERS_SHARE)  # NaN compares False: not judged
    preempted = alone & (rate > PREEMPT_PER_CPU_S)
    add(preempted, [f"preempted {r:.0f}/CPU-s" for r in rate[preempted]])
    if runq_ns is not None:
        share = runq_ns / wall_ns
        waited = alone & (share > RUNQ_SHARE)  # NaN compares False: not read, not judged
        add(waited, [f"waited for a CPU {s:.0%} of the wall time" for s in share[waited]])
    if others is not None:
        took = (why != "") & (others > OTHERS_SHARE)
        add(took, [f"other tasks took {s:.0%} of its CPUs" for s in others[took]])
    low = util < (1 - DROP) * peers
    pairs = zip(util[low], peers[low], strict=True)
    add(low, [f"utilisation {u:.2f} vs {p:.2f}" for u, p in pairs])
    return why
