"""The counters run: the events this machine counts, or a command's counts, and its summary."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from perflab.analysis.summary import Summary, Table
from perflab.core.lazy import pd
from perflab.lab.counters import CountersPlan
from perflab.plan import controls
from perflab.store import results
from perflab.system import pmu, provenance
from perflab.system.counters import available, count_command

if TYPE_CHECKING:
    from matplotlib.figure import Figure


@controls.typed_arguments
def run(
    command: Sequence[str] | None = CountersPlan.command,
    events: Iterable[str] | None = CountersPlan.events,
    stdout: int | None = None,
    stderr: int | None = None,
    timeout: float | None = CountersPlan.timeout,
) -> pd.DataFrame:
    """Which events count here (no command), or the counts of a command and its children; one row
    per event, with the machine and what was counted in metadata (for a command also its exit
    status, elapsed_ns, cpu_ns, cpus_utilised and timed_out). stdout, stderr: fds for the
    command's streams (None: perflab's own); timeout: seconds before the command is killed
    (None: none)."""
    wanted = list(events) if events else None
    CountersPlan(events=tuple(wanted or ()), timeout=timeout, command=tuple(command or ())).check()
    if command:
        out = count_command(list(command), wanted, stdout, stderr, timeout)
        keys = ("returncode", "signal", "elapsed_ns", "cpu_ns", "cpus_utilised", "timed_out")
        extra: dict[str, Any] = {"counted": list(command), **{k: out.attrs[k] for k in keys}}
    else:
        out = available()
        if wanted:
            out = out[out["event"].isin(wanted)].reset_index(drop=True)
        extra = {"counted": "a small Python region"}
    meta = {
        **provenance.metadata(),
        "experiment": "counters",
        "perf_event_paranoid": pmu.perf_paranoid(),
        **extra,
    }
    return results.attach(out, meta)


def summarize(df: pd.DataFrame) -> pd.DataFrame:
    """The table `perf stat` prints: event, count (thousands separated, '-' if none), status."""
    out = df[["event", "count", "status"]].copy()
    out["count"] = [f"{v:,.0f}" if v == v else "-" for v in out["count"]]
    return out


def plot(df: pd.DataFrame, path: Any = None) -> Figure:
    """Counts per event (log scale); events that do not count here are named, not drawn as 0."""
    from perflab.analysis import plot as plt

    fig, ax = plt.figure()
    y = np.arange(len(df))
    counted = df["count"].notna()
    ax.barh(y[counted], df.loc[counted, "count"].clip(lower=1))
    for i in y[~counted]:
        ax.text(1, i, "not supported here", va="center", fontsize=8)
    ax.set_yticks(y, df["event"])
    ax.set_xscale("log")
    ax.invert_yaxis()
    ax.set_xlabel("count")
    return plt.save(fig, path, title="perf_event counts")


RUN_KEYS = ("returncode", "signal", "elapsed_ns", "cpu_ns", "cpus_utilised")


def summary(frame: pd.DataFrame, meta: dict[str, Any]) -> Summary:
    """The counts of a command as perf stat prints them, or which events count on the machine
    that measured (a small Python region counted)."""
    counted = meta.get("counted")
    shown = summarize(frame)
    values: dict[str, Any] = {"perf_event_paranoid": meta.get("perf_event_paranoid")}
    lines = []
    if isinstance(counted, list):
        title = f"counts of {' '.join(counted)} (exit status {meta.get('returncode')})"
        values.update({k: meta.get(k) for k in RUN_KEYS})
        if meta.get("elapsed_ns") is not None:
            lines.append(
                f"{meta['elapsed_ns'] / 1e9:.3f} s elapsed, {meta['cpu_ns'] / 1e9:.3f} s CPU, "
                f"{meta['cpus_utilised']:.2f} CPUs utilised"
            )
    else:
        where = meta.get("hostname", "the machine that measured")
        title = f"perf events on {where} (count: a small Python region on this thread)"
        shown.insert(1, "kind", frame["kind"])
    lines.append(f"perf_event_paranoid={meta.get('perf_event_paranoid')}")
    if frame["status"].astype(str).str.contains(pmu.NO_PMU, regex=False).any():
        lines.append(f"{pmu.NO_PMU}: {pmu.NO_PMU_WHY}")
    table = Table("events", title, frame, shown=shown)
    return Summary(lines, [table], values, lambda p: plot(frame, p))


def exit_status(df: pd.DataFrame) -> int | None:
    """The counted command's status as a shell says it (128+N when signal N killed it), which
    the verb exits with as perf stat does; None for the list of events (no command ran)."""
    meta = results.metadata(df)
    return meta["returncode"] if isinstance(meta.get("counted"), list) else None
