"""Warm-up and steady state of a process's in-process iterations, classified as softdevteam's
warmup_stats classifies them (Barrett et al., "Virtual machine warmup blows hot and cold",
OOPSLA 2017): outliers marked over a rolling window (warmup/outliers.py), change points found
by PELT on mean and variance with a penalty of 15 log n (bin/mark_changepoints_in_json, which
calls R's changepoint cpt.meanvar), and the segments compared with the last one: flat, warm-up,
slowdown or no steady state, and across executions consistent, good or bad inconsistent
(warmup/summary_statistics.py). Where perflab departs from it, and why, is said where it does.

The change points are R's cpt.meanvar's (PELT, penalty 15 log n, segments of two or more):
the segmentation least in twice the negative normal log-likelihood of each segment, n (log 2 pi
+ log s^2 + 1) with s^2 its maximum-likelihood variance, plus the penalty per change point.
ruptures' CostNormal is n log s^2 on that same scale (its missing n (log 2 pi + 1) sums to the
same over any split of a series, so 15 log n means the same to both), with 1e-6 added to every
s^2 where R floors a zero one at 1e-11, both in the data's unit squared, and ruptures' Pelt
needs jump=1 to try every iteration as R does. ruptures is pure Python and copies a partition
per candidate: one flat series of 1,000 iterations took it 10 to 17 s here, R's C loop 2 million
logarithms for 2,000; perflab's core (csrc/pelt.c) finds the same optimum with bounds that skip
most candidates (benchmarks/warmup_classify.py), and tests hold it to ruptures. It differs from
R's PELT where R's pruning drops the optimum (4 of 3,000 short series with large outliers), and
keeps the best segmentation there. Each series is standardized first (centred, divided by its
standard deviation), which moves no change point, and its variance floor is 1e-11 of that
variance, or a timer's quantization (resolution^2 / 12) if larger: a floor with no unit.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike

from perflab.analysis.stats import median_order_interval
from perflab.core.bindings.pelt import pelt_meanvar
from perflab.core.lazy import pd
from perflab.errors import PerflabError

Classification = Literal["flat", "warm-up", "slowdown", "no steady state"]
Consistency = Literal[
    "flat", "warm-up", "slowdown", "no steady state", "good inconsistent", "bad inconsistent"
]

WINDOW_SHARE = 0.1  # the outliers' rolling window: bin/warmup_stats' DEFAULT_WINDOW_RATIO
FENCE = 3.0  # an outlier lies beyond the window's median +- 3 (p90 - p10): warmup/outliers.py
STEADY_SHARE = 0.25  # a steady state begins before the last quarter: DEFAULT_STEADY_RATIO
PENALTY = 15.0  # per change point, times log n: mark_changepoints_in_json's pen_value
MIN_SEGMENT = 2  # cpt.meanvar's minseglen: a variance needs two iterations
# warmup_stats' default delta is 0.001 s, absolute; perflab's series come in any unit, so its
# delta takes warmup_stats' other form, a share of the fastest segment's mean ("1%")
DELTA = 0.01
FLOOR = 1e-11  # cost_general_functions.c's floor under a segment's variance
# the rolling window (a tenth) must hold two iterations and the steady stretch (a quarter) five
MIN_ITERATIONS = 20


@dataclass(frozen=True)
class Segment:
    """Iterations between two change points: [start, stop), outliers inside them included,
    the mean and standard deviation of the rest."""

    start: int
    stop: int
    mean: float
    sd: float  # R's var() under a square root: n - 1 in the denominator
    kept: int  # iterations that are not outliers


@dataclass(frozen=True)
class Execution:
    """One process execution's series, classified: its outliers, segments, and the steady
    state's start (0-based, so also the iterations before it) and median with its interval."""

    classification: Classification
    iterations: int
    outliers: tuple[int, ...]
    segments: tuple[Segment, ...]
    steady_start: int | None  # None: no steady state
    steady: tuple[float, float, float] | None  # median, lo, hi of the steady iterations
    time_to_steady: float | None  # the iterations before the steady state, summed
    times: np.ndarray = field(repr=False, compare=False)

    @property
    def changepoints(self) -> tuple[int, ...]:
        """The first iteration of each segment after the first (warmup_stats keeps the last
        iteration of each segment before the last: one less)."""
        return tuple(s.start for s in self.segments[1:])


@dataclass(frozen=True)
class Executions:
    """Several executions of one benchmark: their classes, consistent or not, and the steady
    state's start and value over executions (medians with order-statistic intervals: the
    executions are the independent units, the iterations of one are not)."""

    classification: Consistency
    executions: tuple[Execution, ...]
    steady_start: tuple[float, float, float] | None  # None if an execution has none
    steady: tuple[float, float, float] | None

    @property
    def counts(self) -> dict[str, int]:
        """Executions per class, every class named."""
        got: list[str] = [e.classification for e in self.executions]
        return {c: got.count(c) for c in ("flat", "warm-up", "slowdown", "no steady state")}

    def frame(self) -> pd.DataFrame:
        """One row per execution."""
        rows = []
        for i, e in enumerate(self.executions):
            med, lo, hi = e.steady or (math.nan,) * 3
            rows.append(
                {
                    "execution": i,
                    "classification": e.classification,
                    "iterations": e.iterations,
                    "outliers": len(e.outliers),
                    "changepoints": len(e.changepoints),
                    "steady_start": e.steady_start,
                    "time_to_steady": e.time_to_steady,
                    "steady": med,
                    "steady_lo": lo,
                    "steady_hi": hi,
                }
            )
        df = pd.DataFrame(rows)
        df["steady_start"] = df["steady_start"].astype("Int64")
        return df

    def segments_frame(self) -> pd.DataFrame:
        """One row per segment of each execution, the steady ones marked."""
        rows = []
        for i, e in enumerate(self.executions):
            for j, s in enumerate(e.segments):
                steady = e.steady_start is not None and s.start >= e.steady_start
                rows.append({"execution": i, "segment": j, **vars(s), "steady": steady})
        return pd.DataFrame(rows)


def _checked(times: ArrayLike) -> np.ndarray:
    """The series as floats, refused in one line if it cannot be classified."""
    x = np.asarray(times, dtype=float)
    if x.ndim != 1:
        raise PerflabError(f"a series of iteration times is one-dimensional, not {x.shape}")
    if x.size < MIN_ITERATIONS:
        raise PerflabError(
            f"classifying warm-up needs {MIN_ITERATIONS} iterations or more, not {x.size}"
        )
    bad = np.flatnonzero(~np.isfinite(x) | (x < 0))
    if bad.size:
        raise PerflabError(
            f"iteration {bad[0]} took {x[bad[0]]}: times are finite and not negative"
        )
    return x


def _percentile(rows: np.ndarray, length: int, pc: float) -> np.ndarray:
    """warmup/outliers.py's percentile of each sorted row of `length` values, its arithmetic."""
    index = (length - 1) * (pc / 100.0)
    f, c = math.floor(index), math.ceil(index)
    return rows[:, f] if f == c else rows[:, f] * (c - index) + rows[:, c] * (index - f)


def _median(rows: np.ndarray, length: int) -> np.ndarray:
    """warmup/outliers.py's median of each sorted row of `length` values."""
    k = (length - 1) // 2
    return rows[:, k] if length % 2 == 1 else (rows[:, k] + rows[:, k + 1]) / 2.0


def _sorted_windows(x: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """x[a:b] for each pair, sorted, one row each, padded with +inf."""
    idx = a[:, None] + np.arange(int((b - a).max()))
    rows = np.where(idx < b[:, None], x[np.minimum(idx, x.size - 1)], np.inf)
    rows.sort(axis=1)
    return rows


def outliers(times: ArrayLike, window: int | None = None) -> np.ndarray:
    """The iterations beyond their window's median +- 3 (p90 - p10), as warmup_stats marks
    them: the window is [i - w//2, i + w//2) clipped to the series, w a tenth of it, and the
    first iterations, whose window the start would clip, are never outliers. (warmup_stats
    calls these Tukey's fences; Tukey's own are the quartiles +- 1.5 or 3 IQR.)

    Exact, and fast: each block of neighbouring windows lies between their union and their
    intersection, whose sorted values bound every order statistic of every window in it; only
    an iteration those bounds leave near its fence has its own window sorted."""
    x = _checked(times)
    n = x.size
    w = int(n * WINDOW_SHARE) if window is None else window
    if w < 2:
        raise PerflabError(f"an outliers' window holds two iterations or more, not {w}")
    half = w // 2  # Python 2's w / 2 in warmup/outliers.py
    i = np.arange(n)
    lo, hi = np.maximum(i - half, 0), np.minimum(i + half, n)
    judged = np.flatnonzero((lo > 0) | (hi >= w))
    if judged.size == 0:
        return judged
    length = hi[judged] - lo[judged]
    block = max(1, half // 4)
    starts = np.arange(0, judged.size, block)
    first, last = judged[starts], judged[np.minimum(starts + block, judged.size) - 1]
    union = _sorted_windows(x, lo[first], hi[last])
    inner = _sorted_windows(x, lo[last], hi[first])
    n_union, n_inner = hi[last] - lo[first], hi[first] - lo[last]
    shortest, longest = length[starts + (last - first)], length[starts]
    blocks = np.arange(starts.size)

    def low(j: np.ndarray) -> np.ndarray:
        """A bound under every window's j-th smallest in the block: the union's j-th, and the
        intersection's, less the values a window may hold beyond it."""
        k = j - (longest - n_inner)
        under = inner[blocks, np.clip(k, 0, inner.shape[1] - 1)]
        return np.maximum(union[blocks, j], np.where(k >= 0, under, -np.inf))

    def high(j: np.ndarray) -> np.ndarray:
        """A bound over every window's j-th smallest: the intersection's j-th, and the
        union's, plus the values a window may lack of it."""
        top = np.where(j < n_inner, inner[blocks, np.minimum(j, inner.shape[1] - 1)], np.inf)
        k = np.minimum(j + n_union - shortest, n_union - 1)
        return np.minimum(top, union[blocks, k])

    def ranks(pc: float) -> tuple[np.ndarray, np.ndarray]:
        """The lowest and highest order statistic a percentile of a block's windows mixes."""
        lo_, hi_ = (shortest - 1) * (pc / 100.0), (longest - 1) * (pc / 100.0)
        return np.floor(lo_).astype(np.int64), np.ceil(hi_).astype(np.int64)

    med = low((shortest - 1) // 2), high(longest // 2)
    p10, p90 = ranks(10.0), ranks(90.0)
    band_lo = FENCE * (low(p90[0]) - high(p10[1]))
    band_hi = FENCE * (high(p90[1]) - low(p10[0]))
    # a margin for the rounding of warmup_stats' arithmetic, which mixes two order statistics
    slack = 1e-9 * (np.abs(med[0]) + np.abs(med[1]) + np.abs(band_hi))
    at = np.arange(judged.size) // block
    xs = x[judged]
    beyond = (xs > (med[1] + band_hi + slack)[at]) | (xs < (med[0] - band_hi - slack)[at])
    within = (xs <= (med[0] + band_lo - slack)[at]) & (xs >= (med[1] - band_lo + slack)[at])
    found = [judged[beyond]]
    unsure = ~beyond & ~within
    for size in np.unique(length[unsure]):
        i_ = judged[unsure & (length == size)]
        rows = np.sort(x[lo[i_][:, None] + np.arange(size)], axis=1)
        centre = _median(rows, int(size))
        band = FENCE * (_percentile(rows, int(size), 90.0) - _percentile(rows, int(size), 10.0))
        found.append(i_[(x[i_] > centre + band) | (x[i_] < centre - band)])
    return np.sort(np.concatenate(found))


def decide(segments: Sequence[Segment], iterations: int, delta: float = DELTA) -> Classification:
    """mark_changepoints_in_json's get_classification(): a segment is equivalent to the last
    when their intervals overlap, the last's widened to its mean +- delta of the fastest
    segment's mean; walking back from the last, one not equivalent that ends in the last
    quarter leaves no steady state, one faster than the last is a slowdown, and one slower a
    warm-up unless an earlier one is faster. A segment's interval is its mean +- its standard
    deviation where warmup_stats adds its variance, a time squared: in seconds 1 ms of noise
    adds 1e-6 s, in nanoseconds 1e12 ns, so its rule changes with the unit."""
    lower, upper = _bounds(segments, delta)
    steady = int(iterations * STEADY_SHARE)
    found: Classification = "flat"
    for s in segments[-2::-1]:
        if s.mean + s.sd >= lower and s.mean - s.sd <= upper:
            continue
        if s.stop - 1 > iterations - steady:  # warmup_stats' end: the segment's last iteration
            return "no steady state"
        if s.mean - s.sd < lower:
            return "slowdown"
        found = "warm-up"
    return found


def _bounds(segments: Sequence[Segment], delta: float) -> tuple[float, float]:
    """The last segment's interval, widened to its mean +- delta of the fastest mean."""
    d = delta * min(s.mean for s in segments)
    last = segments[-1]
    return min(last.mean - last.sd, last.mean - d), max(last.mean + last.sd, last.mean + d)


def steady_start(segments: Sequence[Segment], delta: float = DELTA) -> int:
    """The first iteration of the steady state: of the earliest segment from which every one
    is equivalent to the last (summary_statistics.py's walk back). warmup_stats reports one
    more for a flat execution (1, the first iteration counted from 1) and the same for the
    others (the last iteration before the steady state counted from 1); perflab counts from
    0 for all, so the start is also the iterations before it."""
    lower, upper = _bounds(segments, delta)
    first = len(segments) - 1
    while first and (
        segments[first - 1].mean + segments[first - 1].sd >= lower
        and segments[first - 1].mean - segments[first - 1].sd <= upper
    ):
        first -= 1
    return segments[first].start


def _segments(x: np.ndarray, kept: np.ndarray, ends: list[int]) -> tuple[Segment, ...]:
    """Segments in the series' own iterations from ends among its kept ones: an outlier
    between two segments belongs to the later, as in warmup_stats."""
    out, a, start = [], 0, 0
    for i, b in enumerate(ends):
        v = x[kept[a:b]]
        stop = x.size if i == len(ends) - 1 else int(kept[b - 1]) + 1
        out.append(Segment(start, stop, float(v.mean()), float(v.std(ddof=1)), b - a))
        a, start = b, stop
    return tuple(out)


def classify_executions(
    series: Sequence[ArrayLike],
    *,
    delta: float = DELTA,
    resolution: float = 0.0,
    confidence: float = 0.95,
) -> Executions:
    """Each execution's series of iteration times classified, and the executions together:
    consistent when all share a class, good inconsistent when flat and warm-up mix, bad
    otherwise (summary_statistics.py). `resolution` is the timer's step in the series' unit,
    under which a variance is quantization."""
    if not delta >= 0 or not resolution >= 0:
        raise PerflabError(f"delta and resolution are 0 or more, not {delta} and {resolution}")
    xs = [_checked(s) for s in series]
    if not xs:
        raise PerflabError("no executions to classify")
    executions = []
    for x in xs:
        keep = np.ones(x.size, dtype=bool)
        keep[outliers(x)] = False
        kept = np.flatnonzero(keep)
        v = x[kept]
        sd = float(v.std())
        floor = max(FLOOR, (resolution / sd) ** 2 / 12) if sd > 0 else FLOOR
        y = (v - v.mean()) / sd if sd > 0 else np.zeros(v.size)
        ends = pelt_meanvar(y, PENALTY * math.log(v.size), floor, MIN_SEGMENT)
        segs = _segments(x, kept, ends)
        cls = decide(segs, x.size, delta)
        start = None if cls == "no steady state" else steady_start(segs, delta)
        steady = None
        if start is not None:
            steady = median_order_interval(x[kept[kept >= start]], confidence)
        executions.append(
            Execution(
                cls,
                x.size,
                tuple(int(i) for i in np.flatnonzero(~keep)),
                segs,
                start,
                steady,
                None if start is None else float(x[:start].sum()),
                x,
            )
        )
    return _together(tuple(executions), confidence)


def _together(executions: tuple[Execution, ...], confidence: float) -> Executions:
    """The executions' consistency, and their steady state's start and value over them."""
    classes = {e.classification for e in executions}
    together: Consistency
    if len(classes) == 1:
        together = executions[0].classification
    elif classes == {"flat", "warm-up"}:
        together = "good inconsistent"
    else:
        together = "bad inconsistent"
    starts = [e.steady_start for e in executions if e.steady_start is not None]
    values = [e.steady[0] for e in executions if e.steady is not None]
    if len(starts) < len(executions):
        return Executions(together, executions, None, None)
    return Executions(
        together,
        executions,
        median_order_interval(starts, confidence),
        median_order_interval(values, confidence),
    )


def classify(
    times: ArrayLike, *, delta: float = DELTA, resolution: float = 0.0, confidence: float = 0.95
) -> Execution:
    """One execution's series of iteration times classified, as classify_executions does."""
    return classify_executions(
        [times], delta=delta, resolution=resolution, confidence=confidence
    ).executions[0]
