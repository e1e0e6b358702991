"""The repetitions each level of a nested benchmark design needs for a wanted precision at the
least cost (Kalibera and Jones, "Rigorous Benchmarking in Reasonable Time", ISMM 2013: their
closed form, rounded to the best integers), the half-width and time a design predicts, and the
runs per side that would resolve a change. scipy.stats is imported where used, so that perflab
starts without it."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from statistics import NormalDist
from typing import Literal

import numpy as np

from perflab.analysis.levels import Components, median_factor
from perflab.errors import PerflabError

# A level estimated at no variance is planned as this share of the total: an estimate of zero
# means small, not absent, and the closed form would put infinitely many repetitions below it.
PLAN_FLOOR = 1e-4


def variance_ratio_range(df: int, confidence: float) -> tuple[float, float]:
    """The range of true/estimated for a variance estimated with df degrees of freedom, at
    `confidence` (equal tails): df/chi2 at its upper and lower quantiles. A plan's remaining
    work scales with the variance it was made from, so its time carries this range."""
    if df < 1 or not 0 < confidence < 1:
        raise PerflabError(
            f"no variance range at confidence {confidence} with {df} degrees of freedom"
        )
    from scipy import stats

    tail = (1 - confidence) / 2
    high, low = stats.chi2.ppf([1 - tail, tail], df)
    return df / float(high), df / float(low)


@dataclass(frozen=True)
class LevelCounts:
    """A design's counts per level (outermost first: units of the outermost level, then per
    unit above), the half-width of its B/A interval on the ratio scale and its time."""

    counts: tuple[int, ...]
    half_width: float  # 0.01: the interval reaches 1 % above the estimate
    time: float  # in the unit of the costs


@dataclass(frozen=True)
class RepetitionChoice:
    """The repetitions per level of the least-time design to reach a half-width, and a fixed
    design to weigh it against (not an experiment's plan, which holds a verb's parameters)."""

    levels: tuple[str, ...]
    target: float  # the half-width asked for
    confidence: float
    planned: LevelCounts
    fixed: LevelCounts
    optimum: tuple[float, ...]  # the closed form's counts below the outermost, before rounding

    @property
    def counts(self) -> tuple[int, ...]:
        """The planned counts per level."""
        return self.planned.counts

    @property
    def half_width(self) -> float:
        """The planned design's predicted half-width."""
        return self.planned.half_width

    @property
    def time(self) -> float:
        """The planned design's predicted time."""
        return self.planned.time


def _costs(components: Components, costs: Sequence[float] | np.ndarray) -> np.ndarray:
    c = np.asarray(costs, dtype=float)
    if c.shape != (len(components.levels),) or not np.isfinite(c).all() or (c < 0).any():
        raise PerflabError(
            f"costs: one per level ({', '.join(components.levels)}), none negative, "
            f"not {tuple(costs)}"
        )
    if (c[1:] <= 0).any():
        raise PerflabError(
            "costs: every level below the outermost costs time, or its repetitions are free "
            "and the plan would ask for infinitely many"
        )
    return c


def predict(
    components: Components,
    costs: Sequence[float] | np.ndarray,
    counts: Sequence[int],
    confidence: float = 0.95,
) -> LevelCounts:
    """The half-width and time of a design: the t interval over the outermost units (each unit's
    mean varies by components.variance of one unit), and sum_i costs[i] * prod(counts[:i+1])."""
    c = _costs(components, costs)
    components.check(counts)
    if counts[0] < 2:
        raise PerflabError("a design needs two outermost units for an interval")
    from scipy import stats

    counts = tuple(int(n) for n in counts)
    spread = math.sqrt(components.variance((1, *counts[1:])) / counts[0])
    q = float(stats.t.ppf(1 - (1 - confidence) / 2, components.freedom(counts[0])))
    time = float(sum(ci * math.prod(counts[: i + 1]) for i, ci in enumerate(c)))
    return LevelCounts(counts, math.expm1(q * spread), time)


def _blocks(var: np.ndarray, c: np.ndarray) -> list[tuple[float, float, int]]:
    """Adjacent levels pooled (cost and variance summed) wherever the closed form would give
    the inner one fewer than one repetition: sqrt(T_i^2 / c_i) must rise inwards, as the
    counts' products do. Each block: its cost, its variance and how many levels it pools."""
    blocks: list[tuple[float, float, int]] = []
    for ci, vi in zip(c, var, strict=True):
        blocks.append((float(ci), float(vi), 1))
        while len(blocks) > 1 and blocks[-2][1] * blocks[-1][0] > blocks[-1][1] * blocks[-2][0]:
            (c1, v1, n1), (c2, v2, n2) = blocks.pop(-2), blocks.pop()
            blocks.append((c1 + c2, v1 + v2, n1 + n2))
    return blocks


def _closed_form(var: np.ndarray, c: np.ndarray) -> tuple[float, ...]:
    """Kalibera and Jones's counts below the outermost level, r_i = sqrt(c_{i-1}/c_i *
    T_i^2/T_{i-1}^2) (levels outermost first), none below one: the products of the counts go
    as sqrt(T_i^2 / c_i), levels that would get fewer than one pooled first."""
    if c[0] == 0:
        return (1.0,) * (var.size - 1)
    scale = []
    for cost, v, n in _blocks(var, c):
        scale += [math.sqrt(v / cost)] * n
    return tuple(max(1.0, scale[i] / scale[i - 1]) for i in range(1, var.size))


def _lower_counts(var: np.ndarray, c: np.ndarray) -> tuple[int, ...]:
    """The integer counts below the outermost level minimising cost x variance of one outermost
    unit, the objective the closed form minimises over the reals. At the integer optimum each
    count is the floor or the ceiling of its own closed form given the others; candidates are
    built outside-in (each level's closed form given the counts above) and inside-out (given
    the counts below), each then moved a count at a time while that helps, and the best kept."""

    def objective(counts: Sequence[int]) -> float:
        q = np.cumprod([1, *counts])
        return float(np.sum(c * q) * np.sum(var / q))

    def given(counts: list[int], j: int) -> float:
        """Level j's real optimum given every other count: f = (A + B r)(C + D / r)."""
        q = np.cumprod([1, *counts])
        q_rest = q / np.where(np.arange(var.size) >= j + 1, counts[j], 1)
        above, below = slice(0, j + 1), slice(j + 1, None)
        a, b = np.sum(c[above] * q_rest[above]), np.sum(c[below] * q_rest[below])
        v_above, v_below = np.sum(var[above] / q_rest[above]), np.sum(var[below] / q_rest[below])
        return math.sqrt(a * v_below / (b * v_above)) if a > 0 else 0.0

    def rounded(x: float) -> set[int]:
        return {max(1, math.floor(x)), max(1, math.ceil(x))}

    def outside_in(fixed: tuple[int, ...]) -> list[tuple[int, ...]]:
        i = len(fixed) + 1
        if i == var.size:
            return [fixed]
        q = np.cumprod([1, *fixed])
        upper = (float(np.sum(c[:i] * q)), float(np.sum(var[:i] / q)))
        cost, v, _ = _blocks(var[i:], c[i:])[0]
        want = math.sqrt(v / cost * upper[0] / upper[1]) / q[-1]
        return [leaf for r in sorted(rounded(want)) for leaf in outside_in((*fixed, r))]

    def inside_out(fixed: tuple[int, ...]) -> list[tuple[int, ...]]:
        k = var.size - 1 - len(fixed)  # the innermost level not yet fixed
        if k == 0:
            return [fixed]
        inner_c = c[k] + sum(c[k + 1 + i] * math.prod(fixed[: i + 1]) for i in range(len(fixed)))
        inner_v = var[k] + sum(
            var[k + 1 + i] / math.prod(fixed[: i + 1]) for i in range(len(fixed))
        )
        cc, vv = np.append(c[:k], inner_c), np.append(var[:k], inner_v)
        want = _closed_form(vv, cc)[-1]
        return [leaf for r in sorted(rounded(want)) for leaf in inside_out((r, *fixed))]

    def polished(counts: tuple[int, ...]) -> tuple[int, ...]:
        best, now = list(counts), objective(counts)
        moved = True
        while moved:
            moved = False
            for j in range(len(best)):
                for r in rounded(given(best, j)):
                    trial = [*best[:j], r, *best[j + 1 :]]
                    if (f := objective(trial)) < now * (1 - 1e-12):
                        best, now, moved = trial, f, True
        return tuple(best)

    found = {polished(x) for x in [*outside_in(()), *inside_out(())]}
    return min(sorted(found), key=objective)


def _median_count(components: Components, c: np.ndarray, least: int) -> tuple[int, ...]:
    """The rows per outermost unit (least or more) minimising cost x variance of a unit's
    median, searched: median_factor is not 1/n, so the closed form only bounds the search."""
    top, rows = components.variances
    guess = math.sqrt(c[0] / c[1] * rows * math.pi / 2 / top)
    n = np.arange(least, int(min(max(4 * guess, 20), 1e6)) + least)
    factors = np.array([median_factor(int(k)) for k in n])
    return (int(n[np.argmin((c[0] + c[1] * n) * (top + rows * factors))]),)


def _inner_counts(
    components: Components, c: np.ndarray, least: Sequence[int], most: int | None
) -> tuple[tuple[int, int], float]:
    """Pairs and iterations a layout (each its least or more, iterations at most `most`)
    minimising cost x variance of a layout's median of its pairs, each run's value its
    iterations' median: for every count of iterations, the pairs searched at that run's cost
    and variance, the best kept. With Kalibera and Jones's real count of iterations for means,
    scaled by the median's pi/2, r = sqrt(c_run / c_it * pi/2 v_it / v_run), which the search
    reaches beyond (most None: 4r + 20)."""
    var = np.asarray(components.variances, dtype=float)
    real = math.sqrt(c[1] / c[2] * math.pi / 2 * var[2] / var[1])
    most = most or int(min(4 * real + 20, 1e4))
    best: tuple[float, tuple[int, int]] | None = None
    for k in range(least[2], max(most, least[2]) + 1):
        row_v = (var[0], components.row(k))  # a run: its k iterations' median
        row_c = np.array([c[0], c[1] + k * c[2]])
        rows = replace(components, levels=components.levels[:2], variances=row_v)
        (n,) = _median_count(rows, row_c, least[1])
        f = float((row_c[0] + n * row_c[1]) * (row_v[0] + row_v[1] * median_factor(n)))
        if best is None or f < best[0]:
            best = (f, (n, k))
    assert best is not None  # the range holds least[2] at the least
    return best[1], real


def plan(
    components: Components,
    costs: Sequence[float] | np.ndarray,
    half_width: float,
    confidence: float = 0.95,
    fixed: Sequence[int] | None = None,
    least: Sequence[int] | None = None,
    most_inner: int | None = None,
) -> RepetitionChoice:
    """The counts per level reaching a B/A interval of this half-width (ratio scale: 0.01 for
    1 %) in the least expected time, with costs[i] the time one repetition of level i adds
    beyond its lower levels (for B/A: of both sides; the outermost may cost nothing). Below the
    outermost level the counts are Kalibera and Jones's closed form, rounded to the best
    integers; the outermost count is the smallest (two or more) whose t interval reaches the
    half-width. `least` holds each level's lowest count, which a design that runs must meet
    (the outermost then found for the counts below as raised). `fixed` (default 10 per level)
    is predicted beside it, for the time saved; `most_inner` caps the innermost count (the
    iterations a run can report)."""
    if not half_width > 0:
        raise PerflabError(f"the half-width to reach must be above 0, not {half_width}")
    if not 0 < confidence < 1:
        raise PerflabError(f"confidence must be between 0 and 1, not {confidence}")
    c = _costs(components, costs)
    var = np.asarray(components.variances, dtype=float)
    if components.total <= 0:
        raise PerflabError(f"no variance at any level of {components.of}: nothing to plan")
    var = np.maximum(var, PLAN_FLOOR * components.total)
    floor = PLAN_FLOOR * components.total
    measured = tuple((k, max(v, floor)) for k, v in components.measured)
    floored = replace(components, variances=tuple(var), measured=measured)
    least = tuple(least) if least is not None else (2,) + (1,) * (len(components.levels) - 1)
    lower: tuple[int, ...]
    if floored.statistic == "median" and var.size == 3:
        lower, real = _inner_counts(floored, c, least, most_inner)
        row_v = np.array([var[0], var[1] + var[2] * median_factor(lower[1])])
        row_c = np.array([c[0], c[1] + lower[1] * c[2]])
        continuous = (*_closed_form(row_v * [1, math.pi / 2], row_c), real)
    elif floored.statistic == "median":
        lower = _median_count(floored, c, least[1])
        continuous = _closed_form(var * [1, math.pi / 2], c)
    else:
        lower, continuous = _lower_counts(var, c), _closed_form(var, c)
        lower = tuple(max(n, m) for n, m in zip(lower, least[1:], strict=True))
    per_unit = floored.variance((1, *lower))
    h = math.log1p(half_width)
    p = 1 - (1 - confidence) / 2
    top = max(2, least[0], math.ceil(NormalDist().inv_cdf(p) ** 2 * per_unit / h**2))
    from scipy import stats

    while stats.t.ppf(p, floored.freedom(top)) * math.sqrt(per_unit / top) > h:
        top += 1
    fixed = tuple(fixed) if fixed is not None else (10,) * len(components.levels)
    return RepetitionChoice(
        components.levels,
        half_width,
        confidence,
        predict(floored, c, (top, *lower), confidence),
        predict(floored, c, fixed, confidence),
        continuous,
    )


def runs_for_spreads(
    spreads: np.ndarray,
    change: float,
    confidence: float,
    power: float,
    statistic: Literal["mean", "median"] = "mean",
) -> np.ndarray:
    """Runs per side, at least 2, for an interval of B/A at `confidence` to exclude 1 with
    probability `power` when B is `change` slower (0.02: 2 %), for each spread s of log values
    (a sweep's points): the normal approximation n = 2 (z_{(1+confidence)/2} + z_power)^2 s^2 /
    log(1+change)^2; for medians the variance is pi/2 that of a mean (the median's efficiency
    at the normal)."""
    if not change > 0 or not 0 < confidence < 1 or not 0 < power < 1:
        raise PerflabError(
            f"runs needed: a change above 0 ({change}), confidence ({confidence}) and power "
            f"({power}) between 0 and 1"
        )
    normal = NormalDist()
    z = normal.inv_cdf(1 - (1 - confidence) / 2) + normal.inv_cdf(power)
    factor = math.pi / 2 if statistic == "median" else 1.0
    n = 2 * z**2 * factor * np.asarray(spreads, dtype=float) ** 2 / math.log1p(change) ** 2
    return np.maximum(2, np.ceil(n - 1e-9)).astype(np.int64)
