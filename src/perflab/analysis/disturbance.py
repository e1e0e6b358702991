"""Runs disturbed by other tasks, by one rule every verb shares: preempted or kept waiting for a
CPU its threads had to themselves, far less busy than it should have been, or far slower than
the other runs of its point (what drags a point's mean far from its median).

The rule reads only what a run recorded (CPU and wall time, involuntary switches, run-queue
wait, its CPUs' busy time, its value), so a result read back is judged as when it was made.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np

from perflab.core.lazy import pd

# Involuntary switches per CPU-second above which a run shared its CPUs with other tasks: a
# thread alone on its CPU is preempted only by short kernel work, a few times a second.
PREEMPT_PER_CPU_S = 50.0
DROP = 0.2  # a run whose utilisation is 20 % below what it should be lost CPU to others
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
# Far above its point: beyond Tukey's far-out fence (Q3 + 3 IQR) of its point's runs and more
# than TOLERANCE above their median (a fence inside a point's tight spread is no disturbance),
# judged where a point has MIN_PEERS runs or more (fewer give no quartiles to speak of).
FAR_IQR = 3.0
TOLERANCE = 0.05
MIN_PEERS = 5
KINDS = ("preempted", "waited", "utilisation", "far above")  # the reasons, as counted
# Where leaving the disturbed runs out moves no point's median by more than TOLERANCE, the
# medians stand: said as a note, not a warning, so a long sweep on a quiet machine (a few
# preempted runs among 80 000) does not cry wolf.


def others_share(busy_ns: pd.Series, cpu_ns: pd.Series, wall_ns: pd.Series,
                 ncpus: int) -> pd.Series:  # fmt: skip
    """Per run, the share of its CPUs' time (ncpus x wall) that other tasks took: their busy
    time around it less its own CPU time; NaN where not read or too short to judge."""
    wall = wall_ns.astype(float)
    share = (busy_ns - cpu_ns).clip(lower=0) / (ncpus * wall)
    return share.where(wall * OTHERS_SHARE / 2 >= BUSY_STEP_NS)


def far_above(value: pd.Series, group: pd.Series) -> pd.Series:
    """Per run, how many times its point's median it took where it lies far above its point's
    other runs (Tukey's far-out fence and TOLERANCE), else NaN."""
    by = value.groupby(group)
    q1, q3 = by.transform("quantile", 0.25), by.transform("quantile", 0.75)
    med = by.transform("median")
    n = by.transform("count")
    fence = np.maximum(q3 + FAR_IQR * (q3 - q1), med * (1 + TOLERANCE))
    far = (n >= MIN_PEERS) & (value > fence)
    return (value / med).where(far)


def disturbed(cpu_ns: pd.Series, wall_ns: pd.Series, nivcsw: pd.Series | None, group: pd.Series,
              alone: pd.Series, runq_ns: pd.Series | None = None,
              others: pd.Series | None = None, expected: pd.Series | None = None,
              value: pd.Series | None = None) -> pd.Series:  # fmt: skip
    """Why each run looks disturbed ('' when it does not): preempted (nivcsw None: not read)
    or waiting for a CPU
    (only where its threads had a CPU each, `alone`, and the share of its CPUs other tasks
    took, `others`, is not known to be at most OTHERS_SHARE: then they were its own threads';
    runq_ns or others NaN: not read or not judged), with that share said where it was larger;
    far less busy than `expected` (CPUs kept busy: a CPU-bound kernel's thread count; None: its
    peers' median); or, given its value, far above its point's other runs. Others busy on a CPU
    the run did not want (a 1-thread run on 2 CPUs beside a hog) is no disturbance by itself."""
    util = cpu_ns / wall_ns
    switches = pd.Series(0.0, index=cpu_ns.index) if nivcsw is None else nivcsw
    rate = switches / (cpu_ns / 1e9).clip(lower=1e-9)
    peers = util.groupby(group).transform("median") if expected is None else expected
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
    if value is not None:
        times = far_above(value, group)
        hit = times.notna()
        add(hit, [f"far above its point: {x:.1f}x the median" for x in times[hit]])
    return why


def child_runs(frame: pd.DataFrame, group: Sequence[str], value: str,
               ncpus: int) -> pd.Series:  # fmt: skip
    """The rule on a child-run sweep's ok rows (utime_ns, stime_ns, wall_ns, nivcsw; runq_ns
    and cpus_busy_ns where read) on `ncpus` CPUs per run: each program alone on them unless its
    threads outnumber them, its utilisation judged against its point's peers."""
    cpu = frame["utime_ns"].astype(float) + frame["stime_ns"].astype(float)
    wall = frame["wall_ns"].astype(float).where(frame["wall_ns"] > 0)
    alone = frame["threads"] <= ncpus if "threads" in frame else pd.Series(True, frame.index)
    point = points(frame, group)
    runq = frame["runq_ns"].astype(float) if "runq_ns" in frame else None
    others = (
        others_share(frame["cpus_busy_ns"].astype(float), cpu, wall, ncpus)
        if "cpus_busy_ns" in frame
        else None
    )
    return disturbed(cpu, wall, frame["nivcsw"].astype(float), point, alone, runq, others,
                     value=frame[value].astype(float))  # fmt: skip


def worker_threads(frame: pd.DataFrame, run: Sequence[str], ncpus: int) -> pd.Series:
    """The rule on in-process worker threads (one row per thread, cpu -1 where unpinned), each a
    CPU-bound kernel that should keep busy the share of a CPU its run's threads leave it (all
    of one it has alone, half of one it shares with another), per thread row."""
    key = points(frame, run)
    pinned = frame["cpu"] >= 0
    sharing = frame.groupby([key, frame["cpu"]])["cpu"].transform("size").astype(float)
    crowd = (frame.groupby(key)["cpu"].transform("size") / max(ncpus, 1)).clip(lower=1)
    sharing = sharing.where(pinned, crowd)
    wall = frame["wall_ns"].astype(float).where(frame["wall_ns"] > 0)
    return disturbed(frame["cpu_ns"].astype(float), wall, None, key, sharing <= 1,
                     expected=1 / sharing)  # fmt: skip


def per_run(why: pd.Series, frame: pd.DataFrame, run: Sequence[str]) -> pd.Series:
    """Per-thread reasons as one per run: 'thread 1: utilisation 0.52 vs 1.00' joined."""
    said = [f"thread {t}: {w}" if w else "" for t, w in zip(frame["thread"], why, strict=True)]
    return (
        pd.Series(said, index=why.index)
        .groupby(points(frame, run), sort=False)
        .agg(lambda w: "; ".join(x for x in w if x))
    )


def worker_verdict(frame: pd.DataFrame, run: Sequence[str], ncpus: int, meta: dict) -> dict:
    """verdict() of an in-process threads result (threads, core-vs-ht), per run of its threads,
    with the step that keeps other tasks off (or that --perturb's hogs were asked for)."""
    ok = frame[frame["status"] == "ok"] if "status" in frame else frame
    ok = ok.dropna(subset=["thread", "cpu_ns", "wall_ns"])
    why = per_run(worker_threads(ok, run, ncpus), ok, run) if len(ok) else pd.Series([], object)
    if meta.get("perturb"):
        hint = "the hogs --perturb placed took their CPUs, as asked"
    elif not meta.get("rt"):
        hint = "other tasks shared these CPUs; --rt (or --nice -20) keeps them off"
    else:
        hint = "other tasks of higher priority shared these CPUs: run on a quiet machine"
    return verdict(why, hint=hint)


def points(frame: pd.DataFrame, group: Sequence[str]) -> pd.Series:
    """Each row's point as one label ('512' or '512/1'), all one point when group is empty."""
    if not group:
        return pd.Series("all", index=frame.index)
    label = frame[group[0]].astype(str)
    for name in group[1:]:  # column by column: a row-wise join costs seconds per 5 000 rows
        label = label + "/" + frame[name].astype(str)
    return label


def kinds(why: pd.Series) -> dict[str, int]:
    """How many runs each kind of reason names, in KINDS' order."""
    counted: Counter[str] = Counter()
    for text in why[why != ""]:
        counted.update(k for k in KINDS if k in text)
    return {k: counted[k] for k in KINDS if counted[k]}


def medians_moved(why: pd.Series, value: pd.Series, group: pd.Series) -> int:
    """How many points' medians move by more than TOLERANCE when their disturbed runs are left
    out (a point with no clean run counts as moved)."""
    clean = why == ""
    everything = value.groupby(group).median()
    kept = value[clean].groupby(group[clean]).median().reindex(everything.index)
    return int(((everything / kept - 1).abs() > TOLERANCE).sum() + kept.isna().sum())


def verdict(why: pd.Series, value: pd.Series | None = None, group: pd.Series | None = None,
            hint: str = "run on a quiet machine (or a quieter --cpu), or repeat more and "
            "compare medians", column: str | None = None) -> dict:  # fmt: skip
    """What a result records of its disturbed runs: how many of how many, by kind, the one
    line every verb says (None when none; `column` names where each run's reasons are), and
    the point whose mean lies furthest from its median (that mean over that median) when
    values are given."""
    hit = int((why != "").sum())
    out: dict = {"runs": hit, "of": len(why), "kinds": kinds(why), "line": None}
    if value is not None and group is not None and len(value):
        by = value.astype(float).groupby(group)
        ratio = (by.mean() / by.median()).replace([np.inf, -np.inf], np.nan).dropna()
        if len(ratio):
            out["worst_mean_over_median"] = float(ratio.max())
            out["worst_point"] = str(ratio.idxmax())
    if hit and value is not None and group is not None:
        out["medians_moved"] = medians_moved(why, value.astype(float), group)
        out["medians_hold"] = out["medians_moved"] == 0
    if hit:
        counts = ", ".join(f"{k}: {n}" for k, n in out["kinds"].items())
        worst = out.get("worst_mean_over_median")
        far = worst is not None and worst > 1 + TOLERANCE
        means = f"; point {out['worst_point']}'s mean is {worst:.3g}x its median" if far else ""
        where = f"; column {column}" if column else ""
        if out.get("medians_hold"):
            hint = (f"without them no point's median moves by more than {TOLERANCE:.0%}, so "
                    "the medians stand; the means do not")  # fmt: skip
        out["line"] = (
            f"{hit} of {len(why)} runs look disturbed by other tasks ({counts}{where}){means}: "
            f"{hint}"
        )
    return out


def lines(meta: dict) -> list[str]:
    """The verdict a result records, as its summary says it: one line (a note where every
    point's median stands), or none."""
    found = meta.get("disturbed")
    line = found.get("line") if isinstance(found, dict) else None
    if not (isinstance(found, dict) and isinstance(line, str) and line):
        return []
    return [f"{'note' if found.get('medians_hold') else 'warning'}: {line}"]
