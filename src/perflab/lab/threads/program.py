"""easyperf's analysis for the user's own program: run it at each thread count (a {threads}
placeholder in its arguments and/or an environment variable such as OMP_NUM_THREADS) as exact
child runs, and report wall time, speedup, efficiency, CPU utilisation, context switches and
IPC per count, with the runs too short or too disturbed to trust flagged."""

from __future__ import annotations

import math
import os
import shlex
import signal
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from perflab import errors
from perflab.analysis import disturbance, stats
from perflab.analysis.summary import Summary, Table
from perflab.core.lazy import pd
from perflab.errors import PerflabError
from perflab.lab.threads import EXPERIMENTS, trust
from perflab.lab.threads.hogs import Perturbation, perturbed
from perflab.lab.threads.plan import DEFAULT_ENV as DEFAULT_ENV
from perflab.lab.threads.plan import PLACEHOLDER as PLACEHOLDER
from perflab.lab.threads.plan import ThreadsPlan
from perflab.lab.threads.plan import parse_counts as parse_counts
from perflab.lab.threads.runner import counter_status
from perflab.plan import controls
from perflab.plan.experiment import reads_frame
from perflab.running import childruns, lanes
from perflab.running.progress import ProgressArg
from perflab.store import results
from perflab.store.recording import Recording
from perflab.system import machine, provenance

CONFIDENCE = 0.95
LENGTHEN = "give the program more work (a larger input, more iterations) so each run is longer"

# the check each public reader of this module's frames makes first
READS = reads_frame("threads.program", *(e for e in EXPERIMENTS if e.module == __name__))


def plan(
    command: Sequence[str],
    counts: Sequence[int] | None = None,
    cpus: Sequence[int] | None = None,
    **params: Any,
) -> ThreadsPlan:
    """The checked plan: counts default to 1..the CPUs, the CPUs to every usable one, and the
    count goes through OMP_NUM_THREADS when no argument holds the placeholder."""
    argv = controls.typed_value(command, tuple[str, ...], "command")
    cpus = controls.cpu_tuple(cpus) if cpus is not None else tuple(machine.usable_cpus())
    counts = (
        controls.typed_value(counts, tuple[int, ...], "counts (--threads)")
        if counts
        else tuple(range(1, len(cpus) + 1))
    )
    if any(n < 1 for n in counts):
        raise PerflabError(f"thread counts must be at least 1, not {list(counts)}")
    if "threads_env" not in params or params["threads_env"] is None:
        has = any(PLACEHOLDER in a for a in argv[1:])
        params["threads_env"] = None if has else DEFAULT_ENV
    return ThreadsPlan(command=argv, counts=counts, cpus=cpus, **params).check()


def _runs(p: ThreadsPlan) -> childruns.Runs:
    item, rep = childruns.run_order(len(p.counts), p.repeat, p.order, p.seed)
    return childruns.Runs(
        programs=[p.argv(n) for n in p.counts],
        prog=item,
        labels={"threads": np.asarray(p.counts, np.int64)[item], "rep": rep},
        key=("threads", "rep"),
        env=childruns.base_env(p.inherit_env),
        runq=p.runq,
        busy=True,
    )


@controls.plan_arguments(ThreadsPlan)
def run(
    command: Sequence[str],
    counts: Sequence[int] | None = None,
    *,
    perturb: Sequence[Perturbation] = (),
    output: str | os.PathLike | None = None,
    resume: bool = False,
    on_start: Callable[[int, int], None] | None = None,
    progress: ProgressArg = None,
    warn: Callable[[str], None] = errors.warn,
    **params: Any,  # ThreadsPlan's fields: named by plan_arguments, typed by the plan
) -> pd.DataFrame:
    """Run `command` `repeat` times at each thread count in a seeded random order; one row per
    run with cpu_ns, utilisation and why a run looks disturbed, and the trust warnings in the
    metadata (its summary says them; warn has what went otherwise than asked).

    params: cpus, threads_env, repeat, order, oversubscribe, seed, aslr, inherit_env, timeout,
    rt, runq (any field of ThreadsPlan). Journaled to `output` and resumable like every child-run
    sweep; progress shows on stderr or in Jupyter unless progress=False (or a callable takes it).
    """
    p = plan(command, counts, **params)
    recording = Recording(output, resume)
    recording.check()
    limit = trust.floor(p.cpus)
    meta = {
        **provenance.metadata(),
        "experiment": "threads-program",
        **p.conditions(),
        "command": label(p.command),
        "counts": list(p.counts),
        "repeat": p.repeat,
        "order": p.order,
        "threads_via": _via(p),
        "perturb": [str(x) for x in perturb],
        "floor": limit.as_dict(),
        "counters": counter_status(["instructions", "cycles"]),
    }
    with perturbed(perturb):
        df = lanes.measure(
            _runs(p),
            p,
            meta,
            recording,
            chunk_runs=1,
            on_start=on_start,
            progress=progress,
            warn=warn,
        )
    df = annotate(df)
    # Recorded, and said by the summary that shows the result: given to warn too, the verb
    # printed each twice (issue 48).
    found = trust_warnings(df, limit)
    return results.attach(df, {**results.metadata(df), "trust_warnings": found})


def label(command: Sequence[str]) -> str:
    """The command as a shell would take it, with the placeholder left readable."""
    token = "PERFLABTHREADS"
    return shlex.join(a.replace(PLACEHOLDER, token) for a in command).replace(token, PLACEHOLDER)


def _via(p: ThreadsPlan) -> str:
    arg = any(PLACEHOLDER in a for a in p.command[1:])
    env = f"{p.threads_env}=N through env(1), one extra exec per run" if p.threads_env else ""
    return " and ".join(filter(None, [f"{PLACEHOLDER} in the arguments" if arg else "", env]))


def annotate(df: pd.DataFrame) -> pd.DataFrame:
    """CPU time, utilisation (CPUs kept busy on average) and the disturbance verdict per run,
    from run-queue wait too where it was read."""
    meta = results.metadata(df)
    out = df.copy()
    out["cpu_ns"] = out["utime_ns"].astype(np.int64) + out["stime_ns"].astype(np.int64)
    wall = out["wall_ns"].astype(float).where(out["wall_ns"] > 0)
    out["utilisation"] = out["cpu_ns"] / wall
    ok = out["status"] == "ok"
    ncpus = len(meta.get("cpus") or machine.usable_cpus())
    if "cpus_busy_ns" in out:
        out["others_share"] = disturbance.others_share(out["cpus_busy_ns"], out["cpu_ns"], wall,
                                                       ncpus)  # fmt: skip
    why = pd.Series("", index=out.index, dtype=object)
    if ok.any():
        g = out[ok]
        why[ok] = disturbance.child_runs(g, ["threads"], childruns.value_column(g), ncpus)
    out["disturbed"] = why != ""
    out["disturbed_why"] = why
    return results.attach(out, meta)


def trust_warnings(df: pd.DataFrame, limit: trust.Floor | None = None) -> list[str]:
    """Too-short points, oversubscribed points and disturbed runs, one line each."""
    meta = results.metadata(df)
    limit = limit or trust.Floor(**{k: v for k, v in meta["floor"].items() if k != "tolerance"})
    ncpus = len(meta.get("cpus") or machine.usable_cpus())
    ok = df[df["status"] == "ok"]
    lines = []
    for n, g in ok.groupby("threads"):
        wall = g["wall_ns"].astype(float)
        spread = stats.mad(wall) / wall.median() if len(g) > 1 else math.inf
        line = trust.too_short(wall.median(), spread, f"the runs at {n} thread(s)", limit, LENGTHEN)
        if line:
            lines.append(line)
    over = sorted(int(n) for n in ok["threads"].unique() if n > ncpus)
    if over:
        lines.append(
            f"{', '.join(map(str, over))} threads on {ncpus} CPUs: those points measure "
            "time-sharing, not parallel speedup"
        )
    said = disturbance.verdict(ok["disturbed_why"], column="disturbed_why")["line"]
    return lines + ([said] if said else [])


def _interval(values: pd.Series) -> tuple[float, float, float]:
    return stats.median_order_interval(values.to_numpy(float), CONFIDENCE)


@READS
def summarize(df: pd.DataFrame) -> pd.DataFrame:
    """easyperf's table per thread count: median wall (with its 95 % interval), CPU time,
    utilisation, speedup and efficiency vs the smallest count, switches, run-queue wait of all
    the threads (ms, NaN where not read), IPC, disturbed runs."""
    if "utilisation" not in df:
        df = annotate(df)
    ok = df[df["status"] == "ok"]
    if ok.empty:
        codes = sorted(set(df.loc[df["status"] == "exit", "exit_code"].astype(int)))
        signals = sorted(set(df.loc[df["status"] == "crash", "signal"].astype(int)))
        names = [signal.Signals(n).name if n in signal.valid_signals() else n for n in signals]
        why = f", exit codes {codes}" if codes else ""
        why += f", signals {', '.join(map(str, names))}" if names else ""
        raise PerflabError(
            f"no run ended ok ({childruns.status_counts(df)}{why}): nothing to summarise; "
            "does the program run as given, without a shell and in an empty environment?"
        )
    base_n = int(ok["threads"].min())
    base = ok.loc[ok["threads"] == base_n, "wall_ns"].to_numpy(float)
    rows = []
    for n, g in ok.groupby("threads"):
        wall, lo, hi = _interval(g["wall_ns"] / 1e6)
        # median(base) / median(N): the ratio's interval comes from the two medians' intervals
        speedup, rlo, rhi = stats.ratio_order_interval(
            g["wall_ns"].to_numpy(float), base, CONFIDENCE
        )
        ipc = (g["instructions"] / g["cycles"]).dropna().median()  # NaN without counters
        runq = g["runq_ns"].median() / 1e6 if "runq_ns" in g else math.nan
        rows.append(
            {
                "threads": int(n),
                "runs": len(g),
                "wall_ms": wall,
                "wall_lo": lo,
                "wall_hi": hi,
                "cpu_ms": g["cpu_ns"].median() / 1e6,
                "utilisation": g["utilisation"].median(),
                "speedup": speedup,
                "speedup_lo": rlo,
                "speedup_hi": rhi,
                "efficiency": speedup * base_n / n,
                "nvcsw": g["nvcsw"].median(),
                "nivcsw": g["nivcsw"].median(),
                "runq_ms": runq,
                "ipc": ipc,
                "disturbed": int(g["disturbed"].sum()),
            }
        )
    out = pd.DataFrame(rows)
    failed = df[df["status"] != "ok"].groupby("threads").size()
    out["failed"] = out["threads"].map(failed).fillna(0).astype(int)
    return out


@READS
def plot(df: pd.DataFrame, path: str | os.PathLike) -> Path:
    """The article's scaling plot: speedup (with its interval) and utilisation vs threads
    against the ideal line, efficiency below; points with disturbed runs drawn hollow red."""
    from perflab.analysis import plot as plt

    table = summarize(df)
    fig, (ax, ax2) = plt.figure(2, 1, figsize=(8, 7), sharex=True)
    n = table["threads"].to_numpy()
    base = n.min()
    ax.plot(n, n / base, ":", color="#555555", label="ideal")
    err = [
        (table["speedup"] - table["speedup_lo"]).clip(lower=0).fillna(0),
        (table["speedup_hi"] - table["speedup"]).replace(math.inf, np.nan).fillna(0),
    ]
    ax.errorbar(
        n,
        table["speedup"],
        yerr=err,
        fmt="o-",
        capsize=3,
        label=f"speedup (median wall {base} / wall N, {CONFIDENCE:.0%} interval)",
    )
    ax.plot(n, table["utilisation"], "s-", label="CPU utilisation (CPU time / wall)")
    hit = table["disturbed"] > 0
    if hit.any():
        ax.plot(n[hit], table["speedup"][hit], "o", ms=11, mfc="none", color="black",
                label="disturbed runs at this count (disturbed_why)")  # fmt: skip
        ax2.plot(n[hit], table["efficiency"][hit] * 100, "o", ms=11, mfc="none", color="black")
    ax.set_ylabel(f"relative to {base} thread(s) / busy CPUs")
    ax.legend(loc="upper left", fontsize=8)
    ax2.plot(n, table["efficiency"] * 100, "o-", color=plt.COLORS[2])
    ax2.set_ylabel("parallel efficiency (%)")
    ax2.set_xlabel("threads")
    ax2.set_xticks(n)
    return plt.save(fig, path, title=f"thread scaling: {results.metadata(df).get('command', '')}")


SHOWN = ["threads", "runs", "wall_ms", "wall_lo", "wall_hi", "cpu_ms", "utilisation", "speedup",
         "speedup_lo", "speedup_hi", "efficiency", "nvcsw", "nivcsw", "runq_ms", "ipc",
         "disturbed", "failed"]  # fmt: skip


@READS
def summary(frame: pd.DataFrame, meta: dict[str, Any]) -> Summary:
    """easyperf's table per thread count, how the count reached the program, and the runs too
    short or too disturbed to trust."""
    frame = frame if "disturbed" in frame else annotate(frame)  # as saved: not yet annotated
    table = summarize(frame)
    counts = childruns.status_counts(frame)
    cpus = ",".join(map(str, meta.get("cpus") or []))
    lines = [f"{meta.get('command')}  (count via {meta.get('threads_via')}; CPUs {cpus})"]
    counters = meta.get("counters", {})
    if table["ipc"].isna().all():
        lines.append(
            f"IPC: not measured here (instructions: {counters.get('instructions', 'no counters')})"
        )
    if meta.get("runq"):
        lines.append(f"runq_ms (run-queue wait of all its threads): {meta['runq']}")
    lines.append(f"runs: {counts}")
    warnings = trust_warnings(frame)
    lines += [f"warning: {w}" for w in warnings]
    repeat = int(meta.get("repeat", frame["rep"].nunique()))
    few = "" if repeat >= 7 else " (±inf: too few runs for one; --repeat 7 gives it)"
    title = (
        f"median of {repeat} runs per count; wall in ms, its {CONFIDENCE:.0%} interval{few}; "
        f"speedup vs {int(table['threads'].min())} thread(s)"
    )
    shown = table[SHOWN].rename(columns={"disturbed": "disturbed_runs"})
    values = {
        "command": meta.get("command"),
        "threads_via": meta.get("threads_via"),
        "status": counts,
        "counters": counters,
        "floor": meta.get("floor"),
        "runq": meta.get("runq"),
        "warnings": warnings,
    }
    return Summary(lines, [Table("scaling", title, table, shown=shown)], values,
                   lambda p: plot(frame, p))  # fmt: skip
