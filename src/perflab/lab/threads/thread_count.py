"""easyperf's thread-count scaling: a fixed total of work split over 1..N threads, with
throughput, speedup, efficiency, CPU utilisation and the spinning that synchronisation costs."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import perflab.lab.threads as threads  # the package's run_threads: callers may substitute it
from perflab.analysis import disturbance
from perflab.analysis.summary import Summary, Table
from perflab.core.lazy import pd
from perflab.errors import PerflabError
from perflab.lab.threads import EXPERIMENTS
from perflab.lab.threads.hogs import Perturbation, perturbed
from perflab.lab.threads.runner import (
    COLUMNS,
    DEFAULT_LOOPS,
    DEFAULT_STREAM_BYTES,
    LOOP_FACTOR,
    Priority,
    Progress,
    check_placement,
    kernel_id,
    prio,
)
from perflab.plan import controls
from perflab.plan.experiment import reads_frame
from perflab.running import inprocess
from perflab.running.progress import OnStart
from perflab.store.recording import Recording
from perflab.system import limits, machine

if TYPE_CHECKING:
    from matplotlib.figure import Figure

# the check each public reader of this module's frames makes first
READS = reads_frame("threads.thread_count", *(e for e in EXPERIMENTS if e.module == __name__))


def split(total: int, n: int) -> list[int]:
    """Total loops shared among n threads as evenly as whole loops allow (strong scaling)."""
    return [total // n + (1 if i < total % n else 0) for i in range(n)]


@controls.typed_arguments
def run(
    max_threads: int,
    kernel: str = "loop",
    loops: int = DEFAULT_LOOPS,
    size: int = DEFAULT_STREAM_BYTES,
    repeat: int = 3,
    pin: bool = True,
    oversubscribe: bool = False,
    priority: Priority | None = None,
    perturb: Sequence[Perturbation] = (),
    progress: Progress = None,
    *,
    on_start: OnStart | None = None,
    output: str | os.PathLike | None = None,
    resume: bool = False,
    discard_bad: bool = False,
) -> pd.DataFrame:
    """Fixed total work split over 1..max_threads threads (pinned round-robin over the usable
    CPUs unless pin=False), interleaved repeats; one row per thread run.

    output: a .parquet/.csv journal, written in chunks of runs as they are measured;
    resume=True completes an interrupted one (inprocess.measure); progress counts runs."""
    kernel_id(kernel)
    if max_threads < 1 or loops < 1 or repeat < 1:
        raise PerflabError("--max, --loops and --repeat must be at least 1")
    controls.check_rows(
        {"--repeat": repeat}, max_threads * (max_threads + 1) // 2, 0, controls.PLANNED_ROW_BYTES
    )
    limits.check_threads("--max", max_threads)
    usable = machine.usable_cpus()
    check_placement([None] * max_threads, oversubscribe)
    if loops < max_threads:
        raise PerflabError(f"--loops {loops} cannot be shared among {max_threads} threads")

    def timed(keys: pd.DataFrame) -> pd.DataFrame:
        frames = []
        for (rep, n), _ in keys.groupby(["rep", "threads"], sort=False):
            cpus = [usable[i % len(usable)] if pin else None for i in range(n)]
            try:
                df = threads.run_threads(cpus, split(loops, n), kernel, size, **prio(priority))
            except PerflabError as exc:
                raise limits.threads_failed(exc, n) from None
            df.insert(0, "threads", n)
            df.insert(1, "rep", rep)
            df["bytes"] = size if kernel == "stream" else 0
            df["status"] = "ok"
            frames.append(df)
        return pd.concat(frames, ignore_index=True)

    keys = pd.DataFrame(
        [(n, rep, t) for rep in range(repeat) for n in range(1, max_threads + 1) for t in range(n)],
        columns=["threads", "rep", "thread"],
    )
    params = {"max_threads": max_threads, "kernel": kernel, "loops": loops, "size": size,
              "repeat": repeat, "pin": pin, "cpus": usable if pin else None,
              "oversubscribe": oversubscribe, **prio(priority),
              "perturb": [str(p) for p in perturb]}  # fmt: skip
    meta = threads.run_metadata(
        "threads", loops, priority, perturb, kernel=kernel, size=size, pinned=pin
    )
    columns = ("threads", "rep", *COLUMNS, "bytes", "status")
    plan = inprocess.RowSchedule("threads", keys, columns, params, meta, unit=("rep", "threads"))
    with perturbed(perturb):
        return inprocess.measure(plan, timed, Recording(output, resume, discard_bad),
                                 on_start=on_start, progress=progress)  # fmt: skip


@READS
def summarize(df: pd.DataFrame) -> pd.DataFrame:
    """easyperf's views per thread count: throughput, speedup, efficiency, CPU utilisation,
    instructions and IPC (NaN where the counters do not count), CAS retries and the CPU time
    per loop relative to one thread (cpu_per_loop_x)."""
    runs = df.groupby(["threads", "rep"]).agg(
        loops=("loops", "sum"),
        start=("release_ns", "min"),
        end=("end_ns", "max"),
        cpu_ns=("cpu_ns", "sum"),
        retries=("retries", "sum"),
        instructions=("instructions", lambda s: s.sum(min_count=len(s))),
        cycles=("cycles", lambda s: s.sum(min_count=len(s))),
        context_switches=("context_switches", "sum"),
    )
    runs["wall_ns"] = runs["end"] - runs["start"]
    per_n = runs.groupby("threads").median()
    base = per_n["wall_ns"].iloc[0]
    n = per_n.index.to_numpy()
    out = pd.DataFrame(
        {
            "threads": n,
            "wall_ms": per_n["wall_ns"].to_numpy() / 1e6,
            "cpu_ms": per_n["cpu_ns"].to_numpy() / 1e6,
            "loops_per_s": (per_n["loops"] / (per_n["wall_ns"] / 1e9)).to_numpy(),
            "speedup": (base / per_n["wall_ns"]).to_numpy(),
        }
    )
    out["efficiency"] = out["speedup"] / out["threads"]
    out["utilisation"] = per_n["cpu_ns"].to_numpy() / per_n["wall_ns"].to_numpy()
    out["instructions"] = per_n["instructions"].to_numpy()
    out["ipc"] = (per_n["instructions"] / per_n["cycles"]).to_numpy()
    out["cas_retries"] = per_n["retries"].to_numpy()
    # easyperf's "36 % more instructions" as spinning, counted without a PMU: failed CAS per
    # increment done.
    out["retry_pct"] = (per_n["retries"] / (per_n["loops"] * LOOP_FACTOR) * 100).to_numpy()
    # What one increment (one unit of work) costs in CPU time against one thread: spin's
    # cache-line ping-pong shows here as well as in the retries.
    cpu_per_loop = (per_n["cpu_ns"] / per_n["loops"]).to_numpy()
    out["cpu_per_loop_x"] = cpu_per_loop / cpu_per_loop[0]
    out["context_switches"] = per_n["context_switches"].to_numpy()
    return out


def plot_summary(table: pd.DataFrame, path: Any, kernel: str) -> Figure:
    """Speedup and CPU utilisation vs threads against the ideal line, efficiency below."""
    from perflab.analysis import plot as plt

    fig, (ax, ax2) = plt.figure(2, 1, figsize=(8, 7), sharex=True)
    n = table["threads"]
    ax.plot(n, n, ":", color="#555555", label="ideal")
    ax.plot(n, table["speedup"], "o-", label="speedup (wall 1 / wall N)")
    ax.plot(n, table["utilisation"], "s-", label="CPU utilisation (CPU time / wall)")
    ax.set_ylabel("relative to 1 thread / busy threads")
    ax.legend(loc="upper left")
    ax2.plot(n, table["efficiency"] * 100, "o-", color=plt.COLORS[2])
    ax2.set_ylabel("parallel efficiency (%)")
    ax2.set_xlabel("threads")
    ax2.set_xticks(n)
    return plt.save(fig, path, title=f"thread scaling, {kernel} kernel")


@READS
def plot(df: pd.DataFrame, path: Any = None) -> Figure:
    """The figure of a run: speedup, utilisation and efficiency per thread count."""
    return plot_summary(summarize(df), path, str(df["kernel"].iloc[0]))


@READS
def summary(frame: pd.DataFrame, meta: dict[str, Any]) -> Summary:
    """Throughput, speedup, efficiency and utilisation per thread count; the spin kernel's CAS
    retries, and IPC where the counters count."""
    kernel = str(frame["kernel"].iloc[0])  # the workload's (meta's "kernel" may be the OS's)
    table = summarize(frame)
    hidden = [] if kernel == "spin" else ["cas_retries", "retry_pct"]
    lines = []
    counters = meta.get("counters", {})
    if table["ipc"].isna().all():
        hidden += ["instructions", "ipc"]
        lines.append(f"instructions, IPC: {counters.get('instructions', 'not counted')}")
    reps = int(frame["rep"].nunique())
    title = (
        f"{kernel} kernel, {meta.get('loops', '?')} loops({meta.get('loop_factor', '?')}) "
        f"shared, median of {reps}"
    )
    shown = Table("scaling", title, table, shown=table.drop(columns=hidden))
    ncpus = len(meta.get("cpus") or machine.usable_cpus())
    disturbed = disturbance.worker_verdict(frame, ["threads", "rep"], ncpus, meta)
    lines += [f"warning: {disturbed['line']}"] if disturbed["line"] else []
    values = {"kernel": kernel, "counters": counters, "disturbed": disturbed}
    return Summary(lines, [shown], values, lambda p: plot(frame, p))
