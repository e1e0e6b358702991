"""--precision: rounds of new layouts, planned from the variance so far, until B/A is that sure."""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from perflab.analysis import levels, repetitions
from perflab.core import constants
from perflab.core.lazy import pd
from perflab.errors import PerflabError
from perflab.lab.compare.layouts import draw_setups
from perflab.lab.compare.plan import ComparePlan
from perflab.lab.compare.sides import Side, sources
from perflab.lab.compare.verdict import CONFIDENCE, TRIM, half_width, interval, steady
from perflab.running.childruns import value_column
from perflab.running.progress import ProgressArg
from perflab.store import results
from perflab.store.recording import Recording
from perflab.system import settings

# No precision is called reached over fewer layouts: a bootstrap over a handful of units
# misses more often than it says, and an interval that happens to be narrow stops the run.
MIN_LAYOUTS = 10

# Nor fewer pairs a layout than a median can stand on: one disturbed run (a neighbour's burst)
# is then outvoted in its layout instead of becoming that layout's B/A. And an even number,
# as any count of pairs is made: A goes first in half the pairs of every layout, so what the
# second run of a pair gains (0.2 % in A/A runs of brotli here) cancels within each layout.
MIN_PAIRS = 4

PILOT = (MIN_LAYOUTS, MIN_PAIRS)  # the least any decision stands on, and the plan's first data

PREDICTION_CONFIDENCE = 0.9  # the range said with the plan's predicted time

# With the repeat loop, the pilot's second round: layouts of one iteration a run, so that what
# more iterations buy is measured between processes at two counts (levels._by_count).
SINGLE_PILOT = 5

RT_SHARE = 0.8  # of the kernel's real-time runtime a planned real-time run may fill


@dataclass
class Round:
    """One round of a --precision comparison: what it added, what it cost, where B/A stood."""

    setups: int
    repeat: int
    seconds: float
    half_width: float = math.nan
    planned: tuple[int, ...] | None = None  # the plan made after it: layouts in all, pairs each
    iterations: int = 1  # of the repeat loop, in each of its runs


@dataclass(frozen=True)
class Step:
    """A round the design proposes: `layouts` new layouts of `pairs` A/B pairs at `iterations`
    a run, each costing `cost` seconds; it runs as many of them as the budget affords, none
    (the comparison stops) where that is fewer than `least`."""

    layouts: int
    pairs: int
    iterations: int
    cost: float
    least: int = 1


class PrecisionDesign:
    """Where a --precision comparison stands between rounds, and what it runs next: a pilot of
    PILOT, then as many layouts of as many pairs as Kalibera and Jones's plan asks from the
    variance of the layouts' B/A and the costs measured so far (analysis/repetitions.py), re-planned
    after every round (next_round), until B/A's interval reaches plan.precision or the budget
    is spent (_why_stop). A resume goes on from the rows and record its file holds, with the
    budget anew. It runs nothing: each round's rows are given to it (ran)."""

    def __init__(self, plan: ComparePlan, frame: pd.DataFrame | None, journaled: bool) -> None:
        self.plan = plan
        self.frame = frame  # every round's rows so far (None: none yet)
        self.journaled = journaled  # each round's frame is then the whole file's
        self.reps = _reps(frame)  # pairs recorded per layout
        self.todo = {s: PILOT[1] for s in range(PILOT[0])} if frame is None else _unfinished(frame)
        self.iterations = plan.iterations if frame is None else _round_iterations(frame, plan)
        self.rounds: list[Round] = []
        self.spent, self.reason, self.most = 0.0, "", constants.MAX_ITERATIONS
        self.earlier = _earlier(frame)  # what the sessions before a resume ran and predicted
        self.predicted = self.earlier.get("predicted_s", math.nan)
        self.predicted_range = self.earlier.get("predicted_range_s", [math.nan, math.nan])
        self.pilot_layouts = self.earlier.get("predicted_from_layouts", 0)
        # a new layout, a pair of runs (A and B) beyond their iterations, an iteration of both
        self.costs = _costs_before(frame)

    def ran(self, part: pd.DataFrame, seconds: float, tsc_hz: float) -> None:
        """Take the rows of the round self.todo asked for (the whole file's, when journaled)
        and what it cost."""
        todo, k = self.todo, self.iterations
        self.spent += seconds
        built = float(results.metadata(part).get("build_s", 0.0))
        before = len(self.frame) if self.frame is not None and self.journaled else 0
        new = part.iloc[before:]  # a resumed round runs what is missing
        pairs = max(len(new) / 2, 1)
        looping = iteration_seconds(new, tsc_hz)
        self.costs = [built / len(todo), max(seconds - built - looping, 1e-9) / pairs,
                      looping / pairs / k if looping > 0 else _known(self.costs[2])]  # fmt: skip
        joined = self.journaled or self.frame is None
        self.frame = part if joined else _joined(self.frame, part)
        self.rounds.append(Round(len(todo), max(todo.values()), seconds, iterations=k))
        self.reps.update(todo)

    def next_round(self) -> bool:
        """Choose the next round (self.todo, self.iterations), or stop (False, self.reason
        saying why): from B/A's interval over the rows so far, the pilot's second round where
        the runs so far ran the loop at one count, else the plan."""
        assert self.frame is not None  # the pilot ran, now or before the resume
        value = value_column(self.frame)
        ok = steady(self.frame[self.frame["status"] == "ok"], value)
        try:
            reached = half_width(*interval(ok, value))
            parts = levels.paired_ratio_components(ok, value, trim=TRIM)
        except PerflabError as exc:
            return self._stop(f"no interval: {exc}")
        if self.rounds:
            self.rounds[-1].half_width = reached
        if reason := self._why_stop(reached):
            return self._stop(reason)
        step = self._single_pilot() if _one_count_looped(ok) else self._planned(parts)
        if reason := self._why_stop(reached, step):
            return self._stop(reason)
        start = max(self.reps) + 1
        layouts = min(step.layouts, self._afford(step))
        self.todo = {s: step.pairs for s in range(start, start + layouts)}
        self.iterations = step.iterations
        return True

    def _why_stop(self, reached: float, step: Step | None = None) -> str:
        """The stop rule ('' to go on): B/A's interval as narrow as asked over MIN_LAYOUTS
        layouts or more; or the budget left short of the least of the next step."""
        if reached <= self.plan.precision and len(self.reps) >= MIN_LAYOUTS:
            return "reached"
        if step is not None and self._afford(step) < step.least:
            return "budget spent"
        return ""

    def _afford(self, step: Step) -> int:
        """How many of the step's layouts the budget left pays for."""
        return int((self.plan.budget - self.spent) // max(step.cost, 1e-9))

    def _stop(self, reason: str) -> bool:
        """Stop, saying why."""
        self.reason, self.todo = reason, {}
        return False

    def _single_pilot(self) -> Step:
        """The pilot's second round with the repeat loop: SINGLE_PILOT layouts of one iteration
        a run, all of them or none."""
        cost = _layout_cost(self.costs, PILOT[1], 1)
        return Step(SINGLE_PILOT, PILOT[1], 1, cost, least=SINGLE_PILOT)

    def _planned(self, parts: levels.Components) -> Step:
        """The round the plan from the variance so far asks for; the first plan made after a
        round is that round's record, and the first of all (after the pilot) predicts the
        comparison's time."""
        looped = len(parts.levels) > 2
        self.most = most_iterations(self.plan, self.costs)
        planned = repetitions.plan(parts, self.costs[: len(parts.levels)], self.plan.precision,
                                   CONFIDENCE, least=(*PILOT, 1)[: len(parts.levels)],
                                   most_inner=self.most)  # fmt: skip
        if self.rounds and self.rounds[-1].planned is None:
            self.rounds[-1].planned = planned.counts
        layouts, pairs = planned.counts[:2]
        pairs += pairs % 2
        k = planned.counts[2] if looped else self.iterations
        cost = _layout_cost(self.costs, pairs, k if looped else 0)
        run = len(self.reps)
        if math.isnan(self.predicted):  # the first plan, from the pilot: what the docs weigh
            self.predicted, *self.predicted_range = predicted_time(self.spent, layouts, run, cost)
            self.pilot_layouts = run
        return Step(_next_round(run, layouts), pairs, k, cost)

    def so_far(self) -> dict[str, Any]:
        """The record of every round run so far, this session's after the earlier ones'."""
        return {
            "seconds": self.earlier.get("seconds", 0.0) + self.spent,
            "predicted_s": self.predicted,
            "predicted_range_s": self.predicted_range,
            "predicted_from_layouts": self.pilot_layouts,
            "rounds": [*self.earlier.get("rounds", []),
                       *(vars(r) | {"planned": list(r.planned or ())} for r in self.rounds)],
        }  # fmt: skip

    def record(self) -> dict[str, Any]:
        """What the comparison asked, reached, took and predicted: the result's 'precision'."""
        costs = self.costs
        return {
            "target": self.plan.precision,
            "confidence": CONFIDENCE,
            "reached": self.reason == "reached",
            "stopped": self.reason,
            **self.so_far(),
            "predicted_confidence": PREDICTION_CONFIDENCE,
            "budget_s": self.plan.budget,
            "costs_s": {"layout": costs[0], "pair": costs[1], "iteration": costs[2]},
            "most_iterations": self.most,
        }


def to_precision(
    a: Side,
    b: Side,
    plan: ComparePlan,
    meta: dict,
    recording: Recording,
    on_start: Callable[[int, int], None] | None,
    progress: ProgressArg,
    warn: Callable[[str], None],
    measure: Callable[..., pd.DataFrame],
) -> pd.DataFrame:
    """Run the rounds a PrecisionDesign chooses (measure: runs.measure), journaled round by
    round into one file, and attach its record; a resume goes on from the file's rows."""
    labels = [o.label for o in a.objects]
    executes = sources(a, b)
    meta = {**meta, "setups": None, "repeat": None}
    resumed = _resumed(recording)
    if resumed is not None:
        _same_plan(results.metadata(resumed).get("params") or {}, plan.params(), recording.output)
    design = PrecisionDesign(plan, resumed, journaled=recording.output is not None)
    said: set[str] = set()

    def warn_once(message: str) -> None:
        """What a round warns (a kept program, refused priority), said once a comparison."""
        if message not in said:
            said.add(message)
            warn(message)

    def started(todo: int, done: int = 0) -> Any:
        """A resumed round's start, with every run the file holds as done, not only the cut
        round's own."""
        assert on_start is not None
        frame = design.frame
        return on_start(todo, len(frame) if done and frame is not None else done)

    while True:
        if design.todo:
            todo, k = design.todo, design.iterations
            drawn = draw_setups(replace(plan, setups=max(todo) + 1), labels)
            t0 = time.perf_counter()
            resume = recording.resume or design.frame is not None
            planned_round = {
                "round_pairs": {str(s): n for s, n in todo.items()},
                "round_iterations": k,
                "precision_so_far": design.so_far(),
            }
            part = measure(a, b, plan, {drawn[s]: n for s, n in todo.items()},
                           meta | planned_round, replace(recording, resume=resume), executes,
                           k, on_start=on_start and started, progress=progress,
                           warn=warn_once)  # fmt: skip
            design.ran(part, time.perf_counter() - t0, float(meta.get("tsc_hz") or 0.0))
        if not design.next_round():
            break
    assert design.frame is not None
    kept = {k: v for k, v in results.metadata(design.frame).items() if k != "precision_so_far"}
    final = results.attach(design.frame, {**kept, "precision": design.record()})
    if recording.output is not None:
        results.save(final, recording.output)
    return final


def _layout_cost(costs: Sequence[float], pairs: int, iterations: int) -> float:
    """Seconds one more layout takes, from the costs measured (a layout, a pair beyond its
    iterations, an iteration of both sides): its pairs at that many iterations a run."""
    return costs[0] + pairs * (costs[1] + iterations * costs[2])


def _next_round(run: int, layouts: int) -> int:
    """Layouts the next round adds to those run: what the plan still asks for, at least a
    quarter more (fewer barely move the estimate), at most as many again (a pilot's variance
    is itself uncertain)."""
    return min(max(layouts - run, run // 4, 1), max(run, PILOT[0]))


def predicted_time(spent: float, layouts: int, run: int, cost: float) -> list[float]:
    """The time a plan of `layouts` says the comparison takes, then its range at
    PREDICTION_CONFIDENCE: the layouts it needs scale with their variance, estimated from the
    `run` so far; and as the runs so far did not reach, the round about to run is part of any
    outcome, even where the plan reads them as enough."""
    spread = repetitions.variance_ratio_range(run - 1, PREDICTION_CONFIDENCE)
    return [spent + max(layouts * f - run, _next_round(run, layouts)) * cost
            for f in (1.0, *spread)]  # fmt: skip


def _one_count_looped(ok: pd.DataFrame) -> bool:
    """Whether the runs so far ran the repeat loop, all at one count of iterations: the pilot's
    second round then runs one a run."""
    if "iterations" not in ok:
        return False
    counts = set(ok["iterations"])
    return len(counts) == 1 and min(counts) >= 2


def _earlier(frame: pd.DataFrame | None) -> dict[str, Any]:
    """The rounds, time and prediction of the sessions a resume goes on from: the finished
    record of a complete file, or the one each round of an interrupted one left (the round
    cut short is the resume's first)."""
    if frame is None:
        return {}
    meta = results.metadata(frame)
    return dict(meta.get("precision") or meta.get("precision_so_far") or {})


def _costs_before(frame: pd.DataFrame | None) -> list[float]:
    """What a layout, a pair and an iteration of both sides cost in the run a resume goes on
    from: as it measured them, or (interrupted before it could) from its runs' wall time."""
    if frame is None:
        return [0.0, math.nan, math.nan]
    said = results.metadata(frame).get("precision", {}).get("costs_s")
    if said:
        return [float(said["layout"]), float(said["pair"]), float(said.get("iteration", 1e-9))]
    k = float(frame["iterations"].median()) if "iterations" in frame else 1.0
    hz = float(results.metadata(frame).get("tsc_hz") or 0.0)
    looping = iteration_seconds(frame, hz) / max(len(frame) / 2, 1)
    pair = 2e-9 * float(frame["wall_ns"].median())
    return [0.0, max(pair - looping, 1e-9), max(looping / k, 1e-9)]


def most_iterations(plan: ComparePlan, costs: Sequence[float]) -> int:
    """The most iterations a run may be planned: what a run reports, and for real-time runs
    what keeps one inside RT_SHARE of the kernel's real-time runtime. Past it the kernel
    pauses the run for the rest of its period: brotli's encoder planned at 64 iterations of
    45 ms ran 2.9 s a run and was throttled inside every run."""
    bandwidth = settings.rt_bandwidth() if plan.rt else None
    if bandwidth is None or not all(math.isfinite(c) for c in costs[1:]):
        return constants.MAX_ITERATIONS
    start, each = costs[1] / 2, max(costs[2] / 2, 1e-9)  # one side's: a pair is two runs
    fits = int((RT_SHARE * bandwidth[0] / 1e9 - start) // each)
    return min(max(fits, 1), constants.MAX_ITERATIONS)


def _known(cost: float) -> float:
    """An iteration's cost a round could not time (no loop's columns): what was known, or 0."""
    return cost if math.isfinite(cost) else 0.0


def iteration_seconds(rows: pd.DataFrame, hz: float) -> float:
    """The time these runs spent in their repeat loops' iterations (0 without the loop's
    columns: the region is then the pair's own cost), from the probe's ticks and the TSC's
    rate (hz). A round planned at one iteration a run still times that one: left out, it
    read iterations as free, and the next plan asked for 64 of them."""
    if "iterations" not in rows or rows.empty:
        return 0.0
    spent = (rows["ticks"] * rows["iterations"]).where(rows["iterations"] >= 1).sum()
    return float(spent) / hz if hz > 0 else 0.0


def _round_iterations(frame: pd.DataFrame, plan: ComparePlan) -> int:
    """The iterations a run of the round a resume goes on from was asked for."""
    return int(results.metadata(frame).get("round_iterations") or plan.iterations)


def _same_plan(recorded: dict, asked: dict, output: object) -> None:
    """A resume goes on with the comparison the file holds, or refuses in one line: a round
    that never runs would not meet the journal's own check."""
    asked = json.loads(json.dumps(asked, default=str))  # as the file holds it: lists, not tuples
    changed = sorted(k for k in set(recorded) | set(asked) if recorded.get(k) != asked.get(k))
    if changed:
        raise PerflabError(
            f"{output} holds another comparison ({', '.join(changed)} differ); resume it with "
            "its own parameters, or write a new file"
        )


def _resumed(recording: Recording) -> pd.DataFrame | None:
    """The rows of the interrupted --precision comparison a resume goes on from (None: new)."""
    if recording.resume and recording.output is not None and os.path.exists(recording.output):
        return results.load(recording.output)
    return None


def _unfinished(frame: pd.DataFrame) -> dict[int, int]:
    """The layouts of the round a resume goes on from that have fewer runs than it planned (a
    pair is two), with the pairs it planned: a layout cut short is completed, not left short."""
    planned = results.metadata(frame).get("round_pairs") or {}
    have = frame.groupby("setup").size() if not frame.empty else pd.Series(dtype=int)
    return {int(s): int(n) for s, n in planned.items() if have.get(int(s), 0) < 2 * int(n)}


def _reps(frame: pd.DataFrame | None) -> dict[int, int]:
    """Pairs recorded per setup so far."""
    if frame is None or frame.empty:
        return {}
    return {int(s): int(r) + 1 for s, r in frame.groupby("setup")["rep"].max().items()}


def _joined(before: pd.DataFrame, part: pd.DataFrame) -> pd.DataFrame:
    """The rounds so far in memory, the newest round's metadata kept."""
    return results.attach(pd.concat([before, part], ignore_index=True), results.metadata(part))
