"""DjiBee's FauxPlat/sec: loops per CPU second of one pinned thread, alone and under each
perturbation, with its spread and its change against running alone."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

import perflab.lab.threads as threads  # the package's run_threads: callers may substitute it
from perflab.analysis import stats
from perflab.analysis.summary import Summary, Table
from perflab.core.lazy import pd
from perflab.errors import PerflabError
from perflab.lab.threads import EXPERIMENTS
from perflab.lab.threads.hogs import Perturbation, default_perturbations, perturbed
from perflab.lab.threads.runner import DEFAULT_LOOPS, DEFAULT_STREAM_BYTES, Priority, Progress, prio
from perflab.plan import controls
from perflab.plan.experiment import reads_frame
from perflab.running import inprocess
from perflab.running.progress import OnStart
from perflab.store.recording import Recording
from perflab.system import machine

if TYPE_CHECKING:
    from matplotlib.figure import Figure

COLUMNS = ("condition", "rep", "cpu", "kernel", "loops", "cpu_ns", "wall_ns", "ticks",
           "context_switches", "steal_ns", "fauxplat_per_s", "fauxplat_wall_per_s",
           "status")  # fmt: skip

# the check each public reader of this module's frames makes first
READS = reads_frame("threads.fauxplat", *(e for e in EXPERIMENTS if e.module == __name__))


@controls.typed_arguments
def run(
    loops: int = DEFAULT_LOOPS,
    repeat: int = 5,
    cpu: int = 0,
    perturb: Sequence[Perturbation] | None = None,
    priority: Priority | None = None,
    progress: Progress = None,
    kernel: str = "loop",
    size: int = DEFAULT_STREAM_BYTES,
    *,
    on_start: OnStart | None = None,
    output: str | os.PathLike | None = None,
    resume: bool = False,
    discard_bad: bool = False,
) -> pd.DataFrame:
    """FauxPlat/sec = loops / CPU seconds of one pinned thread, alone and under each
    perturbation (default: a cpu, cache and rt hog on cpu), repeats interleaved so drift hits
    every condition alike.

    output: a .parquet/.csv journal, written in chunks of measurements as they are made;
    resume=True completes an interrupted one (inprocess.measure); progress counts them."""
    if loops < 1 or repeat < 1:
        raise PerflabError("--loops and --repeat must be at least 1")
    machine.check_cpus([cpu])
    chosen = list(perturb) if perturb is not None else default_perturbations(cpu)
    conditions: dict[str, Perturbation | None] = {"alone": None, **{str(p): p for p in chosen}}
    controls.check_rows({"--repeat": repeat}, len(conditions), 0, controls.PLANNED_ROW_BYTES)

    def timed(keys: pd.DataFrame) -> pd.DataFrame:
        rows = []
        for rep, condition in keys.itertuples(index=False):
            p = conditions[str(condition)]
            with perturbed([p] if p else []):
                df = threads.run_threads([cpu], loops, kernel, size, **prio(priority))
            r = df.iloc[0]
            rows.append(
                {
                    "condition": condition,
                    "rep": rep,
                    "cpu": cpu,
                    "kernel": kernel,
                    "loops": loops,
                    "cpu_ns": r.cpu_ns,
                    "wall_ns": r.wall_ns,
                    "ticks": r.ticks,
                    "context_switches": r.context_switches,
                    "steal_ns": r.steal_ns,
                    "fauxplat_per_s": loops / (r.cpu_ns / 1e9),
                    "fauxplat_wall_per_s": loops / (r.wall_ns / 1e9),
                    "status": "ok",
                }
            )
        return pd.DataFrame(rows)

    keys = pd.DataFrame(
        [(rep, c) for rep in range(repeat) for c in conditions], columns=["rep", "condition"]
    )
    params = {"loops": loops, "repeat": repeat, "cpu": cpu, "perturb": list(conditions)[1:],
              **prio(priority), "kernel": kernel, "size": size}  # fmt: skip
    meta = threads.run_metadata("fauxplat", loops, priority, chosen, cpu=cpu, kernel=kernel)
    plan = inprocess.RowSchedule("fauxplat", keys, COLUMNS, params, meta)
    return inprocess.measure(plan, timed, Recording(output, resume, discard_bad),
                             on_start=on_start, progress=progress)  # fmt: skip


def point(rep: int, **options: Any) -> pd.DataFrame:
    """One repeat of run(): what a campaign hands to a host (the caller numbers it)."""
    del rep
    return run(repeat=1, progress=False, **options)  # the campaign shows progress per point


# Alone, the pinned thread should have its CPU to itself: elapsed time this much over its CPU
# time means other tasks (or the host, as steal) took the CPU from it, and the index alone is
# then no baseline a perturbation can be weighed against. The same bound as the CLI's hint.
BUSY_WALL_OVER_CPU = 1.2
PER_CPU = "per_cpu_s"  # FauxPlat (loops) per CPU second of the thread: the post's index
PER_WALL = "per_wall_s"  # per elapsed second: what a user waiting on the thread would see


@READS
def summarize(df: pd.DataFrame) -> pd.DataFrame:
    """Spread of the index per condition, its median change vs alone (the post: 10 %, 20 %),
    and whether the perturbation's change is a result: void where it read faster than alone
    beyond alone's own spread (a perturbation cannot speed the thread: alone was disturbed),
    or where alone did not have its CPU to itself (busy())."""
    rows = []
    for cond, g in df.groupby("condition", sort=False):
        s = stats.summary(g["fauxplat_per_s"])
        rows.append(
            {
                "condition": cond,
                "n": s["n"],
                f"median_{PER_CPU}": s["median"],
                f"min_{PER_CPU}": s["min"],
                f"max_{PER_CPU}": s["max"],
                f"mad_{PER_CPU}": s["mad"],
                f"median_{PER_WALL}": float(np.median(g["fauxplat_wall_per_s"])),
                "wall_over_cpu": float(np.median(g["wall_ns"] / g["cpu_ns"])),
            }
        )
    out = pd.DataFrame(rows)
    alone = out.loc[out["condition"] == "alone"].iloc[0]
    median = f"median_{PER_CPU}"
    out["change_pct"] = (out[median] / alone[median] - 1) * 100
    out["wall_change_pct"] = (out[f"median_{PER_WALL}"] / alone[f"median_{PER_WALL}"] - 1) * 100
    busy = alone["wall_over_cpu"] > BUSY_WALL_OVER_CPU
    faster = out[median] > alone[median] + alone[f"mad_{PER_CPU}"]
    out["result"] = np.where(
        out["condition"] == "alone",
        "baseline",
        np.where(busy, "void: CPU busy alone",
                 np.where(faster, "void: faster than alone",
                          np.where(out["change_pct"] < 0, "slower", "no change shown"))),
    )  # fmt: skip
    return out


def void_lines(table: pd.DataFrame) -> list[str]:
    """Why the perturbations' changes are no result, where they are not, in one line."""
    alone = table.iloc[0]
    why = []
    if alone["wall_over_cpu"] > BUSY_WALL_OVER_CPU:
        why.append(
            f"alone, elapsed time was {alone['wall_over_cpu']:.1f}x the thread's CPU time (over "
            f"{BUSY_WALL_OVER_CPU:g}x: other tasks, or the host, took its CPU)"
        )
    median = f"median_{PER_CPU}"
    faster = table.iloc[1:][table[median].iloc[1:] > alone[median] + alone[f"mad_{PER_CPU}"]]
    if len(faster):
        said = ", ".join(f"{r.condition} {r.change_pct:+.1f}%" for r in faster.itertuples())
        why.append(
            f"{said} read faster than alone beyond alone's spread, which a perturbation "
            "cannot make the thread"
        )
    if not why:
        return []
    return [
        "void: the changes under perturbation below are no result: "
        + "; and ".join(why)
        + ". Rerun on a quiet CPU (--cpu), or with --rt to keep other tasks off it."
    ]


@READS
def plot(df: pd.DataFrame, path: Any = None) -> Figure:
    """FauxPlat/sec per repeat and condition (CPU time based), box per condition."""
    from perflab.analysis import plot as plt

    fig, ax = plt.figure(figsize=(8, 5))
    names = list(dict.fromkeys(df["condition"]))
    data = [df.loc[df["condition"] == n, "fauxplat_per_s"].to_numpy() for n in names]
    ax.boxplot(data, tick_labels=names)
    for i, values in enumerate(data, start=1):
        ax.plot(np.full(len(values), i), values, "o", color=plt.COLORS[0], alpha=0.6)
    ax.set_ylabel("FauxPlat/sec (loops per CPU second)")
    return plt.save(fig, path, title="FauxPlat/sec alone and perturbed")


@READS
def summary(frame: pd.DataFrame, meta: dict[str, Any]) -> Summary:
    """FauxPlat/sec alone, and its spread and change under each perturbation."""
    table = summarize(frame)
    alone = table.iloc[0]
    reps = int(frame["rep"].nunique())
    kernel = str(frame["kernel"].iloc[0])  # the workload's (meta's "kernel" may be the OS's)
    lines = [
        f"{meta.get('loops', '?')} loops({meta.get('loop_factor', '?')}) of {kernel} "
        f"on cpu {meta.get('cpu', '?')}: {alone[f'median_{PER_CPU}']:.2f} FauxPlat/sec "
        f"(median of {reps}, loops / CPU second)"
    ]
    lines += void_lines(table)
    title = (
        f"FauxPlat/sec per condition (n: runs; {PER_CPU}: loops per CPU second of the thread; "
        f"{PER_WALL}: per elapsed second; wall_over_cpu: elapsed over CPU time, x; changes in % "
        "vs alone)"
    )
    void = table["result"].str.startswith("void")
    if void.any():
        title += f": void for {int(void.sum())} of {len(table) - 1} perturbations"
    values = {k: meta.get(k) for k in ("loops", "cpu")} | {"kernel": kernel}
    return Summary(lines, [Table("fauxplat", title, table)], values, lambda p: plot(frame, p))
