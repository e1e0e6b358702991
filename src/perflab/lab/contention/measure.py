"""The contention workload profiled: each (kind, threads) run through profile.run, one row per
run with its wall, utilisation and where the workers' samples and time went."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from perflab.analysis.summary import Summary, Table
from perflab.core.lazy import pd
from perflab.lab import profile
from perflab.lab.contention import ContentionPlan
from perflab.lab.profile.workload import command
from perflab.plan import controls
from perflab.store import results
from perflab.store.recording import Recording
from perflab.system import perfsamples, provenance

WAITING = ("spin_lock", "__lll_lock_wait", "__GI___lll_lock_wait", "pthread_mutex_lock")


@controls.typed_arguments
def run(
    threads: Sequence[int] = ContentionPlan.threads,
    kinds: Sequence[str] = ContentionPlan.kinds,
    iterations: int = ContentionPlan.iterations,
    work: int = ContentionPlan.work,
    sample_hz: int | None = ContentionPlan.sample_hz,
    repeat: int = ContentionPlan.repeat,
    profiles: list[pd.DataFrame] | None = None,
    *,
    recording: Recording | None = None,
) -> pd.DataFrame:
    """Profile the workload for every kind and thread count, repeat times round-robin (so a
    neighbour's load falls on every point alike): one row per run with its wall, utilisation
    and where the workers' samples and time went, saved whole at the recording's output if any.
    profiles: a list that receives each run's full profile frame (profile.run's)."""
    ContentionPlan(tuple(threads), tuple(kinds), iterations, work, sample_hz, repeat).check()
    recording = recording or Recording()
    recording.check_whole("contention")
    rows, event = [], None
    for r in range(repeat):
        for kind in kinds:
            for n in sorted(set(threads)):
                df = profile.run(command(kind, n, iterations, work), sample_hz=sample_hz)
                event = results.metadata(df).get("samples_event") or event
                rows.append({**_row(kind, n, df, iterations), "rep": r})
                if profiles is not None:
                    profiles.append(df)
    out = pd.DataFrame(rows)
    meta = {
        **provenance.metadata(),
        "experiment": "contention",
        "iterations": iterations,
        "work": work,
        "samples_event": event,
        "samples_hz": sample_hz,
    }
    return recording.keep(results.attach(out, meta))


def _row(kind: str, n: int, df: pd.DataFrame, iterations: int) -> dict:
    """One run's line: wall, utilisation, where the workers' samples and time went."""
    meta = results.metadata(df)
    workers = df[df["comm"].str.startswith("worker-")]
    life = max(float(workers["lifetime_ns"].sum()), 1.0)
    samples = perfsamples.frame(df)
    row = {
        "kind": kind,
        "threads": n,
        "wall_ms": meta["wall_ns"] / 1e6,
        "cpu_ms": meta["program_cpu_ns"] / 1e6,
        "utilisation": meta["utilisation"],
        "sections_per_ms": iterations / (meta["wall_ns"] / 1e6),
        "blocked_pct": 100 * float(workers["blocked_ns"].sum()) / life,
        "runq_pct": 100 * float(workers["runq_ns"].sum()) / life,
        "samples": np.nan,
        "work_pct": np.nan,
        "waiting_pct": np.nan,
    }
    if samples is not None:
        mine = samples[samples["comm"].str.startswith("worker-")]
        total = max(int(mine["samples"].sum()), 1)
        row["samples"] = int(samples["samples"].sum())
        row["work_pct"] = 100 * mine.loc[mine["symbol"] == "shared_work", "samples"].sum() / total
        row["waiting_pct"] = 100 * mine.loc[mine["symbol"].isin(WAITING), "samples"].sum() / total
    return row


def summarize(df: pd.DataFrame) -> pd.DataFrame:
    """Per kind and thread count, the medians over repeats: wall, speedup over the fewest
    threads, utilisation, and where the workers' time and samples went."""
    cols = ["wall_ms", "utilisation", "blocked_pct", "runq_pct", "samples", "work_pct",
            "waiting_pct"]  # fmt: skip
    out = df.groupby(["kind", "threads"], as_index=False)[cols].median()
    out.insert(3, "speedup", out.groupby("kind")["wall_ms"].transform("first") / out["wall_ms"])
    return out


def plot(df: pd.DataFrame, path: Any = None) -> Any:
    """Utilisation, speedup and the share of samples in the lock against threads (medians)."""
    from perflab.analysis import plot as plt

    df = summarize(df)
    fig, axes = plt.figure(ncols=3, figsize=(11, 3.4))
    panels = [
        ("utilisation", "threads busy on average"),
        ("speedup", "speedup over 1 thread"),
        ("waiting_pct", "% of worker samples in the lock"),
    ]
    for ax, (col, label) in zip(axes, panels, strict=True):
        for kind, t in df.groupby("kind"):
            ax.plot(t["threads"], t[col], "o-", label=kind)
        ax.set_xlabel("threads")
        ax.set_ylabel(label)
        ax.legend(fontsize=8)
    return plt.save(fig, path, title="lock contention: busy is not useful work (easyperf)")


def summary(frame: pd.DataFrame, meta: dict[str, Any]) -> Summary:
    """Per lock kind and thread count: wall, speedup, utilisation and where the workers' time and
    samples went (medians over repeats): busy is not useful work."""
    table = summarize(frame)
    kinds = ", ".join(dict.fromkeys(frame["kind"]))
    lines = [
        f"{len(frame)} runs of {kinds} at {frame['threads'].nunique()} thread counts, "
        f"{frame['rep'].nunique()} repeat(s); {meta.get('iterations', '?')} critical sections "
        f"of {meta.get('work', '?')} steps each"
    ]
    if table["samples"].isna().all():
        lines.append("no CPU samples: work_pct and waiting_pct need perf record (sample_hz)")
    title = "medians per kind and thread count (% of the workers' lifetime or samples)"
    return Summary(lines, [Table("contention", title, table)], {}, lambda p: plot(frame, p))
