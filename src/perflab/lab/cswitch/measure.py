"""Rubini's cswitch measured: each run times n one-byte writes and reads through pipes alone,
then n round trips with a child, in every placement and priority, and counts the switches."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from perflab.analysis.summary import Summary, Table
from perflab.core import bindings
from perflab.core.lazy import pd
from perflab.lab.cswitch import CswitchPlan
from perflab.plan import controls
from perflab.running import inprocess
from perflab.store.recording import Recording
from perflab.system import machine, provenance

if TYPE_CHECKING:
    from matplotlib.figure import Figure

RT_PRIORITY = 1  # Listing 2's sched_priority: the lowest real-time priority is enough
COLUMNS = ("placement", "cpu_parent", "cpu_child", "realtime", "rt_applied", "n", "alone_ns",
           "pingpong_ns", "alone_us_each", "roundtrip_us_each", "cswitch_us_each",
           "parent_nvcsw", "parent_nivcsw", "child_nvcsw", "child_nivcsw",
           "switches_per_roundtrip", "us_per_switch", "child_pid", "rep")  # fmt: skip


@dataclass(frozen=True)
class CpuPair:
    """Where parent and child run: CPU numbers, -1 for wherever the scheduler likes."""

    name: str
    parent: int = -1
    child: int = -1


def placements(cpus: list[int] | None = None) -> list[CpuPair]:
    """Unpinned, both on one CPU, and (with two CPUs online) one CPU each."""
    online = machine.usable_cpus() if cpus is None else machine.check_cpus(cpus)
    out = [CpuPair("unpinned"), CpuPair("one CPU", online[0], online[0])]
    if len(online) > 1:
        out.append(CpuPair("two CPUs", online[0], online[1]))
    return out


def rt_budget_us(n: int) -> int:
    """RLIMIT_RTTIME for a run of n: generous for n round trips, yet a runaway dies in seconds."""
    return min(10_000_000, 200_000 + 20 * n)


def run_once(n: int, place: CpuPair, realtime: bool) -> dict[str, Any]:
    """One cswitch run: the article's three numbers plus both sides' switch counts."""
    prio = RT_PRIORITY if realtime else 0
    out = bindings.cswitch(
        n, place.parent, place.child, prio, rt_budget_us(n), f"cswitch ({place.name})"
    )
    switches = sum(out[k] for k in ("parent_nvcsw", "parent_nivcsw", "child_nvcsw", "child_nivcsw"))
    diff_ns = out["pingpong_ns"] - out["alone_ns"]
    return {
        "placement": place.name,
        "cpu_parent": place.parent,
        "cpu_child": place.child,
        "realtime": realtime,
        "rt_applied": bool(out["rt_applied"]),
        "n": n,
        "alone_ns": int(out["alone_ns"]),
        "pingpong_ns": int(out["pingpong_ns"]),
        "alone_us_each": out["alone_ns"] / n / 1e3,
        "roundtrip_us_each": out["pingpong_ns"] / n / 1e3,
        "cswitch_us_each": diff_ns / n / 1e3,
        "parent_nvcsw": int(out["parent_nvcsw"]),
        "parent_nivcsw": int(out["parent_nivcsw"]),
        "child_nvcsw": int(out["child_nvcsw"]),
        "child_nivcsw": int(out["child_nivcsw"]),
        "switches_per_roundtrip": switches / n,
        "us_per_switch": diff_ns / 1e3 / switches if switches else np.nan,
        "child_pid": int(out["child_pid"]),
    }


def realtime_wanted(flag: bool | None) -> bool:
    """--rt/--no-rt, else Listing 2's rule: real time unless BENCH_NORT is set."""
    if flag is not None:
        return flag
    return not os.environ.get("BENCH_NORT")


@controls.typed_arguments
def run(
    n: int = CswitchPlan.n,
    reps: int = CswitchPlan.reps,
    realtime: bool | None = CswitchPlan.realtime,
    cpus: Sequence[int] = CswitchPlan.cpus,
    *,
    recording: Recording | None = None,
) -> pd.DataFrame:
    """Every placement, normal and (when asked: realtime_wanted) real-time priority, `reps`
    times each; the pinned runs on `cpus` (none given: the usable ones).

    recording: where the rows go (a .parquet/.csv journal written in chunks of runs as they are
    measured, resumed if asked: inprocess.measure) and the progress that counts them."""
    CswitchPlan(n, reps, realtime, tuple(cpus)).check()
    realtime = realtime_wanted(realtime)
    places = {p.name: p for p in placements(list(cpus) or None)}
    priorities = (False, True) if realtime else (False,)
    controls.check_rows(
        {"--reps": reps}, len(places) * len(priorities), 0, controls.PLANNED_ROW_BYTES
    )
    keys = pd.DataFrame(
        [(name, rt, rep) for name in places for rt in priorities for rep in range(reps)],
        columns=["placement", "realtime", "rep"],
    )
    params = {"n": n, "reps": reps, "realtime": realtime,
              "placements": [[p.name, p.parent, p.child] for p in places.values()]}  # fmt: skip
    meta = {**provenance.metadata(), "experiment": "cswitch", "n": n, "reps": reps}

    def timed(keys: pd.DataFrame) -> pd.DataFrame:
        return pd.DataFrame(
            [{**run_once(n, places[name], bool(rt)), "rep": rep}
             for name, rt, rep in keys.itertuples(index=False)]
        )  # fmt: skip

    plan = inprocess.RowSchedule("cswitch", keys, COLUMNS, params, meta)
    return inprocess.measure(plan, timed, recording)


def refusals(df: pd.DataFrame) -> list[str]:
    """What the verb says on stderr after the result: real time asked for and refused."""
    if df["realtime"].astype(bool).any() and not df["rt_applied"].astype(bool).any():
        return ["SCHED_RR refused (needs root or RLIMIT_RTPRIO); --no-rt skips it"]
    return []


def summarize(df: pd.DataFrame) -> pd.DataFrame:
    """Median per placement and priority of the three per-iteration times and the switch counts."""
    cols = [
        "alone_us_each",
        "roundtrip_us_each",
        "cswitch_us_each",
        "switches_per_roundtrip",
        "us_per_switch",
        "parent_nivcsw",
        "child_nivcsw",
    ]
    keys = ["placement", "realtime", "rt_applied"]
    out = df.groupby(keys, sort=False)[cols].median().reset_index()
    out[["parent_nivcsw", "child_nivcsw"]] = (
        out[["parent_nivcsw", "child_nivcsw"]].round().astype(int)
    )
    out["priority"] = np.where(
        out["rt_applied"], "SCHED_RR", np.where(out["realtime"], "normal (RR refused)", "normal")
    )
    return out[["placement", "priority", *cols]]


table = summarize  # its earlier name


def article_lines(row: Any) -> list[str]:
    """The three lines cswitch prints, for one run."""
    n = row["n"]
    alone, ping = row["alone_ns"] / 1e3, row["pingpong_ns"] / 1e3
    return [
        f"{n} writes and reads take {alone:.0f} usecs ({alone / n:.3f} usec each)",
        f"{n} wr/rd and cswitches take {ping:.0f} usecs ({ping / n:.3f} usec each)",
        f"{n} cswitches take {ping - alone:.0f} usecs ({(ping - alone) / n:.3f} usec each)",
    ]


def plot(df: pd.DataFrame, path: Any = None) -> Figure:
    """Bars of the round trip and its switch part per placement and priority."""
    from perflab.analysis import plot as plt

    t = summarize(df)
    fig, ax = plt.figure()
    labels = [f"{p}\n{q}" for p, q in zip(t["placement"], t["priority"], strict=True)]
    x = np.arange(len(t))
    ax.bar(x - 0.2, t["roundtrip_us_each"], 0.4, label="write/read + cswitch (round trip)")
    ax.bar(x + 0.2, t["alone_us_each"], 0.4, label="write/read alone")
    ax.set_xticks(x, labels, fontsize=8)
    plt.log_axes(ax, x=False, y=True)
    ax.set_ylabel("µs per iteration (median of reps, log)")
    ax.legend()
    return plt.save(fig, path, title=f"cswitch {int(df['n'].iloc[0])}: pipes between two processes")


def summary(frame: pd.DataFrame, meta: dict[str, Any]) -> Summary:
    """cswitch's three lines for the first unpinned run, and the table per placement."""
    first = frame[(frame["placement"] == "unpinned") & ~frame["realtime"].astype(bool)]
    lines = article_lines(first.iloc[0]) if len(first) else []
    title = "per iteration, median of reps (µs; switches from rusage)"
    table = Table("table", title, summarize(frame), "{:.3f}")
    values = {"n": meta.get("n"), "reps": meta.get("reps")}
    return Summary(lines, [table], values, lambda p: plot(frame, p))
