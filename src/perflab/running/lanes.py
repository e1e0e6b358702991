"""Child runs on several CPUs at once (--jobs), and the proof that they measure the same thing.

A parallel sweep runs one child per listed CPU at a time, each pinned to its own CPU, from one
C call (PERFLAB_SPAWN_PARALLEL: a lane per CPU takes the next run as soon as its child is
reaped). A seeded share of the planned runs, the reference slice, is made one at a time on
each CPU in turn, interleaved with the parallel ones over the whole sweep, so each CPU's
parallel runs can be compared with sequential runs taken under the same conditions.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TypeVar

import numpy as np

from perflab import errors
from perflab.analysis import stats
from perflab.core.lazy import pd
from perflab.errors import PerflabError
from perflab.plan import controls
from perflab.plan.controls import Controls
from perflab.running import childruns, cpuchoice, spawn
from perflab.running.interrupt import Interrupt, interruptible
from perflab.running.progress import ProgressArg, shown
from perflab.store.recording import FLUSH_S, Recorder, Recording, Warn
from perflab.system import limits, machine

# Share of runs made one at a time, by default: about a tenth of the parallel time is spent
# on proof whatever the CPU count (5 % of the runs on 2 CPUs; on 64, 5 % would take 3.4 times
# as long as the parallel runs themselves), never more than 5 %.
REFERENCE_COST = 0.1
REFERENCE_MAX = 0.05
SLOWER_TOL = 0.02  # parallel runs' median may exceed the sequential one by this much
NOISIER_TOL = 0.25  # and their spread (IQR) by this much, before perflab says so
MIN_REFERENCE = 20  # fewer sequential runs on a CPU than this: no verdict for it

PlanT = TypeVar("PlanT", bound=Controls)  # a verb's plan: its run controls and more


def lane_cpus(jobs: int, cpus: Sequence[int] | None) -> tuple[int, ...]:
    """The CPUs of `jobs` lanes: those listed (all of them for jobs 0), else the quietest."""
    return lane_choice(jobs, cpus).cpus


def lane_choice(jobs: int, cpus: Sequence[int] | None) -> cpuchoice.Choice:
    """The CPUs of `jobs` lanes and why: those listed (all for jobs 0), else the `jobs`
    quietest usable ones (running/cpuchoice.py), said in one line."""
    if jobs < 0:
        raise PerflabError(f"--jobs must be 0 (one per CPU) or more, not {jobs}")
    if cpus is not None:
        cpus = controls.cpu_tuple(cpus)
        if jobs not in (0, len(cpus)):
            raise PerflabError(
                f"--jobs {jobs} runs {jobs} children at once, one per CPU, but --cpu lists "
                f"{len(cpus)} CPU{'s' * (len(cpus) != 1)}: list {jobs}, or use --jobs 0"
            )
        return cpuchoice.check_asked(cpus)
    usable = machine.usable_cpus()
    if jobs > len(usable):
        raise PerflabError(
            f"--jobs {jobs}: only {len(usable)} usable CPUs "
            f"({machine.format_cpu_list(usable)}); one child per CPU at a time"
        )
    if jobs in (0, len(usable)):
        return cpuchoice.Choice(tuple(usable), "", {})  # every CPU: nothing to choose
    return cpuchoice.pick(jobs)


def default_reference(lanes: int) -> float:
    """The reference share when none is asked: REFERENCE_COST of the parallel time."""
    return min(REFERENCE_MAX, REFERENCE_COST / max(lanes, 1))


def reference_share(plan: Controls) -> float:
    """The plan's reference share, or the default for its lanes."""
    return default_reference(plan.jobs) if plan.reference is None else plan.reference


def with_lanes(plan: PlanT, cpus: Sequence[int] | None) -> PlanT:
    """The plan with its lanes' CPUs, jobs = how many (a --jobs 0 resumes as the count) and
    its reference share (the default for that many lanes unless one was asked)."""
    chosen = lane_choice(plan.jobs, cpus)
    chosen_plan = replace(plan, cpus=chosen.cpus, jobs=len(chosen.cpus),
                          cpu_choice=chosen.line if cpus is None else "")  # fmt: skip
    return replace(chosen_plan, reference=reference_share(chosen_plan))


def reference_mask(size: int, share: float, seed: int) -> np.ndarray:
    """Which planned runs are made one at a time: a seeded share, the same on every resume."""
    return np.random.default_rng((seed, 18)).random(size) < share


@dataclass
class LaneRuns(childruns.Runs):
    """A sweep's runs with each row's CPU and whether others ran beside it."""

    @property
    def columns(self) -> list[str]:
        return [*self.labels, "cpu", "parallel", *childruns.MEASURED]

    def lane_rows(
        self, runs: np.ndarray, at: np.ndarray, overhead: int, parallel: bool
    ) -> pd.DataFrame:
        return self.rows(runs, at, overhead, cpu=runs["cpu"].astype(np.int16),
                         parallel=np.full(len(runs), parallel))  # fmt: skip


Part = tuple[np.ndarray, bool, int | None]  # planned positions, parallel?, the CPU of a solo


def _send_chunk(pipe: spawn.Pipeline, runs: LaneRuns, at: np.ndarray, ref: np.ndarray,
                sizes: np.ndarray, options: spawn.SpawnOptions) -> list[Part]:  # fmt: skip
    """Queue one chunk: its parallel runs as one batch, then its reference runs one at a time
    on each CPU in turn (a batch per CPU), each cut where the runs' setting changes. The helper
    starts each the moment one ends."""
    parts: list[Part] = []
    parallel, sequential = at[~ref[at]], at[ref[at]]
    for part in runs.batches(parallel) if parallel.size else []:
        env, under = runs.under(part, options)
        lanes = spawn.ParallelOptions(**vars(under))
        pipe.submit(*spawn.request(runs.programs, runs.prog[part], sizes[part], runs.var, env,
                                   lanes))  # fmt: skip
        parts.append((part, True, None))
    for k, cpu in enumerate(options.cpus):
        mine = sequential[k :: len(options.cpus)]
        for part in runs.batches(mine) if mine.size else []:
            env, under = runs.under(part, replace(options, cpus=(cpu,)))
            pipe.submit(*spawn.request(runs.programs, runs.prog[part], sizes[part], runs.var,
                                       env, under))  # fmt: skip
            parts.append((part, False, cpu))
    return parts


def _collect_chunk(pipe: spawn.Pipeline, parts: list[Part]) -> list[tuple]:
    """(records, positions, parallel) per batch of a chunk, in the order they were queued;
    after a stop, the runs each batch made before it (none for those queued behind it)."""
    out: list[tuple] = []
    for at, parallel, cpu in parts:
        lost = None
        try:
            got = pipe.collect()
        except spawn.HelperLost as exc:  # the helper died: it carries what the chunk finished
            got, lost = exc.runs, exc
        if cpu is not None:
            got["cpu"] = cpu
        out.append((got, at[: len(got)], parallel))
        if lost is not None:
            lost.parts = out
            raise lost
    return out


def _measure_lanes(
    runs: childruns.Runs,
    controls: Controls,
    meta: dict,
    recording: Recording | None = None,
    *,
    chunk_runs: int = childruns.CHUNK_RUNS,
    flush_s: float = FLUSH_S,
    on_start: Callable[[int, int], None] | None = None,
    progress: Callable[[int], None] | None = None,
    warn: Warn = errors.warn,
) -> pd.DataFrame:
    """measure with one child per CPU at a time and a sequential reference slice."""
    runs = LaneRuns(**vars(runs))
    ref = reference_mask(runs.prog.size, reference_share(controls), controls.seed)
    recording = recording or Recording()
    with childruns.quiet_options(controls) as options:
        options = replace(options, iterations=runs.iterations)
        longest = interruptible(childruns.preflight, runs, options)
        chunk_runs = childruns.runs_per_batch(longest, chunk_runs, flush_s)
        overhead = spawn.timer_overhead()
        recorder = Recorder(recording, runs.key, runs.expect(), controls.params(),
                            meta, warn, flush_s, executes=runs.executes())  # fmt: skip
        todo = childruns.runs_to_do(runs, recorder.done_keys())
        runs = runs.starting(todo)
        if on_start:
            on_start(int(todo.size), runs.prog.size - int(todo.size))
        extra = {"timer_overhead_ticks": overhead, "rt_granted": controls.rt,
                 **lane_meta(controls)}  # fmt: skip
        spawner = spawn.spawner()
        chunk = max(chunk_runs, 1) * controls.jobs  # as long in time as a sequential chunk
        chunks = [todo[i : i + chunk] for i in range(0, todo.size, chunk)]
        sizes = runs.sizes if runs.sizes is not None else np.full(runs.prog.size, -1, np.int64)
        complete = False
        with Interrupt() as stop, childruns.away_from(controls.cpus), \
                spawner.pipeline() as pipe:  # fmt: skip
            try:
                # Chunks queued in the helper AHEAD at a time: no gap waits for this thread.
                queued = deque(_send_chunk(pipe, runs, at, ref, sizes, options)
                               for at in chunks[: childruns.AHEAD])  # fmt: skip
                for i in range(len(chunks)):
                    parts = _collect_chunk(pipe, queued.popleft())
                    stopping = stop.hit  # read once: every chunk queued is collected
                    if stopping:
                        try:
                            while queued:
                                parts += _collect_chunk(pipe, queued.popleft())
                        except spawn.HelperLost as lost:
                            lost.parts = parts + lost.parts
                            raise
                    elif i + childruns.AHEAD < len(chunks):
                        queued.append(_send_chunk(pipe, runs, chunks[i + childruns.AHEAD], ref,
                                                  sizes, options))  # fmt: skip
                    for got, at, parallel in parts:
                        childruns.rt_throttled_once(options, got, extra, warn)
                        options = childruns.rt_refused_once(options, got, extra, warn)
                        childruns.pages_kept_once(got, runs.programs, extra, warn)
                        recorder.add(runs.lane_rows(got, at, overhead, parallel))
                        if progress:
                            progress(len(got))
                    if stopping:
                        raise KeyboardInterrupt
                complete = True
            except spawn.HelperLost as lost:
                for got, at, parallel in lost.parts:
                    recorder.add(runs.lane_rows(got, at, overhead, parallel))
                raise
            except BaseException:
                spawner.request_stop()
                raise
            finally:
                extra.update(spawn.maxrss_meta(spawner))
                df = recorder.finish(complete, extra, annotate=lambda rows: judged(rows, runs))
    return df


def lane_meta(controls: Controls) -> dict:
    """What a parallel result records about its lanes and the tolerances it is judged by."""
    return {
        "jobs": controls.jobs,
        "lane_cpus": list(controls.cpus),
        "reference_share": reference_share(controls),
        "allow_siblings": controls.allow_siblings,
        "smt_siblings": [list(p) for p in machine.core_siblings(controls.cpus)],
        "interference_tolerance": {"median": SLOWER_TOL, "iqr": NOISIER_TOL},
    }


def _verdict(df: pd.DataFrame, runs: childruns.Runs) -> dict:
    """The interference check of every row recorded (a resumed sweep's earlier ones too)."""
    if df.empty or "cpu" not in df:
        return {}
    group = [k for k in runs.key if k != "rep"]
    return {"interference": interference(df, childruns.value_column(df), group)}


def judged(df: pd.DataFrame, runs: childruns.Runs) -> dict:
    """The interference check and the shared disturbance rule, each child on its one CPU."""
    return {**_verdict(df, runs), **childruns.disturbance_meta(df, runs, 1)}


def _iqr(x: np.ndarray) -> float:
    q1, q3 = np.percentile(x, [25, 75])
    return float(q3 - q1)


def interference(df: pd.DataFrame, value: str, group: Sequence[str]) -> dict:
    """Parallel vs sequential runs, per CPU and pooled, on values relative to their point's
    median (so the sizes' own effects cancel): median ratio with its 95% interval, IQR ratio,
    and a verdict: 'ok', 'slower', 'noisier', 'slower and noisier' or 'too few reference runs'.
    """
    ok = df.loc[df["status"] == "ok", [*group, "cpu", "parallel", value]].dropna()
    if ok.empty:
        return {"verdict": "no ok runs", "cpus": []}
    rel = ok[value] / ok.groupby(list(group))[value].transform("median")
    rows = [_judge(rel[ok["cpu"] == c], ok.loc[ok["cpu"] == c, "parallel"]) | {"cpu": int(c)}
            for c in sorted(ok["cpu"].unique())]  # fmt: skip
    pooled = _judge(rel, ok["parallel"])
    bad = sorted({r["verdict"] for r in [*rows, pooled] if r["verdict"] != "ok"})
    return {**pooled, "cpus": rows, "any": bad or ["ok"]}


def _judge(rel: pd.Series, parallel: pd.Series) -> dict:
    par = rel[parallel.to_numpy(bool)].to_numpy(float)
    seq = rel[~parallel.to_numpy(bool)].to_numpy(float)
    out = {"parallel_runs": int(par.size), "sequential_runs": int(seq.size)}
    if seq.size < MIN_REFERENCE or par.size < MIN_REFERENCE:
        return out | {"verdict": "too few reference runs"}
    ratio, lo, hi = stats.ratio_order_interval(seq, par, 0.95)
    iqr_seq = _iqr(seq)
    spread = _iqr(par) / iqr_seq if iqr_seq > 0 else float("nan")
    slower = ratio > 1 + SLOWER_TOL and lo > 1
    noisier = spread > 1 + NOISIER_TOL
    verdict = " and ".join(w for w, hit in (("slower", slower), ("noisier", noisier)) if hit)
    return out | {"median_ratio": ratio, "median_ratio_lo": lo, "median_ratio_hi": hi,
                  "iqr_ratio": spread, "verdict": verdict or "ok"}  # fmt: skip


def describe(verdict: dict) -> list[str]:
    """The interference check as lines of plain text for a report."""
    if not verdict or "cpus" not in verdict:
        return []
    lines = [
        f"parallel vs sequential reference (tolerance: median +{SLOWER_TOL:.0%}, "
        f"IQR +{NOISIER_TOL:.0%}):"
    ]
    for r in [*verdict["cpus"], verdict | {"cpu": "all"}]:
        head = f"  CPU {r['cpu']}: {r['parallel_runs']} parallel, {r['sequential_runs']} sequential"
        if "median_ratio" in r:
            head += (f"; median x{r['median_ratio']:.4f} [{r['median_ratio_lo']:.4f}, "
                     f"{r['median_ratio_hi']:.4f}], IQR x{r['iqr_ratio']:.2f}")  # fmt: skip
        lines.append(f"{head}: {r['verdict']}")
    bad = [v for v in verdict.get("any", []) if v != "ok"]
    if any(v in ("slower", "noisier", "slower and noisier") for v in bad):
        lines.append("  WARNING: runs side by side did not measure what runs one at a time do")
    return lines


def with_cpus(
    plan: PlanT, cpus: Sequence[int] | None, resume: str | os.PathLike | None = None
) -> PlanT:
    """The plan with its CPUs: those asked for (warned when a real-time task is busy there),
    else those the sweep being resumed from `resume` recorded, else the quietest usable ones,
    chosen by reading what each CPU does now and said in one line (running/cpuchoice.py).
    A child run needs the probe's descriptor: a limit that cannot hold it is said first."""
    limits.check_open_files()
    recorded = cpuchoice.recorded_cpus(resume) if cpus is None and resume else None
    if recorded is not None and not set(recorded) - set(machine.usable_cpus()):
        line = f"cpu {','.join(map(str, recorded))}: where {os.fspath(resume or '')} was measured"
        planned = with_lanes(plan, recorded) if plan.jobs != 1 else replace(plan, cpus=recorded)
        return replace(planned, cpu_choice=line)
    if plan.jobs != 1:
        return with_lanes(plan, cpus)
    if cpus is not None:
        asked = controls.cpu_tuple(cpus)
        cpuchoice.check_asked(asked)
        return replace(plan, cpus=asked)
    chosen = cpuchoice.pick()
    return replace(plan, cpus=chosen.cpus, cpu_choice=chosen.line)


def measure(
    runs: childruns.Runs,
    controls: Controls,
    meta: dict,
    recording: Recording | None = None,
    *,
    chunk_runs: int = childruns.CHUNK_RUNS,
    flush_s: float = FLUSH_S,
    on_start: Callable[[int, int], None] | None = None,
    progress: ProgressArg = None,
    warn: Warn = errors.warn,
) -> pd.DataFrame:
    """Run every planned run not yet recorded, in one lane or one per CPU (--jobs), showing
    progress: the caller's callbacks, nothing with progress=False, else a display that suits
    where it runs (a notebook line in Jupyter, a bar in a terminal, a line every 10 s or 5 %
    in a log)."""
    how = _measure_lanes if controls.jobs > 1 else childruns.measure_sequential
    with shown(meta.get("experiment", "runs"), on_start, progress) as (start, step):
        started = saying(controls.cpu_choice, start)
        return how(runs, controls, meta, recording, chunk_runs=chunk_runs, flush_s=flush_s,
                   on_start=started, progress=step, warn=warn)  # fmt: skip


def saying(line: str, start: Callable[[int, int], None] | None) -> Callable[[int, int], None]:
    """on_start that first says the CPU choice: once the journal has accepted the runs, so that
    a refused resume or bad input stays one line."""

    def started(todo: int, done: int) -> None:
        cpuchoice.say(line)
        if start:
            start(todo, done)

    return started
