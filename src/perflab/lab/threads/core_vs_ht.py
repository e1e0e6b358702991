"""DjiBee's cputime_core_vs_ht: one thread, then two released together, per placement (same
CPU, hyper-thread siblings, two cores, two sockets); CPU time summed, elapsed time averaged."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

import perflab.lab.threads as threads  # the package's run_threads: callers may substitute it
from perflab.analysis import disturbance
from perflab.analysis.summary import Summary, Table
from perflab.core.lazy import pd
from perflab.errors import PerflabError
from perflab.lab.threads import EXPERIMENTS
from perflab.lab.threads.hogs import Perturbation, perturbed
from perflab.lab.threads.runner import COLUMNS, DEFAULT_LOOPS, LOOP_FACTOR, Priority, Progress, prio
from perflab.plan import controls
from perflab.plan.experiment import reads_frame
from perflab.running import inprocess
from perflab.running.progress import OnStart
from perflab.store import results
from perflab.store.recording import Recording
from perflab.system import machine

if TYPE_CHECKING:
    from matplotlib.figure import Figure

# the check each public reader of this module's frames makes first
READS = reads_frame("threads.core_vs_ht", *(e for e in EXPERIMENTS if e.module == __name__))


@dataclass(frozen=True)
class ThreadPair:
    """Where two threads go, labelled from the topology, or why this machine has no such pair."""

    name: str
    cpus: tuple[int | None, int | None]
    label: str
    available: bool = True


def placements(topo: pd.DataFrame | None = None) -> list[ThreadPair]:
    """The post's matrix: scheduler's choice, same CPU, hyper-thread siblings, two cores of one
    socket, two sockets; rows this topology (or the affinity mask) lacks say so."""
    scope = "not on this machine"
    if topo is None:
        topo = machine.topology()
        usable = topo["cpu"].isin(machine.usable_cpus())
        if not usable.all():
            scope = f"not among the allowed CPUs ({machine.format_cpu_list(topo['cpu'][usable])})"
        topo = topo[usable]
    rows = list(topo.itertuples())
    first = rows[0]

    def where(r: Any) -> str:
        return f"cpu {r.cpu} (core {r.core}, socket {r.socket})"

    def first_pair(name: str, pairs: list[tuple[Any, Any]], missing: str) -> ThreadPair:
        if not pairs:
            return ThreadPair(name, (None, None), f"{scope}: {missing}", False)
        a, b = pairs[0]
        return ThreadPair(name, (a.cpu, b.cpu), f"{where(a)} + {where(b)}")

    ordered = [(a, b) for a in rows for b in rows if a.cpu < b.cpu]
    siblings = [(a, b) for a, b in ordered if a.core == b.core]
    cores = [(a, b) for a, b in ordered if a.socket == b.socket and a.core != b.core]
    sockets = [(a, b) for a, b in ordered if a.socket != b.socket]
    return [
        ThreadPair("scheduler", (None, None), "no pinning: the scheduler places both"),
        ThreadPair("same cpu", (first.cpu, first.cpu), f"both on {where(first)}"),
        first_pair(
            "hyper-threads", siblings, "no SMT, every core has one thread (thread_siblings_list)"
        ),
        first_pair("two cores", cores, "one core per socket"),
        first_pair("two sockets", sockets, f"{topo['socket'].nunique()} socket"),
    ]


def given_placement(cpus: Sequence[int]) -> ThreadPair:
    """`-p A -p B` as in the post: one -p leaves the second thread to the scheduler."""
    if not 1 <= len(cpus) <= 2:
        raise PerflabError(f"give one or two -p CPUs (as the post), not {len(cpus)}")
    machine.check_cpus(cpus)
    pair = (cpus[0], cpus[1] if len(cpus) > 1 else None)
    return ThreadPair("given", pair, " + ".join("free" if c is None else f"cpu {c}" for c in pair))


@controls.typed_arguments
def run(
    loops: int = DEFAULT_LOOPS,
    cpus: Sequence[int] = (),
    repeat: int = 1,
    priority: Priority | None = None,
    perturb: Sequence[Perturbation] = (),
    progress: Progress = None,
    *,
    on_start: OnStart | None = None,
    output: str | os.PathLike | None = None,
    resume: bool = False,
    discard_bad: bool = False,
) -> pd.DataFrame:
    """cputime_core_vs_ht: 1 thread then 2 together, per placement; one row per thread run.

    output: a .parquet/.csv journal, written in chunks of runs as they are measured;
    resume=True completes an interrupted one (inprocess.measure); progress counts runs of 1
    or 2 threads."""
    if loops < 1 or repeat < 1:
        raise PerflabError("--loops and --repeat must be at least 1")
    places = {p.name: p for p in ([given_placement(cpus)] if cpus else placements())}
    # Three thread runs a repeat per placement: 1 thread, then 2.
    controls.check_rows({"--repeat": repeat}, 3 * len(places), 0, controls.PLANNED_ROW_BYTES)
    params = {"loops": loops, "cpus": list(cpus), "repeat": repeat, **prio(priority),
              "perturb": [str(p) for p in perturb],
              "placements": [[p.name, *p.cpus] for p in places.values()]}  # fmt: skip
    meta = threads.run_metadata("core-vs-ht", loops, priority, perturb, cpus=list(cpus))

    def timed(keys: pd.DataFrame) -> pd.DataFrame:
        frames = []
        for (name, rep, n), _ in keys.groupby(["placement", "rep", "threads"], sort=False):
            p = places[str(name)]
            if not p.available:
                frames.append(pd.DataFrame([_absent_row(p)]))
                continue
            df = threads.run_threads(list(p.cpus[: int(n)]), loops, **prio(priority))
            df.insert(0, "placement", p.name)
            df.insert(1, "label", p.label)
            df.insert(2, "threads", n)
            df.insert(3, "rep", rep)
            df["status"] = "ok"
            frames.append(df)
        return pd.concat(frames, ignore_index=True)

    columns = ("placement", "label", "threads", "rep", *COLUMNS, "status")
    plan = inprocess.RowSchedule("core-vs-ht", _keys(list(places.values()), repeat), columns,
                                 params, meta, unit=("placement", "rep", "threads"))  # fmt: skip
    with perturbed(perturb):
        return inprocess.measure(plan, timed, Recording(output, resume, discard_bad),
                                 on_start=on_start, progress=progress)  # fmt: skip


def _keys(places: list[ThreadPair], repeat: int) -> pd.DataFrame:
    """A row per thread run in run order: 1 thread then 2 per placement, repeats interleaved;
    a placement this machine lacks has one row (thread NaN) that says why it was not run."""
    rows: list[tuple[str, int, int, float]] = []
    for rep in range(repeat):
        for p in places:
            if p.available:
                rows += [(p.name, rep, n, t) for n in (1, 2) for t in range(n)]
            elif rep == 0:
                rows.append((p.name, 0, 2, np.nan))
    return pd.DataFrame(rows, columns=["placement", "rep", "threads", "thread"])


def _absent_row(p: ThreadPair) -> dict[str, Any]:
    return {"placement": p.name, "label": p.label, "threads": 2, "rep": 0, "status": "unavailable"}


def post_lines(df: pd.DataFrame, loops: int) -> list[tuple[str, str]]:
    """The post's output, (placement, line) per run: cpu time summed, elapsed time averaged."""
    lines = []
    ok = df[df["status"] == "ok"]
    for (name, _, n), g in ok.groupby(["placement", "rep", "threads"], sort=False):
        cpu_ms = g["cpu_ns"].sum() / 1e6
        wall_ms = g["wall_ns"].mean() / 1e6
        lines.append(
            (
                str(name),
                f"ran {n} x {loops} loops({LOOP_FACTOR}), cpu time {cpu_ms:.2f}(ms) "
                f"elapsed time {wall_ms:.2f}(ms)",
            )
        )
    return lines


@READS
def summarize(df: pd.DataFrame) -> pd.DataFrame:
    """Per placement: median 1- and 2-thread CPU and wall times and their 2/1 ratios."""
    rows = []
    for name, g in df.groupby("placement", sort=False):
        label = g["label"].iloc[0]
        if (g["status"] != "ok").all():
            rows.append({"placement": name, "cpus": label})
            continue
        per_run = (
            g.groupby(["rep", "threads"])
            .agg(
                cpu_ns=("cpu_ns", "sum"), wall_ns=("wall_ns", "mean"), steal_ns=("steal_ns", "max")
            )
            .groupby("threads")
            .median()
        )
        one, two = per_run.loc[1], per_run.loc[2]
        rows.append(
            {
                "placement": name,
                "cpus": label,
                "cpu_ms_1": one.cpu_ns / 1e6,
                "wall_ms_1": one.wall_ns / 1e6,
                "cpu_ms_2": two.cpu_ns / 1e6,
                "wall_ms_2": two.wall_ns / 1e6,
                "cpu_ratio": two.cpu_ns / one.cpu_ns,
                "wall_ratio": two.wall_ns / one.wall_ns,
                "steal_ms_2": two.steal_ns / 1e6,
            }
        )
    return pd.DataFrame(rows)


def plot_summary(summary: pd.DataFrame, path: Any, loops: int) -> Figure:
    """Bars of CPU and wall time with 1 and 2 threads per placement; absent ones marked."""
    from perflab.analysis import plot as plt

    fig, ax = plt.figure(figsize=(9, 5))
    x = np.arange(len(summary))
    width = 0.2
    bars = [
        ("cpu_ms_1", "CPU time, 1 thread"),
        ("wall_ms_1", "wall time, 1 thread"),
        ("cpu_ms_2", "CPU time, 2 threads (sum)"),
        ("wall_ms_2", "wall time, 2 threads (mean)"),
    ]
    for i, (col, name) in enumerate(bars):
        values = summary[col] if col in summary else pd.Series(np.nan, index=summary.index)
        ax.bar(x + (i - 1.5) * width, values.fillna(0), width, label=name)
    top = np.nanmax(summary[[c for c, _ in bars if c in summary]].to_numpy(dtype=float))
    for i, row in enumerate(summary.itertuples()):
        if pd.isna(getattr(row, "cpu_ms_1", np.nan)):
            ax.text(i, top * 0.05, "not on\nthis machine", ha="center", va="bottom", fontsize=8)
    ax.set_xticks(x, summary["placement"])
    ax.set_ylabel("time (ms)")
    ax.set_ylim(0, top * 1.05)
    # above the axes, in one row: inside, it covers the first placement's tallest bar
    ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=4, fontsize=8, frameon=False)
    return plt.save(
        fig, path, title=f"core vs hyper-thread: {loops} loops({LOOP_FACTOR}) per thread"
    )


@READS
def plot(df: pd.DataFrame, path: Any = None) -> Figure:
    """The figure of a run: its summary as bars per placement."""
    loops = results.metadata(df).get("loops") or int(df["loops"].dropna().iloc[0])
    return plot_summary(summarize(df), path, loops)


@READS
def summary(frame: pd.DataFrame, meta: dict[str, Any]) -> Summary:
    """The post's lines under each placement (alone when -p chose one), and 2 threads / 1 thread
    per placement."""
    loops = int(meta.get("loops") or frame["loops"].dropna().iloc[0])
    runs = post_lines(frame, loops)
    names = list(dict.fromkeys(frame["placement"]))
    if len(names) == 1:
        lines = [line for _, line in runs]
    else:
        lines = []
        labels = frame.groupby("placement", sort=False)["label"].first()
        for name in names:
            lines.append(f"# {name}: {labels[name]}")
            lines += [line for placement, line in runs if placement == name]
    title = "per placement (ms; ratio = 2 threads / 1 thread)"
    table = Table("placements", title, summarize(frame))
    ncpus = len(machine.usable_cpus())
    disturbed = disturbance.worker_verdict(frame, ["placement", "rep", "threads"], ncpus, meta)
    lines += [f"warning: {disturbed['line']}"] if disturbed["line"] else []
    return Summary(lines, [table], {"disturbed": disturbed}, lambda p: plot(frame, p))
