"""What a profile shows: the program's line, the per-thread table, blocked time by cause, time
inside system calls, the hottest symbols, and the timeline figure."""

from __future__ import annotations

from typing import Any

import numpy as np

from perflab.analysis.summary import Summary, Table
from perflab.core.lazy import pd
from perflab.lab.profile.sampling import BETWEEN, life_intervals
from perflab.store import results
from perflab.system import (
    blockcause,
    perfsamples,
)


def overview(df: pd.DataFrame) -> dict[str, Any]:
    """The program's line: wall, CPU, utilisation (threads busy on average), threads, exit."""
    meta = results.metadata(df)
    threads = df[df["tid"] >= 0]
    return {
        "wall_ns": meta["wall_ns"],
        "cpu_ns": meta["program_cpu_ns"],
        "utilisation": meta["utilisation"],
        "threads": len(threads),
        "exited_early": int(threads["exited_early"].sum()),
        "seen_once": int(_seen_once(threads).sum()),
        "no_utilisation": int(threads["utilisation"].isna().sum()),
        "unseen_cpu_ns": int(df.loc[df["tid"] < 0, "cpu_ns"].sum()),
        "exit_code": meta["exit_code"],
        "signal": meta["signal"],
        "timed_out": meta["timed_out"],
        "interrupted": meta.get("interrupted"),
    }


def _seen_once(df: pd.DataFrame) -> pd.Series:
    """Which rows were seen in one reading only (none, in a file written before it was said)."""
    return df["seen_once"] if "seen_once" in df else pd.Series(False, index=df.index)


def syscalls(df: pd.DataFrame) -> pd.DataFrame | None:
    """Time inside each system call per thread (strace -T), None when strace was not used."""
    table = results.metadata(df).get("syscalls")
    return None if table is None else pd.DataFrame(table)


def timeline(df: pd.DataFrame) -> pd.DataFrame:
    """Cumulative CPU and run-queue wait of every thread at every reading (ns from the spawn)."""
    return pd.DataFrame(results.metadata(df)["timeline"])


def summarize(df: pd.DataFrame) -> pd.DataFrame:
    """The per-thread table in milliseconds: where each thread's time went."""
    ms = 1e6
    out = pd.DataFrame(
        {
            "pid": df["pid"],
            "tid": df["tid"],
            "comm": df["comm"],
            "life_ms": df["lifetime_ns"] / ms,
            "cpu_ms": df["cpu_ns"] / ms,
            "user_ms": df["user_ns"] / ms,
            "sys_ms": df["system_ns"] / ms,
            "util_%": df["utilisation"] * 100,
            "runq_ms": df["runq_ns"] / ms,
            "blocked_ms": df["blocked_ns"] / ms,
            **{
                f"{cause}_ms": df[f"blocked_{cause}_ns"] / ms
                for cause in blockcause.CAUSES
                if df[f"blocked_{cause}_ns"].fillna(0).any()
            },
            "vcsw": df["vcsw"],
            "ivcsw": df["ivcsw"],
            "early": np.where(df["tid"] < 0, "", np.where(df["exited_early"], "yes", "")),
        }
    )
    if _seen_once(df).any():
        out["seen_once"] = np.where(_seen_once(df), "yes", "")
    return out.astype({"pid": int, "tid": int, "vcsw": int, "ivcsw": int})


def causes(df: pd.DataFrame) -> pd.DataFrame:
    """Per thread and cause, the blocked ns and how many readings found it asleep there: the
    sample behind each figure."""
    tl = timeline(df)
    asleep = tl[tl["cause"].notna()].groupby(["pid", "tid", "cause"]).size()
    rows = []
    for th in df[df["tid"] >= 0].itertuples():
        for cause in blockcause.CAUSES:
            ns = getattr(th, f"blocked_{cause}_ns")
            n = int(asleep.get((th.pid, th.tid, cause), 0))
            if ns or n:
                rows.append({"pid": th.pid, "tid": th.tid, "comm": th.comm, "cause": cause,
                             "blocked_ns": ns, "readings": n})  # fmt: skip
    return pd.DataFrame(rows, columns=["pid", "tid", "comm", "cause", "blocked_ns", "readings"])


def cause_note(df: pd.DataFrame) -> str:
    """How much of the blocked time has an exact cause, how much a sampled or shared one."""
    threads = df[df["tid"] >= 0]
    blocked = threads["blocked_ns"].sum()
    if not blocked:
        return "no thread was blocked"
    exact, shared = threads["cause_exact_ns"].sum(), threads["cause_shared_ns"].sum()
    return (
        f"the call each thread slept in at each reading (/proc/PID/task/TID/syscall, no "
        f"ptrace; {int(threads['asleep_readings'].sum())} readings found one asleep): "
        f"{exact / blocked:.0%} exact, {shared / blocked:.0%} unseen and shared as the "
        "readings were, the rest sampled (docs/profile.md)"
    )


def summarize_syscalls(df: pd.DataFrame, top: int = 5) -> pd.DataFrame | None:
    """Per thread, the calls it spent most time in (strace's -T, the article's futex and read
    sums), with counts and the median, 90th percentile and maximum of one call."""
    table = syscalls(df)
    if table is None or table.empty:
        return table
    comm = dict(zip(df["tid"], df["comm"], strict=True))
    table = table.sort_values(["tid", "total_ns"], ascending=[True, False])
    table = table.groupby("tid", sort=False).head(top)
    return pd.DataFrame(
        {
            "tid": table["tid"],
            "comm": [comm.get(t, "(unread)") for t in table["tid"]],
            "syscall": table["syscall"],
            "calls": table["calls"],
            "total_ms": table["total_ns"] / 1e6,
            "median_us": table["median_ns"] / 1e3,
            "p90_us": table["p90_ns"] / 1e3,
            "max_ms": table["max_ns"] / 1e6,
        }
    ).reset_index(drop=True)


COLORS = {
    "on CPU": "#d62728", "run queue": "#e08b00", "futex": "#1f4e9c", "io": "#2ca02c",
    "poll": "#17becf", "sleep": "#bdbdbd", "wait": "#8c564b", "other": "#9467bd",
    "unseen": "#9ecae1",
}  # fmt: skip


def plot(df: pd.DataFrame, path: Any = None) -> Any:
    """One lane per thread over wall time: on-CPU, waiting on a run queue, and blocked by the
    call the readings saw it sleep in (futex, I/O, poll, sleep...)."""
    from perflab.analysis import plot as plt

    tl = timeline(df)
    threads = df[df["tid"] >= 0].reset_index(drop=True)
    fig, ax = plt.figure(figsize=(9, 1.6 + 0.45 * max(len(threads), 1)))
    shown: set[str] = set()
    for lane, th in threads.iterrows():
        t = tl[(tl["pid"] == th["pid"]) & (tl["tid"] == th["tid"])]
        t = t[(t["t_ns"] <= th["last_ns"]) | (not th["final"])]  # not the zombie's reading
        points = list(t[["t_ns", "cpu_ns", "runq_ns", "vcsw", "cause"]].itertuples(index=False))
        cut = life_intervals(points, th)
        shares = blockcause.share(cut.blocked, cut.ends, cut.unbroken)[0]
        span = np.maximum(np.diff(cut.bounds), 1)
        f_cpu = np.clip((cut.cpu + cut.pending) / span, 0, 1) * 0.8
        # the run queue's is what is neither CPU nor blocked: a reading's pending run delay
        # reaches schedstat only later, and cut.blocked has it settled
        f_blocked = np.clip(cut.blocked / span, 0, 1) * 0.8
        lo = top = np.maximum(0.8 - f_blocked, f_cpu)
        bands = [(0 * f_cpu, f_cpu, "on CPU"), (f_cpu, lo, "run queue")]
        parts = shares / np.maximum(shares.sum(axis=1, keepdims=True), 1e-9)
        parts[shares.sum(axis=1) <= 0, blockcause.CAUSES.index("unseen")] = 1
        for k, cause in enumerate(blockcause.CAUSES):
            hi = lo + (0.8 - top) * parts[:, k]
            bands.append((lo, hi, cause))
            lo = hi
        x = np.repeat(cut.bounds / 1e6, 2)[1:-1]
        for y_lo, y_hi, name in bands:
            if not (y_hi > y_lo).any():
                continue
            label = None if name in shown else name
            shown.add(name)
            y0, y1 = lane + np.repeat(y_lo, 2), lane + np.repeat(y_hi, 2)
            ax.fill_between(x, y0, y1, color=COLORS[name], lw=0, label=label)
    names = [f"{c} {t}" for c, t in zip(threads["comm"], threads["tid"], strict=True)]
    ax.set_yticks(np.arange(len(threads)) + 0.4, names)
    ax.set_ylim(-0.2, max(len(threads), 1))
    ax.invert_yaxis()
    ax.set_xlabel("wall time since spawn (ms)")
    handles, labels = ax.get_legend_handles_labels()
    order = [labels.index(n) for n in COLORS if n in labels]
    ax.legend([handles[i] for i in order], [labels[i] for i in order], loc="lower right",
              bbox_to_anchor=(1, 1), ncol=5, fontsize=8, frameon=False)  # fmt: skip
    u = overview(df)
    title = f"threads over time (utilisation {u['utilisation']:.2f} threads busy on average)"
    if path is not None:
        plt.save(fig, path, title=title)
    return fig


def _ms(ns: float) -> str:
    return f"{ns / 1e6:,.1f} ms"


def _ids(shown: pd.DataFrame) -> pd.DataFrame:
    """Thread and process ids as plain numbers (not 28,621), '-' for the remainder row."""
    for col in ("pid", "tid"):
        if col in shown:
            shown[col] = [str(v) if v >= 0 else "-" for v in shown[col]]
    return shown


def _no_utilisation(over: dict[str, Any], interval_s: float) -> str:
    """Why some threads have no util_%: their lifetime is not known to better than a reading."""
    once, short = over["seen_once"], over["no_utilisation"] - over["seen_once"]
    why = [f"{once} seen once (in one reading, without an exit record)"] if once else []
    why += [f"{short} alive less than the reading interval"] if short else []
    n = over["no_utilisation"]
    return (
        f"no utilisation for {n} thread{'s' * (n != 1)}, whose lifetime is not known to better "
        f"than a reading ({interval_s * 1e3:g} ms): {' and '.join(why)}"
    )


def _ended(over: dict[str, Any]) -> str:
    if over["timed_out"]:
        return "killed at the timeout"
    if over["interrupted"]:
        return f"killed when perflab got signal {over['interrupted']}"
    if over["signal"]:
        return f"killed by signal {over['signal']}"
    return f"exit status {over['exit_code']}"


def summary(frame: pd.DataFrame, meta: dict[str, Any]) -> Summary:
    """The program's line, where each thread's time went, the time inside system calls and the
    hottest symbols per thread when they were asked for, and how each figure was read."""
    over = overview(frame)
    lines = [
        f"{' '.join(meta['profiled'])}: {_ended(over)}; wall {_ms(over['wall_ns'])}, "
        f"CPU {_ms(over['cpu_ns'])}, utilisation {over['utilisation']:.2f} "
        f"(threads busy on average); {over['threads']} threads seen, "
        f"{over['exited_early']} exited early",
        f"readings every {meta['interval_s'] * 1e3:g} ms on average ({meta['readings']}); "
        f"'{BETWEEN}' is what wait4 counted and no reading saw "
        f"({_ms(over['unseen_cpu_ns'])} CPU)",
        f"blocked by cause: {cause_note(frame)}",
        f"exit records: {meta['exit_records']}",
    ]
    if over["no_utilisation"]:
        lines.insert(2, _no_utilisation(over, meta["interval_s"]))
    if meta.get("steal_ns"):  # beside the blocked time it swells
        lines.insert(-1, f"steal: the hypervisor took {_ms(meta['steal_ns'])} of this machine's "
                         "CPUs while it ran; a thread it stopped while running counts that time "
                         "as blocked")  # fmt: skip
    tables = [Table("threads", "per thread (ms)", frame, "{:,.1f}", _ids(summarize(frame)))]
    values: dict[str, Any] = {
        "program": over,
        "blocked_by_cause": cause_note(frame),
        "strace": meta["strace"],
        "exit_records": meta["exit_records"],
        "perf_counters": meta["perf_counters"],
        "steal_ns": meta.get("steal_ns"),
    }
    calls = syscalls(frame)
    if calls is None:
        lines.append(f"time per system call: {meta['strace']}")
        values["syscalls"] = None
    else:
        title = "time inside system calls (strace -T), per thread"
        shown = summarize_syscalls(frame)
        tables.append(
            Table("syscalls", title, calls, "{:,.1f}", _ids(shown) if shown is not None else None)
        )
    lines.append(f"per-thread perf counters: {meta['perf_counters']}")
    if "samples_note" in meta:
        lines.append(f"CPU samples per thread and symbol: {meta['samples_note']}")
        values["samples_note"] = meta["samples_note"]
        sampled = perfsamples.frame(frame)
        if sampled is None:
            values["samples"] = None
        else:
            top = _ids(perfsamples.summarize(sampled))
            tables.append(Table("samples", "hottest symbols per thread", sampled, "{:,.1f}", top))
    return Summary(lines, tables, values, lambda p: plot(frame, p))


def exit_status(df: pd.DataFrame) -> int:
    """The profiled program's own exit status, 128 + signal when it was killed (as a shell
    says it), which the verb exits with."""
    over = overview(df)
    if over["signal"]:
        return 128 + over["signal"]
    return over["exit_code"] or 0
