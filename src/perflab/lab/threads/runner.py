"""The worker runner: n workers in C released together, one tidy row each, and the run
conditions every threads experiment records."""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from perflab.core import bindings
from perflab.core.lazy import pd
from perflab.errors import PerflabError, RealTimeOverrun, warn_once, warning
from perflab.lab.threads.hogs import RT_LIMIT_S, RT_PRIORITY, Perturbation, rt_watchdog
from perflab.lab.threads.plan import DEFAULT_LOOPS as DEFAULT_LOOPS
from perflab.lab.threads.plan import DEFAULT_STREAM_BYTES as DEFAULT_STREAM_BYTES
from perflab.lab.threads.plan import LOOP_FACTOR as LOOP_FACTOR
from perflab.lab.threads.plan import POST_LOOPS as POST_LOOPS
from perflab.running.progress import ProgressArg
from perflab.system import counters, machine, provenance

KERNELS = bindings.THREAD_KERNELS
Progress = ProgressArg  # a callback per unit done, False for silence, None for a display
# The columns of run_threads' rows when it counts every event, as the experiments record them.
COLUMNS = ("thread", "cpu", "cpu_start", "cpu_end", "kernel", "loops", "cpu_ns", "wall_ns",
           "ticks", "release_ns", "start_ns", "end_ns", "retries", "steal_ns", "sched_status",
           *counters.COLUMNS)  # fmt: skip


@dataclass(frozen=True)
class Priority:
    """The workers' scheduling: nice value, SCHED_RR or not, and the real-time watchdog."""

    nice: int = 0
    rt: bool = False
    rt_limit: float = RT_LIMIT_S


def prio(priority: Priority | None) -> dict[str, Any]:
    """A Priority as run_threads' keyword arguments."""
    return dataclasses.asdict(priority or Priority())


def kernel_id(name: str) -> int:
    """The native id of a worker kernel; unknown -> one-line error."""
    if name not in KERNELS:
        raise PerflabError(f"unknown kernel {name!r}; use one of {', '.join(KERNELS)}")
    return KERNELS[name]


def check_placement(cpus: Sequence[int | None], oversubscribe: bool = False) -> None:
    """Refuse absent, offline or disallowed CPUs, and more threads than usable CPUs unless
    asked for."""
    machine.check_cpus([c for c in cpus if c is not None])
    usable = machine.usable_cpus()
    if len(cpus) > len(usable) and not oversubscribe:
        raise PerflabError(
            f"{len(cpus)} threads on {len(usable)} usable CPUs: add --oversubscribe to run "
            "more threads than CPUs"
        )


def run_threads(
    cpus: Sequence[int | None],
    loops: int | Sequence[int],
    kernel: str = "loop",
    size: int = DEFAULT_STREAM_BYTES,
    nice: int = 0,
    rt: bool = False,
    events: Sequence[str] | None = None,
    rt_limit: float = RT_LIMIT_S,
) -> pd.DataFrame:
    """Run one worker per entry of cpus (None: scheduler's choice), together; one row per thread.

    rt runs each worker SCHED_RR (time-sliced, like the post's pair on one CPU) under
    rt_watchdog(rt_limit)."""
    if not cpus:
        raise PerflabError("no threads to run")
    machine.check_cpus([c for c in cpus if c is not None])
    per_thread = [loops] * len(cpus) if isinstance(loops, int) else list(loops)
    if any(n < 0 for n in per_thread):
        raise PerflabError("loops must not be negative")
    if kernel == "stream" and size < 8:
        raise PerflabError(f"--size must be at least 8 bytes, not {size}")
    bits = counters.mask(events)
    specs = [
        bindings.ThreadSpec(
            kernel=kernel_id(kernel),
            cpu=-1 if cpu is None else cpu,
            loops=count,
            bytes=size,
            nice=nice,
            rt_priority=RT_PRIORITY if rt else 0,
            event_mask=bits,
        )
        for cpu, count in zip(cpus, per_thread, strict=True)
    ]
    steal0 = steal_ns()
    with rt_watchdog(rt_limit) if rt else contextlib.nullcontext():
        try:
            out = bindings.run_threads(specs)
        except RealTimeOverrun:
            raise PerflabError(
                f"the real-time worker exceeded --rt-limit {rt_limit:g} s (it was dropped to "
                "normal priority, its run discarded); raise --rt-limit or shorten -l"
            ) from None
    steal1 = steal_ns()
    rows = []
    for i, (r, cpu, count) in enumerate(zip(out, cpus, per_thread, strict=True)):
        if r.sched_status:
            _sched_warning(r.sched_status, nice, rt)
        rows.append(
            {
                "thread": i,
                "cpu": -1 if cpu is None else cpu,
                "cpu_start": r.cpu_start,
                "cpu_end": r.cpu_end,
                "kernel": kernel,
                "loops": count,
                "cpu_ns": r.cpu_ns,
                "wall_ns": r.wall_ns,
                "ticks": r.ticks,
                "release_ns": r.release_ns,
                "start_ns": r.start_ns,
                "end_ns": r.end_ns,
                "retries": r.retries,
                "steal_ns": steal1.get(r.cpu_end, 0) - steal0.get(r.cpu_end, 0),
                "sched_status": "ok"
                if r.sched_status == 0
                else bindings.errno_name(r.sched_status),
                **counters.columns(r.counts, bits),
            }
        )
    return pd.DataFrame(rows)


def steal_ns() -> dict[int, int]:
    """Per-CPU steal time so far (/proc/stat, 10 ms ticks): time the hypervisor ran other guests
    on our virtual CPU, which a guest's wall clock sees and its CPU clocks do not."""
    hz = os.sysconf("SC_CLK_TCK")
    out = {}
    with open("/proc/stat") as f:
        for line in f:
            fields = line.split()
            if fields[0].startswith("cpu") and fields[0] != "cpu" and len(fields) > 8:
                out[int(fields[0][3:])] = int(fields[8]) * 1_000_000_000 // hz
    return out


def _sched_warning(rc: int, nice: int, rt: bool) -> None:
    what = " and ".join(filter(None, [f"nice {nice}" if nice else "", "real-time" if rt else ""]))
    warn_once(warning("priority_refused", what=what, why=bindings.errno_text(rc)))


def counter_status(events: Sequence[str] | None = None) -> dict[str, str]:
    """For the metadata: each event's status on this machine ('counts' or why not)."""
    table = counters.available()
    wanted = set(events or counters.EVENTS)
    return {r.event: r.status for r in table.itertuples() if r.event in wanted}


def run_metadata(
    experiment: str,
    loops: int,
    priority: Priority | None,
    perturb: Sequence[Perturbation],
    **extra: Any,
) -> dict[str, Any]:
    """What a threads experiment records beside its rows: machine, conditions, counters."""
    p = priority or Priority()
    return {
        **provenance.metadata(),
        "experiment": experiment,
        "loops": loops,
        "loop_factor": LOOP_FACTOR,
        "nice": p.nice,
        "rt": p.rt,
        "rt_limit_s": p.rt_limit if p.rt else None,
        "perturb": [str(x) for x in perturb],
        "shared_machine_note": "other processes may run on these CPUs",
        **extra,
        "counters": counter_status(),
    }
