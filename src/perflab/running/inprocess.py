"""One way to run the experiments measured inside perflab's own process (memcpy, syscalls, trig,
cswitch, pagefault, the threads labs): journaled chunks, a clean stop, a resume.

An experiment says what it records (a RowSchedule: one key row per row, in measuring order, and the
parameters a resume must repeat) and how to measure the rows of one chunk. This module does
the rest as childruns does for child processes: each chunk, sized to take about CHUNK_S, goes
to the journal as it is measured; Ctrl-C and SIGTERM stop between two chunks (a chunk the
signal cut short is not recorded); a resume measures only the rows not recorded yet.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from perflab import errors
from perflab.core.lazy import pd
from perflab.running.interrupt import Interrupt
from perflab.running.progress import OnStart, ProgressArg, shown
from perflab.store.recording import FLUSH_S, Recorder, Recording, Warn
from perflab.store.rowchecks import Expect

CHUNK_S = FLUSH_S  # a chunk takes about this long: a kill -9 loses about that much
GROWTH = 4  # a chunk weighs at most this many times the last: a costlier stretch shows soon

Measure = Callable[["pd.DataFrame"], "pd.DataFrame"]


@dataclass(frozen=True)
class RowSchedule:
    """What an in-process experiment records, and what a resume must repeat (params).

    keys: one row per row recorded, its key columns, in the order they are measured.
    unit: the key columns of rows measured together (one chunk never splits them; default:
    each row alone). phase: key columns whose change starts the chunk sizing afresh (another
    call, cold runs after warm ones: another cost per row). weight: the cost of each key row,
    for progress and chunk sizing (default: 1 per unit). derive: recomputes, on every merged
    row in plan order, the columns that depend on neighbouring rows.
    """

    experiment: str
    keys: pd.DataFrame
    columns: tuple[str, ...]
    params: Mapping[str, Any]
    meta: Mapping[str, Any]
    unit: tuple[str, ...] = ()
    phase: tuple[str, ...] = ()
    weight: np.ndarray | None = None
    derive: Callable[[pd.DataFrame], pd.DataFrame] | None = None

    @property
    def key(self) -> tuple[str, ...]:
        return tuple(map(str, self.keys.columns))

    def expect(self) -> Expect:
        """What the journal checks of every row: the columns, each planned key exactly once."""
        return Expect(columns=self.columns, planned=self.keys, unique=self.key)

    def arrange(self, df: pd.DataFrame) -> pd.DataFrame:
        """The merged rows in plan order, whatever order the sessions measured them in."""
        plan = pd.MultiIndex.from_frame(self.keys)
        pos = plan.get_indexer(pd.MultiIndex.from_frame(df[list(self.key)]))
        df = df.iloc[np.argsort(pos, kind="stable")].reset_index(drop=True)
        return self.derive(df) if self.derive is not None else df


def _runs(keys: pd.DataFrame, cols: tuple[str, ...]) -> np.ndarray:
    """A number per row that changes wherever one of these columns does (one number if none)."""
    if not cols:
        return np.zeros(len(keys), np.int64)
    sub = keys[list(cols)]
    return np.cumsum(sub.ne(sub.shift()).any(axis=1).to_numpy())


@dataclass
class _Todo:
    """The rows still to measure, as whole units: bounds[k]:bounds[k+1] of rows are unit k."""

    rows: np.ndarray
    bounds: np.ndarray
    cum: np.ndarray  # weight of the units before unit k
    phase_end: np.ndarray  # the first unit of the next phase after unit k
    done: int  # weight measured by earlier sessions

    @classmethod
    def of(cls, plan: RowSchedule, done_keys: set[tuple]) -> _Todo:
        n = len(plan.keys)
        rows = np.arange(n)
        if done_keys:
            have = pd.MultiIndex.from_tuples(list(done_keys))
            rows = rows[~pd.MultiIndex.from_frame(plan.keys).isin(have)]
        unit = _runs(plan.keys, plan.unit or plan.key)
        first = np.r_[True, unit[1:] != unit[:-1]]
        weight = np.asarray(plan.weight if plan.weight is not None else first, np.int64)
        total = int(np.sum(weight))
        todo_unit = unit[rows]
        starts = np.flatnonzero(np.r_[True, todo_unit[1:] != todo_unit[:-1]]) if rows.size else rows
        unit_weight = np.add.reduceat(weight[rows], starts) if rows.size else rows
        phase = _runs(plan.keys, plan.phase)[rows[starts]]
        change = np.flatnonzero(np.r_[phase[1:] != phase[:-1], True]) + 1
        return cls(rows=rows, bounds=np.r_[starts, rows.size], cum=np.r_[0, np.cumsum(unit_weight)],
                   phase_end=np.repeat(change, np.diff(np.r_[0, change])),
                   done=total - int(np.sum(unit_weight)))  # fmt: skip

    @property
    def units(self) -> int:
        return self.bounds.size - 1

    def next_end(self, k: int, budget: float) -> int:
        """The end of the chunk starting at unit k: as many units as the budget allows, at
        least one, all of one phase."""
        fits = int(np.searchsorted(self.cum, self.cum[k] + budget, side="right")) - 1
        return max(k + 1, min(fits, int(self.phase_end[k])))


def measure(
    plan: RowSchedule,
    measure_chunk: Measure,
    recording: Recording | None = None,
    *,
    on_start: OnStart | None = None,
    progress: ProgressArg = None,
    warn: Warn = errors.warn,
    chunk_s: float = CHUNK_S,
    release: Callable[[], Mapping[str, Any]] | None = None,
) -> pd.DataFrame:
    """Measure every planned row not recorded yet, chunk by chunk, and return all the rows.

    measure_chunk(keys) returns the rows of those key rows (whole units): their key columns and
    the plan's others (one it leaves out is NaN). Chunks start at one unit and grow (at most
    GROWTH times per chunk) towards chunk_s each, afresh at each phase. A KeyboardInterrupt
    (Stopped after a signal) leaves the journal complete up to the last chunk and marked
    incomplete. release(), once measuring stops (done, stopped or failed), frees what measuring
    held before the rows are merged and written, and returns metadata for the file: memcpy's
    buffers are not held while pandas and pyarrow build and write the frame.
    """
    recording = recording or Recording()
    recording.check()
    on_start, progress = on_start or recording.on_start, progress or recording.progress
    with shown(plan.experiment, on_start, progress) as (start, step), \
            Interrupt() as stop:  # fmt: skip
        recorder = Recorder(recording, plan.key, plan.expect(), dict(plan.params),
                            dict(plan.meta), warn, flush_s=0.0,
                            arrange=plan.arrange)  # fmt: skip
        complete = False
        try:
            todo = _Todo.of(plan, recorder.done_keys())
            if start:
                start(int(todo.cum[-1]), todo.done)
            k, budget = 0, 0.0
            while k < todo.units:
                if stop.hit:
                    raise KeyboardInterrupt
                if k and todo.phase_end[k - 1] == k:
                    budget = 0.0  # a new phase: its first chunk is one unit
                end = todo.next_end(k, budget)
                keys = plan.keys.iloc[todo.rows[todo.bounds[k] : todo.bounds[end]]]
                began = time.monotonic()
                try:
                    rows = measure_chunk(keys.reset_index(drop=True))
                except Exception:
                    if stop.hit:  # the signal cut this chunk short (an EINTR, a child it killed)
                        raise KeyboardInterrupt from None
                    raise
                took = time.monotonic() - began
                unknown = set(rows.columns) - set(plan.columns)
                if unknown:
                    raise ValueError(f"rows with columns outside the plan: {sorted(unknown)}")
                recorder.add(rows.reindex(columns=list(plan.columns)))
                weight = float(todo.cum[end] - todo.cum[k])
                if step:
                    step(int(weight))
                budget = weight * (min(GROWTH, chunk_s / took) if took > 0 else GROWTH)
                k = end
            complete = True
        finally:
            extra: dict[str, Any] = {}
            try:
                if release is not None:
                    extra.update(release())
            finally:
                df = recorder.finish(complete, extra)
    return df
