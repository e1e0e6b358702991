"""Variance by level of a nested benchmark design (layouts, pairs, iterations), the
repetitions each level needs for a wanted precision at the least cost, and the intervals and
tests over layouts: Kalibera and Jones, "Rigorous Benchmarking in Reasonable Time" (ISMM 2013),
as a random-effects model of log(value). Distributions come from scipy.stats, imported where
used so that perflab starts without it."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from statistics import NormalDist
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike

from perflab.core.lazy import pd
from perflab.errors import PerflabError

# A level estimated at no variance is planned as this share of the total: an estimate of zero
# means small, not absent, and the closed form would put infinitely many repetitions below it.
PLAN_FLOOR = 1e-4


# Var(median of n) / Var(one value) for normal values, n = 1..20: 1 and 1/2 exactly, the odd
# ones as tabulated from normal order statistics, the even ones (the mean of the middle two)
# simulated, 4e6 medians each; beyond, pi/(2n+1), within 4 % and approaching pi/(2n).
_MEDIAN_FACTOR = (1.0, 0.5, 0.4487, 0.2981, 0.2868, 0.2148, 0.2104, 0.1683, 0.1661, 0.1382,
                  0.1371, 0.1177, 0.1167, 0.1022, 0.1017, 0.0905, 0.0901, 0.0809, 0.0809,
                  0.0734)  # fmt: skip


def median_factor(n: int) -> float:
    """How much less the median of n normal values varies than one value."""
    return _MEDIAN_FACTOR[n - 1] if n <= len(_MEDIAN_FACTOR) else math.pi / (2 * n + 1)


@dataclass(frozen=True)
class Components:
    """What each level adds to the variance of one measurement of a log value, outermost level
    first; the last level is what one row is (an iteration, or a process run)."""

    of: str  # what varies: "log(ticks)", or "log(B/A) of ticks"
    levels: tuple[str, ...]
    variances: tuple[float, ...]  # the moment estimates, negative ones as 0
    estimates: tuple[float, ...]  # the moment estimates themselves (unbiased, may be < 0)
    units: tuple[int, ...]  # units of each level in the data (for B/A: on each side)
    # "median": each outermost unit's value is the median of its rows (the second level), whose
    # variance is the rows' times median_factor(rows), not divided by their number; a third
    # level (iterations) is a row's median too
    statistic: Literal["mean", "median"] = "mean"
    trim: float = 0.0  # the outermost units are averaged with this share cut at each end
    # (iterations a run, variance of one row's log value) as the runs showed it, for a third
    # level of iterations: what row() reads up to the most iterations measured
    measured: tuple[tuple[int, float], ...] = ()

    def freedom(self, units: int) -> int:
        """Degrees of freedom of the t interval over this many outermost units (Yuen's for a
        trimmed mean: the units kept, less one)."""
        return units - 2 * math.floor(self.trim * units) - 1

    @property
    def total(self) -> float:
        """The variance of one measurement: the components' sum."""
        return float(sum(self.variances))

    def variance(self, counts: Sequence[int]) -> float:
        """The variance of the mean log value from a balanced design: counts[i] units of level i
        in each unit of the level above (counts[0]: units of the outermost level)."""
        var = self._check(counts)
        if self.statistic == "median":
            row = self.row(counts[2]) if len(var) > 2 else var[1]
            return (var[0] + row * median_factor(counts[1])) / counts[0]
        return sum(v / math.prod(counts[: i + 1]) for i, v in enumerate(var))

    def row(self, iterations: int) -> float:
        """The variance of one row's log value (a pair's log B/A) when each run is the median of
        this many iterations: as measured, and between two measured counts linear in their
        median_factor; past the most measured (or with none), var[1] + var[2] x median_factor,
        the two fitted through the two most (_fit_iterations)."""
        f = median_factor(iterations)
        below = [(k, v) for k, v in self.measured if k <= iterations]
        above = [(k, v) for k, v in self.measured if k >= iterations]
        if not below or not above:
            return self.variances[1] + self.variances[2] * f
        (k0, v0), (k1, v1) = below[-1], above[0]
        if k0 == k1:
            return v0
        f0, f1 = median_factor(k0), median_factor(k1)
        return v0 + (v1 - v0) * (f - f0) / (f1 - f0)

    def _check(self, counts: Sequence[int]) -> tuple[float, ...]:
        if len(counts) != len(self.levels) or min(counts) < 1:
            raise PerflabError(
                f"a design needs a count of at least 1 for each of {', '.join(self.levels)}, "
                f"not {tuple(counts)}"
            )
        return self.variances


def _sides(
    frame: pd.DataFrame, levels: Sequence[str], side: str, sides: tuple[str, str]
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The baseline's and the candidate's rows in the outermost units that hold both."""
    if side not in frame:
        raise PerflabError(f"no column {side!r} in the frame: which rows are A and which B?")
    a, b = (frame[frame[side] == s] for s in sides)
    if a.empty or b.empty:
        raise PerflabError(f"{side} holds no {sides[0] if a.empty else sides[1]!r} rows")
    top = levels[0]
    both = set(a[top]) & set(b[top])
    if not both:
        raise PerflabError(f"no {top} holds both {sides[0]} and {sides[1]}")
    return a[a[top].isin(both)], b[b[top].isin(both)]


# The median of |x - y| over pairs of normal values is 0.6745 sqrt(2) sigma.
_PAIR_SPREAD = 0.6745 * math.sqrt(2)


# A group's pairs are of at most this many of its values, evenly spaced in run order: all
# pairs of a layout of 20 000 runs would take 3 GB for a spread 2 000 pairs already give.
SPREAD_VALUES = 64


def _spread_sample(v: np.ndarray) -> np.ndarray:
    return v[:: -(-v.size // SPREAD_VALUES)]


def _robust_variance(logs: pd.Series, groups: list[pd.Series]) -> float:
    """The variance of one value within its groups, from the median absolute difference of all
    pairs inside a group: unlike deviations from a group's own median, it holds for groups of
    two and three, and a disturbed value cannot weigh as its square."""
    diffs = [
        np.abs(np.subtract.outer(v, v)[np.triu_indices(v.size, 1)])
        for _, g in logs.groupby(groups, sort=False)
        if (v := _spread_sample(g.to_numpy(float))).size >= 2
    ]
    if not diffs:
        raise PerflabError("no layout holds two pairs of A and B: no spread within a layout")
    return float((np.median(np.concatenate(diffs)) / _PAIR_SPREAD) ** 2)


def paired_ratios(
    frame: pd.DataFrame,
    value: str,
    level: str,
    pair: str = "rep",
    side: str = "side",
    sides: tuple[str, str] = ("A", "B"),
) -> pd.DataFrame:
    """Each unit of `level` (a layout) holding both sides: the median over its pairs (an A and
    a B run next to each other in time, `pair` naming them) of log(B / A) as `log_ratio`, and
    `pairs`, how many. A pair's two runs share what the host did to that moment (this guest
    ran 1.1-1.5x slower for a second at a time, runs' log times correlated at 0.7 lag 1), so
    its ratio cancels it where medians of each side, taken apart, follow a spell that cut
    one side's runs: over 40 layouts of 4 pairs of two copies of brotli, the layouts' log B/A
    spread 0.016 this way against 0.038 as B/A of medians."""
    return _layout_medians(pair_log_ratios(frame, value, level, pair, side, sides))


def _layout_medians(d: pd.Series) -> pd.DataFrame:
    """paired_ratios from the pairs' log ratios (pair_log_ratios), read once."""
    by = d.groupby(level=0)
    out = pd.DataFrame({"log_ratio": by.median(), "pairs": by.size()}).dropna()
    return out[out["pairs"] > 0]


def pair_log_ratios(
    frame: pd.DataFrame,
    value: str,
    level: str,
    pair: str = "rep",
    side: str = "side",
    sides: tuple[str, str] = ("A", "B"),
) -> pd.Series:
    """log(B / A) of every pair holding a positive value of both sides, indexed by (level,
    pair): a pair missing a side (a failed or stalled run) drops out whole."""
    a, b = _sides(frame, [level], side, sides)
    if pair not in frame:
        raise PerflabError(f"no column {pair!r} in the frame: which A and B runs are a pair?")
    for f, name in ((a, sides[0]), (b, sides[1])):
        twice = f[f.duplicated([level, pair])]
        if not twice.empty:
            first = twice.iloc[0]
            raise PerflabError(
                f"{level} {first[level]} {pair} {first[pair]} holds two {name} runs: a pair is "
                f"one run of each side (two results put together need {level}s of their own)"
            )
    logs = [
        np.log(pd.to_numeric(f[value], errors="coerce").where(lambda x: x > 0))
        .groupby([f[level], f[pair]])
        .first()
        for f in (a, b)
    ]
    return (logs[1] - logs[0]).dropna()


def paired_ratio_components(
    frame: pd.DataFrame,
    value: str,
    level: str = "setup",
    pair: str = "rep",
    side: str = "side",
    sides: tuple[str, str] = ("A", "B"),
    trim: float = 0.0,
) -> Components:
    """Variance components of a layout's median of its pairs' log(B/A), the estimate compare
    averages over layouts: `level` (what a layout moves B/A by) and "pair" (one pair's log
    B/A, which a layout's median of n pairs divides by 1/median_factor(n)). The pairs' spread
    is a robust one within each layout (a disturbed pair counts as one, not as its square);
    the layout's is what the sample variance of the layouts' log B/A holds beyond it, so the
    two add up to the variance the layouts showed at the pairs they ran: for a trimmed mean
    over layouts (`trim` of each end cut), its per-layout variance (trimmed_variance). Where
    runs ran the repeat loop at two or more counts of iterations, "iteration" is a third
    level, its variance at each count as measured there (_by_count, Components.row)."""
    d = pair_log_ratios(frame, value, level, pair, side, sides)
    top, run, per = _split(d, trim)
    if len(per) < 2:
        raise PerflabError(f"one {level} holds both sides: B/A cannot vary between them")
    if not math.isfinite(run):
        raise PerflabError("no layout holds two pairs of A and B: no spread within a layout")
    of = f"median over pairs of log({sides[1]}/{sides[0]}) of {value}"
    units = (len(per), int(per["pairs"].sum()))
    counts = _by_count(frame, value, level, pair, side, sides, trim)
    if len(counts) < 2:
        return Components(of, (level, "pair"), (max(top, 0.0), run), (top, run), units, "median",
                          trim)  # fmt: skip
    # The layout's variance from the count most layouts ran: pooled with another count's, it
    # takes in how differently single stretched iterations move the medians at each, and one
    # iteration in ten stretched 1.4x read 3.3 times the variance the pilot's own count showed.
    top = max(counts, key=lambda c: (c[3], c[0]))[2]
    measured = tuple((k, v) for k, v, _, _ in counts)
    pair_part, per_iteration = _fit_iterations(measured)
    most = measured[-1][1] / median_factor(measured[-1][0])  # all of the most measured's
    kept = min(max(per_iteration, 0.0), most)
    iterations = int(pd.to_numeric(frame["iterations"], errors="coerce").clip(lower=0).sum())
    return Components(
        of,
        (level, "pair", "iteration"),
        (max(top, 0.0), measured[-1][1] - kept * median_factor(measured[-1][0]), kept),
        (top, pair_part, per_iteration),
        (*units, iterations),
        "median",
        trim,
        measured,
    )


def _split(d: pd.Series, trim: float) -> tuple[float, float, pd.DataFrame]:
    """Of pairs' log B/A (pair_log_ratios), the layout's variance (what the layouts' medians
    vary by beyond their pairs'), the pairs' robust spread within layouts, and the layouts'
    medians; nan for what fewer than two layouts, or no two pairs in one, cannot tell."""
    per = _layout_medians(d)
    if len(per) < 2:
        return math.nan, math.nan, per
    try:
        run = _robust_variance(d.reset_index(drop=True), [pd.Series(d.index.get_level_values(0))])
    except PerflabError:  # no layout holds two pairs
        return math.nan, math.nan, per
    within = run * float(np.mean([median_factor(int(n)) for n in per["pairs"]]))
    return trimmed_variance(per["log_ratio"], trim) - within, run, per


def _by_count(
    frame: pd.DataFrame,
    value: str,
    level: str,
    pair: str,
    side: str,
    sides: tuple[str, str],
    trim: float,
) -> list[tuple[int, float, float, int]]:
    """For runs of the probe's repeat loop, at each count of iterations a run ran (a --precision
    pilot runs the user's count and one): the pairs' spread within layouts, the layout's
    variance and the layouts, from the pairs run at that count. What the median of more
    iterations buys is then measured between processes, as compare's B/A varies. Neither the
    iterations' spread within a process nor a run's first iteration alone is a measure of
    it on this guest: brotli's first iteration runs 4-7 % slower than the rest in A and B
    alike, which B/A cancels, yet the spread within a process put 100 % of the variance in
    the iterations; and the first iterations of runs of 4, each pair's 250 ms apart, varied
    2.4-3.7 times as much in B/A as runs of one, 65 ms apart, which varied as runs of 4
    (benchmarks/iteration_counts.py). Empty where the runs ran one count, as without the loop."""
    if value != "ticks" or "iterations" not in frame:
        return []
    k = pd.to_numeric(frame["iterations"], errors="coerce").fillna(0).astype(int)
    counts = sorted(set(k[k >= 1]))
    if len(counts) < 2 or counts[-1] < 2:  # one count: the whole frame's split, no level
        return []
    out = []
    for n in counts:
        top, run, per = _split(pair_log_ratios(frame[k == n], value, level, pair, side, sides),
                               trim)  # fmt: skip
        if math.isfinite(run):
            out.append((int(n), run, top, len(per)))
    return out


def _fit_iterations(measured: Sequence[tuple[int, float]]) -> tuple[float, float]:
    """A pair's part and an iteration's (per iteration, which a run's median of k divides by
    median_factor(k)) through the two most iterations measured: what row() extrapolates with.
    Unclipped, as moment estimates are; row() holds the measured counts themselves."""
    (k0, v0), (k1, v1) = measured[-2:]
    f0, f1 = median_factor(k0), median_factor(k1)
    per_iteration = (v0 - v1) / (f0 - f1)
    return v1 - per_iteration * f1, per_iteration


def trimmed_means(x: np.ndarray, trim: float) -> np.ndarray:
    """The mean of each row of x less its `trim` share of lowest and of highest values."""
    k = math.floor(trim * x.shape[-1])
    return np.sort(x, axis=-1)[..., k : x.shape[-1] - k].mean(axis=-1)


def trimmed_variance(values: ArrayLike, trim: float) -> float:
    """n times the variance of the trimmed mean of n independent values: their winsorized
    variance over the square of the share kept (Tukey and McLaughlin, Sankhya A 25, 1963)."""
    x = np.sort(np.asarray(values, dtype=float))
    k = math.floor(trim * x.size)
    w = np.clip(x, x[k], x[x.size - 1 - k])
    return float(np.var(w, ddof=1) / (1 - 2 * k / x.size) ** 2)


def trimmed_interval(
    values: ArrayLike, confidence: float = 0.95, trim: float = 0.0
) -> tuple[float, float, float]:
    """The trimmed mean of independent units (the plain mean at trim 0) with its t interval:
    Yuen's, the winsorized variance and the units kept less one degree of freedom (Yuen,
    Biometrika 61, 1974). A t, not a bootstrap: over a few units the bootstrap cannot reach
    beyond the values seen, and four A/A layouts all on one side (one time in eight) would
    exclude 1 at any confidence."""
    x = np.asarray(values, dtype=float)
    k = math.floor(trim * x.size)
    if x.size - 2 * k < 2:
        raise PerflabError("an interval over units needs two of them kept")
    from scipy import stats

    centre = float(trimmed_means(x, trim))
    q = float(stats.t.ppf(1 - (1 - confidence) / 2, x.size - 2 * k - 1))
    half = q * math.sqrt(trimmed_variance(x, trim) / x.size)
    return centre, centre - half, centre + half


def layouts_differ(d: pd.Series) -> float:
    """The p-value of Kruskal and Wallis's test that every layout's values (d, indexed by
    layout first) come from one distribution: rank-based, so a disturbed pair weighs as one
    rank, and with ties corrected; chi-squared with layouts - 1 degrees of freedom."""
    d = d.dropna()
    groups = d.groupby(level=0)
    k, n = groups.ngroups, d.size
    if k < 2 or n <= k:
        raise PerflabError("fewer than two layouts, or one value each: nothing to test")
    if d.nunique() == 1:  # all tied: no ranks to tell layouts apart (scipy raises)
        return 1.0
    from scipy import stats

    return float(stats.kruskal(*(g.to_numpy(float) for _, g in groups)).pvalue)


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
class Design:
    """A design's counts per level (outermost first: units of the outermost level, then per
    unit above), the half-width of its B/A interval on the ratio scale and its time."""

    counts: tuple[int, ...]
    half_width: float  # 0.01: the interval reaches 1 % above the estimate
    time: float  # in the unit of the costs


@dataclass(frozen=True)
class RepetitionPlan:
    """The repetitions per level of the least-time design to reach a half-width, and a fixed
    design to weigh it against (not lab.plans' Plan, which holds a verb's parameters)."""

    levels: tuple[str, ...]
    target: float  # the half-width asked for
    confidence: float
    planned: Design
    fixed: Design
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
) -> Design:
    """The half-width and time of a design: the t interval over the outermost units (each unit's
    mean varies by components.variance of one unit), and sum_i costs[i] * prod(counts[:i+1])."""
    c = _costs(components, costs)
    components._check(counts)
    if counts[0] < 2:
        raise PerflabError("a design needs two outermost units for an interval")
    from scipy import stats

    counts = tuple(int(n) for n in counts)
    spread = math.sqrt(components.variance((1, *counts[1:])) / counts[0])
    q = float(stats.t.ppf(1 - (1 - confidence) / 2, components.freedom(counts[0])))
    time = float(sum(ci * math.prod(counts[: i + 1]) for i, ci in enumerate(c)))
    return Design(counts, math.expm1(q * spread), time)


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
) -> RepetitionPlan:
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
    return RepetitionPlan(
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
