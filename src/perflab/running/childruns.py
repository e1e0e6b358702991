"""One way for the experiments that run child processes (env-size, link-order, compare).

Each experiment only says what varies: its programs, and per planned run which program, what
padding and which key columns its row carries (`Runs`). This module does the rest the same
way for all of them: the run controls and their checks, the seeded run order, one unrecorded
preflight run per program, children on /dev/null, the runs in C batches (spawn.run_batch, one
C loop for a list of programs), Ctrl-C and SIGTERM as a stop between runs (interrupt.py), and
a chunked journal that a resume checks against the plan (recording.py).
"""

from __future__ import annotations

import contextlib
import os
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any, Self

import numpy as np

from perflab import errors
from perflab.analysis import disturbance
from perflab.core import bindings
from perflab.core.lazy import pd
from perflab.errors import PerflabError, Stopped
from perflab.plan.controls import Controls
from perflab.plan.metrics import Metric
from perflab.running import cpuchoice, spawn
from perflab.running.interrupt import Interrupt, interruptible
from perflab.store import journal
from perflab.store.identity import Executes
from perflab.store.recording import FLUSH_S, Recorder, Recording, Warn
from perflab.store.rowchecks import Expect
from perflab.system import machine, settings

CHUNK_RUNS = 512  # runs per C call: ~0.3 s of short runs; a stop ends a batch between two runs
# Batches queued in the spawner helper: it starts the next the moment one ends, without waiting
# for perflab's thread to be scheduled (on a loaded machine that wait idled the CPUs between
# every two batches) while that thread journals the last one.
AHEAD = 2

# What a recorded child run can hold: anything else in a journal was not written by perflab.
_COUNT = (0.0, float(2**63))
RUN_RANGES = {
    col: _COUNT
    for col in ("ticks", "outer_ticks", "wall_ns", "utime_ns", "stime_ns", "maxrss_kb",
                "minflt", "majflt", "nvcsw", "nivcsw", "cycles", "instructions", "runq_ns",
                "runq_cover")
}  # fmt: skip


def run_order(items: int, repeat: int, order: str, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(item, rep) of every run, `repeat` of each item, in the order they will be made:
    a seeded shuffle for 'random', so drift over time cannot pose as an effect."""
    item = np.tile(np.arange(items, dtype=np.int64), repeat)
    rep = np.repeat(np.arange(repeat, dtype=np.int64), items)
    if order == "random":
        shuffle = np.random.default_rng(seed).permutation(item.size)
        item, rep = item[shuffle], rep[shuffle]
    return item, rep


@contextlib.contextmanager
def away_from(cpus: tuple[int, ...]) -> Iterator[None]:
    """Keep perflab's own threads off the child's CPUs while it measures, when others exist
    where no real-time task was seen busy: beside one, the thread that journals the runs got
    5 % of its CPU and the sweep 1.14x a bare spawn loop's time (docs/cpu-choice.md)."""
    before = os.sched_getaffinity(0)
    others = before - set(cpus) - cpuchoice.realtime_busy()
    if cpus and others:
        os.sched_setaffinity(0, others)
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


def pages_kept_once(
    runs: np.ndarray, programs: list[tuple[str, ...]], extra: dict, warn: Warn
) -> None:
    """Programs whose pages could not be read afresh at a layout's start: recorded, and said
    once where the runs execute more than one file (one file's placement, however fixed, is
    the same for every run: the interpreter of two scripts, which perflab itself maps)."""
    kept = runs[(runs["flags"] & bindings.RUN_PAGES_KEPT) != 0]
    if kept.size == 0 or "pages_kept" in extra:
        return
    names = sorted({programs[int(p)][0] for p in kept["prog"]})
    extra["pages_kept"] = names
    if len({argv[0] for argv in programs}) > 1:
        warn(errors.warning("pages_kept", programs=", ".join(names)))


def rt_refused_once(
    options: spawn.SpawnOptions, runs: np.ndarray, extra: dict, warn: Warn
) -> spawn.SpawnOptions:
    """Real-time refused: say so once, record it, and stop asking (Rubini's Listing 2)."""
    refused = runs["rt_errno"][runs["rt_errno"] != 0]
    if not options.rt or refused.size == 0:
        return options
    why = spawn.describe_errno(int(refused[0]))
    warn(errors.warning("rt_refused", why=why))
    extra["rt_granted"] = False
    extra["rt_refused"] = why
    return replace(options, rt=False)


def rt_throttled_once(
    options: spawn.SpawnOptions, runs: np.ndarray, extra: dict, warn: Warn
) -> None:
    """Real-time runs longer than the kernel's real-time runtime: no rest between runs keeps
    its throttle out of them (csrc/spawn_rest.c, rest_before), so say so once and record it."""
    granted = runs["wall_ns"][runs["rt_errno"] == 0]
    bandwidth = settings.rt_bandwidth() if options.rt and granted.size else None
    if bandwidth is None or "rt_throttled" in extra or granted.max() <= bandwidth[0]:
        return
    said = {
        "longest": f"{granted.max() / 1e6:,.0f}",
        "runtime": f"{bandwidth[0] / 1e6:,.0f}",
        "period": f"{bandwidth[1] / 1e6:,.0f}",
    }
    warn(errors.warning("rt_throttled", **said))
    extra["rt_throttled"] = said


def disturbance_meta(df: pd.DataFrame, runs: Runs, ncpus: int) -> dict:
    """The disturbance rule every verb shares (analysis/disturbance.py) on every ok row
    recorded (a resumed sweep's earlier ones too), each run on `ncpus` CPUs."""
    ok = df[df["status"] == "ok"] if "status" in df else df.iloc[:0]
    needed = {"utime_ns", "stime_ns", "wall_ns", "nivcsw"}
    if ok.empty or not needed <= set(ok.columns):
        return {}
    group = [k for k in runs.key if k != "rep"]
    value = value_column(ok)
    why = disturbance.child_runs(ok, group, value, max(ncpus, 1))
    return {"disturbed": disturbance.verdict(why, ok[value], disturbance.points(ok, group))}


def base_env(inherit: bool, var: str | None = None) -> dict[str, str]:
    """The children's environment: empty (the post's `env -i`) or ours, minus the padding."""
    if not inherit:
        return {}
    return {k: v for k, v in os.environ.items() if k != var}


@contextlib.contextmanager
def quiet_options(controls: Controls) -> Iterator[spawn.SpawnOptions]:
    """Spawn options for these controls with the child's stdin on /dev/null, opened once, and
    its stdout and stderr there too (800 000 runs must not print 800 000 lines) unless the
    sweep directed them elsewhere (program_output.directed)."""
    from perflab.running import program_output

    devnull = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
    out = program_output.child_fd(devnull)
    try:
        yield spawn.SpawnOptions(
            aslr=controls.aslr,
            cpus=controls.cpus,
            rt=controls.rt,
            mlock=controls.mlock,
            timeout=controls.timeout,
            stdin=devnull,
            stdout=out,
            stderr=out,
        )
    finally:
        os.close(devnull)


def run_expect(
    key: tuple[str, ...], planned: tuple[np.ndarray, ...], columns: Iterable[str]
) -> Expect:
    """A journal's check for child-run rows: these columns, each planned key once, sane values."""
    frame = pd.DataFrame(dict(zip(key, planned, strict=True)))
    columns = tuple(columns)
    return Expect(
        columns=columns,
        planned=frame,
        unique=tuple(key),
        ranges={col: span for col, span in RUN_RANGES.items() if col in columns},
        categories={"status": tuple(spawn.STATUS_NAMES)},
    )


def value_column(df: pd.DataFrame) -> str:
    """The probe's ticks when every ok run has them, else the parent's ticks around each run."""
    ok = df["status"] == "ok"
    return "ticks" if ok.any() and df.loc[ok, "ticks"].notna().all() else "outer_ticks"


def metric_column(frame: pd.DataFrame, metric: Metric) -> tuple[pd.DataFrame, str]:
    """The frame with the metric's column (cpu_ns added from utime_ns and stime_ns), and its
    name; maxrss_kb below 0 (not measurable in-process) as missing."""
    if metric.column is None:
        return frame, value_column(frame)
    if metric.name == "cpu" and "cpu_ns" not in frame:
        frame = frame.assign(cpu_ns=frame["utime_ns"] + frame["stime_ns"])
    elif metric.name == "maxrss":
        frame = frame.assign(maxrss_kb=frame["maxrss_kb"].where(frame["maxrss_kb"] >= 0))
    return frame, metric.column


def status_counts(df: pd.DataFrame) -> dict[str, int]:
    """How many runs ended in each status, 'ok' first."""
    counts = df["status"].value_counts()
    counts = counts[counts > 0]
    return {str(s): int(counts[s]) for s in sorted(counts.index, key=lambda s: (s != "ok", s))}


MEASURED = spawn.TIDY_COLUMNS


@dataclass(frozen=True)
class Setting:
    """What some of a sweep's runs change in how they start (compare's layouts): variables set
    after the base environment's, and an ASLR mode instead of the controls' one."""

    env: tuple[tuple[str, str], ...] = ()
    aslr: str | None = None


@dataclass
class Runs:
    """What a sweep runs: its programs (argv, argv[0] resolved), and per planned run, in run
    order, which program, what padding (-1: none) and the columns its row starts with."""

    programs: list[tuple[str, ...]]
    prog: np.ndarray
    labels: dict[str, np.ndarray]
    key: tuple[str, ...]
    sizes: np.ndarray | None = None
    var: str = "A"
    env: dict[str, str] = field(default_factory=dict)
    runq: str = "off"  # RUNQ_MODES: read each run's run-queue wait (serial sweeps only)
    iterations: int = 1  # asked of the probe's repeat loop in each run (1: one region, as ever)
    looped: bool = False  # rows carry the iteration columns even where a round asks for one
    # each run's iterations classified, its warm-up set aside (spawn.STEADY_COLUMNS)
    steady: bool = False
    # Read the run's CPUs' busy time (/proc/stat) around each batch of one run: cpus_busy_ns
    # less the run's CPU time is what other tasks took of them (serial sweeps only).
    busy: bool = False
    # Per planned run, which of `settings` it starts under (None: all under the first). One C
    # batch has one environment and one set of options, so batches are cut where it changes.
    setting: np.ndarray | None = None
    settings: tuple[Setting, ...] = (Setting(),)
    # Per planned run, the layout it belongs to (compare's setups, link-order's programs): the
    # first of each layout's runs still to do starts a batch that reads the programs' files
    # afresh into the page cache (`fresh`, from starting()), so where their pages sit in
    # physical memory is drawn per layout like the rest of it (SpawnOptions.settle).
    layout: np.ndarray | None = None
    fresh: np.ndarray | None = None
    # A sweep that plans as it goes (compare --precision) journals these runs as one round of
    # many: its plan is open, and its identity names what every round runs (`sources`), not
    # the programs this round linked.
    # Where each program runs (one directory each, "" for perflab's; none: all in perflab's):
    # a commit's benchmark in the commit's tree, as `git bisect run` runs it.
    dirs: tuple[str, ...] = ()
    sources: Executes | None = None

    @property
    def columns(self) -> list[str]:
        runq = spawn.RUNQ_COLUMNS if self.runq != "off" else ()
        iterations: tuple[str, ...] = spawn.ITERATION_COLUMNS if self.per_iteration else ()
        iterations += spawn.STEADY_COLUMNS if self.steady else ()
        busy = ("cpus_busy_ns",) if self.busy else ()
        return [*self.labels, *MEASURED, *runq, *iterations, *busy]

    @property
    def per_iteration(self) -> bool:
        """Whether the rows say what the repeat loop's iterations did (spawn.ITERATION_COLUMNS)."""
        return self.looped or self.iterations > 1

    def expect(self) -> Expect:
        """What a journal checks of this sweep's rows: its columns, each planned run once (for
        a round of an open plan: each run at most once)."""
        expect = run_expect(self.key, tuple(self.labels[k] for k in self.key), self.columns)
        return replace(expect, planned=None) if self.sources is not None else expect

    def executes(self) -> Executes:
        """What its runs execute, for the identity a resume must repeat."""
        return self.sources or Executes(self.programs, self.env, self.var)

    def rows(self, runs: np.ndarray, at: np.ndarray, overhead: int, **more: Any) -> pd.DataFrame:
        """The records of the planned runs at positions `at` as tidy rows (`more` columns
        after the labels), built in one go."""
        labels = {name: values[at] for name, values in self.labels.items()}
        runq = spawn.runq_columns(runs) if self.runq != "off" else {}
        tidy = spawn.tidy_columns(runs, overhead)
        columns = spawn.steady_columns if self.steady else spawn.iteration_columns
        iterations = columns(runs, tidy["ticks"], overhead) if self.per_iteration else {}
        return pd.DataFrame({**labels, **more, **tidy, **iterations, **runq})

    def starting(self, todo: np.ndarray) -> Self:
        """These runs with `fresh` marking the first of each layout's runs in todo (positions
        in run order): a layout a resume completes reads its pages afresh too."""
        if self.layout is None or todo.size == 0:
            return self
        fresh = np.zeros(self.prog.size, bool)
        fresh[todo[np.unique(self.layout[todo], return_index=True)[1]]] = True
        return replace(self, fresh=fresh)

    def batches(self, at: np.ndarray) -> list[np.ndarray]:
        """The planned positions `at`, cut where the setting changes and before each run a
        layout starts with: one batch, one setting, at most one layout's pages read afresh."""
        if at.size < 2 or (self.setting is None and self.fresh is None):
            return [at]
        cut = np.zeros(at.size - 1, bool)
        if self.setting is not None:
            step = self.setting[at]
            cut |= step[1:] != step[:-1]
        if self.fresh is not None:
            cut |= self.fresh[at[1:]]
        return np.split(at, np.flatnonzero(cut) + 1)

    def under(
        self, at: np.ndarray, options: spawn.SpawnOptions
    ) -> tuple[dict[str, str], spawn.SpawnOptions]:
        """The environment and the options of a batch of the runs at `at` (one setting)."""
        one = self.settings[int(self.setting[at[0]])] if self.setting is not None else Setting()
        env = {**self.env, **dict(one.env)}
        if one.aslr:
            options = replace(options, aslr=one.aslr)
        if self.fresh is not None:
            options = replace(options, settle=bool(self.fresh[at[0]]))
        if self.dirs:
            options = replace(options, dirs=self.dirs)
        return env, options


def runs_to_do(runs: Runs, done: set[tuple]) -> np.ndarray:
    """Positions of the planned runs not measured yet, in run order."""
    everything = np.arange(runs.prog.size)
    if not done:
        return everything
    planned = pd.MultiIndex.from_arrays([runs.labels[k] for k in runs.key])
    have = pd.MultiIndex.from_tuples(list(done))
    return everything[~planned.isin(have)]


def preflight(runs: Runs, options: spawn.SpawnOptions) -> float:
    """One unrecorded run of each program, under the setting of its first planned run: one that
    cannot start stops the sweep here with nothing saved, and each binary is in the page cache
    before its first recorded run. Returns the longest one's wall time, in seconds."""
    first = int(runs.sizes.min()) if runs.sizes is not None and runs.sizes.size else -1
    sizes = np.full(runs.prog.size, first, np.int64)
    at = np.unique(runs.prog, return_index=True)[1]  # each program's first run, program order
    if runs.setting is not None:
        at = at[np.argsort(runs.setting[at], kind="stable")]
    out = np.concatenate(
        [spawn.run_batch(runs.programs, runs.prog[part], sizes[part], runs.var,
                         *runs.under(part, options)) for part in runs.batches(at)]
    )  # fmt: skip
    if out.size < at.size:
        raise Stopped
    for run in out:
        status = spawn.STATUS[int(run["status"])]
        if status in ("exec_failed", "setup_failed", "spawn_failed"):
            why = spawn.describe_errno(int(run["child_errno"]))
            argv0 = runs.programs[int(run["prog"])][0]
            raise PerflabError(f"cannot run {argv0}: {status.replace('_', ' ')}, {why}")
    return float(out["wall_ns"].max()) / 1e9 if out.size else 0.0


def runs_per_batch(longest_s: float, most: int, flush_s: float) -> int:
    """Runs in one C batch: as many as take about flush_s, so that rows reach the disk that
    often (a batch's rows come back when it ends) however long a run is; `most` at the most,
    and when every batch is flushed (flush_s 0)."""
    if longest_s <= 0 or flush_s <= 0:
        return most
    return max(1, min(most, int(flush_s / longest_s)))


def measure_sequential(
    runs: Runs,
    controls: Controls,
    meta: dict,
    recording: Recording | None = None,
    *,
    chunk_runs: int = CHUNK_RUNS,
    flush_s: float = FLUSH_S,
    on_start: Callable[[int, int], None] | None = None,
    progress: Callable[[int], None] | None = None,
    warn: Warn = errors.warn,
) -> pd.DataFrame:
    """Run every planned run not yet recorded, in C batches of chunk_runs, and return the rows.

    Batches wait queued in the spawner, AHEAD at a time, while this thread journals the last
    one: the next starts the moment one ends, and Python's per-row work costs no time per run.
    A fresh record (no resume) has every run to do, so when this thread runs off the children's
    CPUs the first batches are queued before the recorder loads pandas (a third of a second).
    A KeyboardInterrupt leaves the journal complete up to the last finished run and marked
    incomplete.
    """
    recording = recording or Recording()
    fresh = not recording.resume
    with quiet_options(controls) as options, _claimed(recording):
        options = replace(options, runq=runs.runq, iterations=runs.iterations)
        chunk_runs = runs_per_batch(interruptible(preflight, runs, options), chunk_runs, flush_s)
        overhead = spawn.timer_overhead()
        extra: dict[str, Any] = {"timer_overhead_ticks": overhead, "rt_granted": controls.rt}
        spawner = spawn.spawner()
        sizes = runs.sizes if runs.sizes is not None else np.full(runs.prog.size, -1, np.int64)
        # A run's CPUs' busy time is read around its batch alone: nothing else queued beside it.
        ahead = 1 if runs.busy else AHEAD
        recorder: Recorder | None = None
        complete = False
        with Interrupt() as stop, away_from(controls.cpus), spawner.pipeline() as pipe:

            def record() -> np.ndarray:
                """Open the recorder; the positions of the runs it has not recorded."""
                nonlocal recorder
                recorder = Recorder(recording, runs.key, runs.expect(), controls.params(), meta,
                                    warn, flush_s, executes=runs.executes())  # fmt: skip
                return runs_to_do(runs, recorder.done_keys())

            def send(at: np.ndarray) -> tuple[np.ndarray, float]:
                """Queue one batch; its positions and the CPUs' busy time before it."""
                before = machine.busy_ns(controls.cpus) if runs.busy else 0
                pipe.submit(*spawn.request(runs.programs, runs.prog[at], sizes[at], runs.var,
                                           *runs.under(at, options)))  # fmt: skip
                return at, before

            try:
                early = fresh and _apart(controls.cpus)
                todo = np.arange(runs.prog.size) if early else record()
                runs = runs.starting(todo)
                chunks = [part for i in range(0, todo.size, chunk_runs)
                          for part in runs.batches(todo[i : i + chunk_runs])]  # fmt: skip
                if on_start:  # the progress's clock starts with the first run
                    on_start(int(todo.size), runs.prog.size - int(todo.size))
                started = time.monotonic()
                queued = deque(send(at) for at in chunks[:ahead])
                if early:
                    record()
                    assert recorder is not None
                    recorder.flushed = started  # the first rows reach the disk a second in
                assert recorder is not None
                for i in range(len(chunks)):
                    at, before = queued.popleft()
                    try:
                        batch = pipe.collect()  # fewer than the chunk when a stop cut it short
                    except spawn.HelperLost as lost:  # what its batch finished is recorded
                        recorder.add(runs.rows(lost.runs, at[: len(lost.runs)], overhead))
                        raise
                    # one figure per batch: a run's own only when the batch is that one run
                    mine = runs.busy and len(batch) == 1
                    busy = machine.busy_ns(controls.cpus) - before if mine else np.nan
                    done = [(batch, at, busy)]
                    stopping = stop.hit  # read once: every batch queued is collected
                    if stopping:
                        done += [(pipe.collect(), at, np.nan) for at, _ in queued]
                        queued.clear()
                    elif i + ahead < len(chunks):
                        queued.append(send(chunks[i + ahead]))
                    for batch, at, busy in done:
                        rt_throttled_once(options, batch, extra, warn)
                        options = rt_refused_once(options, batch, extra, warn)
                        pages_kept_once(batch, runs.programs, extra, warn)
                        if runs.runq != "off" and len(batch) and "runq" not in extra:
                            extra["runq"] = spawn.runq_note(batch)
                        rows = runs.rows(batch, at[: len(batch)], overhead)
                        if runs.busy:
                            rows["cpus_busy_ns"] = busy
                        recorder.add(rows)
                        if progress:
                            progress(len(batch))
                    if stopping:
                        raise KeyboardInterrupt
                complete = True
            except BaseException:
                spawner.request_stop()  # the batches still queued end at their next run
                raise
            finally:
                if recorder is not None:
                    extra.update(spawn.maxrss_meta(spawner))
                    df = recorder.finish(
                        complete, extra,
                        annotate=lambda rows: disturbance_meta(rows, runs, len(controls.cpus)),
                    )  # fmt: skip
    return df


@contextlib.contextmanager
def _claimed(recording: Recording) -> Iterator[None]:
    """A fresh journal's file held from the start: what opening it would refuse is refused
    before the first run, even when the runs start before it opens."""
    if recording.output is None or recording.resume:
        yield
        return
    with journal.claimed(recording.output):
        yield


def _apart(cpus: tuple[int, ...]) -> bool:
    """Whether this process runs off every CPU of the children (work here cannot delay them)."""
    return bool(cpus) and not os.sched_getaffinity(0) & set(cpus)
