"""Variance by level of a nested benchmark design (layouts, processes, iterations), the
repetitions each level needs for a wanted precision at the least cost, and B/A intervals that
say which levels they cover: Kalibera and Jones, "Rigorous Benchmarking in Reasonable Time"
(ISMM 2013), as a random-effects model of log(value)."""

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

    def shares(self) -> dict[str, float]:
        """Each level's fraction of the total variance (nan everywhere when there is none)."""
        total = self.total
        return {
            n: v / total if total > 0 else math.nan
            for n, v in zip(self.levels, self.variances, strict=True)
        }

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

    def describe(self) -> str:
        """One line: the share of each level, largest first."""
        shares = self.shares()
        order = sorted(zip(self.variances, self.levels, strict=True), reverse=True)
        parts = ", ".join(f"{name} {shares[name]:.0%}" for _, name in order)
        return f"variance of {self.of} by level: {parts}"

    def _check(self, counts: Sequence[int]) -> tuple[float, ...]:
        if len(counts) != len(self.levels) or min(counts) < 1:
            raise PerflabError(
                f"a design needs a count of at least 1 for each of {', '.join(self.levels)}, "
                f"not {tuple(counts)}"
            )
        return self.variances


class _Tree:
    """The nesting of rows in units: for each level the unit of every row (codes 0..n-1,
    level 0 the outermost, the last level the rows themselves) and each unit's parent."""

    def __init__(self, frame: pd.DataFrame, levels: Sequence[str]):
        rows = len(frame)
        self.codes = [
            frame.groupby(list(levels[: i + 1]), sort=True, dropna=False).ngroup().to_numpy()
            for i in range(len(levels))
        ] + [np.arange(rows)]
        self.sizes = [np.bincount(c) for c in self.codes]
        self.parents = [np.zeros(self.sizes[0].size, dtype=np.int64)]
        for upper, lower in zip(self.codes, self.codes[1:], strict=False):
            first = np.unique(lower, return_index=True)[1]
            self.parents.append(upper[first])

    def means(self, y: np.ndarray) -> list[np.ndarray]:
        """Each unit's mean of its children's means (every child weighs alike), per level."""
        out = [y]
        for level in range(len(self.codes) - 1, 0, -1):
            parent = self.parents[level]
            out.append(np.bincount(parent, out[-1]) / np.bincount(parent))
        return out[::-1]

    def mean_variance(self, variances: Sequence[float]) -> np.ndarray:
        """The variance of each outermost unit's mean from the components below it."""
        var = np.zeros(self.sizes[-1].size)
        for level in range(len(self.codes) - 1, 0, -1):
            parent = self.parents[level]
            k = np.bincount(parent)
            var = np.bincount(parent, variances[level] + var) / k**2
        return var


def _logs(
    frame: pd.DataFrame, value: str, columns: Sequence[str]
) -> tuple[pd.DataFrame, np.ndarray]:
    """The rows with a finite value and the log of it; a value <= 0 has no log."""
    missing = [c for c in (value, *columns) if c not in frame]
    if missing:
        raise PerflabError(f"no column {', '.join(map(repr, missing))} in the frame")
    x = pd.to_numeric(frame[value], errors="coerce").to_numpy(float)
    keep = np.isfinite(x)
    if (x[keep] <= 0).any():
        raise PerflabError(f"{value} holds values <= 0: variance by level is of its log")
    return frame.loc[keep], np.log(x[keep])


def _moments(y: np.ndarray, tree: _Tree, names: Sequence[str]) -> np.ndarray:
    """The components by the method of moments (ANOVA, Henderson's method I): each level's sum
    of squares about its parent's mean set equal to its expectation, which for unbalanced data
    weighs each component by tr(Q_l Z_m Z_m') (Searle, Casella and McCulloch, Variance
    Components, 1992, ch. 4); with balanced data these are Kalibera and Jones's T_i^2."""
    codes = [np.zeros(y.size, dtype=np.int64), *tree.codes]
    sizes = [np.array([y.size]), *tree.sizes]
    for i, name in enumerate(names):
        if sizes[i + 1].size <= sizes[i].size:
            above = f"each {names[i - 1]}" if i else "the data"
            raise PerflabError(
                f"{above} holds one {name}: its variance cannot be told from the level below"
            )
    means = [np.bincount(c, y) / n for c, n in zip(codes, sizes, strict=True)]
    depth = len(codes) - 1
    ss = np.array(
        [
            np.sum((means[i][codes[i]] - means[i - 1][codes[i - 1]]) ** 2)
            for i in range(1, depth + 1)
        ]
    )

    def trace(i: int, m: int) -> float:  # tr(P_i Z_m Z_m'): sum over m's units of n_v^2 / n_u
        if m < i:
            return float(y.size)
        first = np.unique(codes[m], return_index=True)[1]
        return float(np.sum(sizes[m].astype(float) ** 2 / sizes[i][codes[i][first]]))

    k = np.zeros((depth, depth))
    for i in range(1, depth + 1):
        for m in range(i, depth + 1):
            k[i - 1, m - 1] = trace(i, m) - trace(i - 1, m)
    return np.linalg.solve(k, ss)


def components(
    frame: pd.DataFrame, value: str, levels: Sequence[str], row: str = "row"
) -> Components:
    """Variance components of log(value) for a nested design whose levels are columns,
    outermost first (["setup", "process"] when each row is one iteration, ["setup"] when each
    row is one process run; a unit is named by its column within the units above it); `row`
    names what one row is. Unbalanced data is fine; each level needs some unit with two."""
    levels = list(levels)
    if not levels:
        raise PerflabError("variance by level needs at least one level column")
    frame, y = _logs(frame, value, levels)
    tree = _Tree(frame, levels)
    est = _moments(y, tree, [*levels, row])
    return Components(
        f"log({value})",
        (*levels, row),
        tuple(float(max(v, 0.0)) for v in est),
        tuple(float(v) for v in est),
        tuple(int(s.size) for s in tree.sizes),
    )


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


def _unit_means(
    frame: pd.DataFrame, value: str, levels: Sequence[str]
) -> tuple[pd.Series, _Tree, np.ndarray]:
    """Each outermost unit's mean log value (its children's means weighing alike) by label, the
    nesting, and the log values."""
    frame, y = _logs(frame, value, levels)
    tree = _Tree(frame, levels)
    labels = frame.groupby(levels[0], sort=True, dropna=False).size().index
    return pd.Series(tree.means(y)[0], index=labels), tree, y


def ratio_components(
    frame: pd.DataFrame,
    value: str,
    levels: Sequence[str],
    side: str = "side",
    sides: tuple[str, str] = ("A", "B"),
    row: str = "row",
) -> Components:
    """Variance components of log(B/A) where A and B run interleaved within each outermost
    unit (a layout): the outermost component is how much the unit moves B/A (what it does to
    A and B alike cancels), the others are A's and B's own summed, so `variance(counts)` is
    that of the B/A estimate with counts per side. Each side needs two units at every level
    below the outermost in some outermost unit."""
    levels = list(levels)
    if not levels:
        raise PerflabError("variance by level needs at least one level column")
    a, b = _sides(frame, levels, side, sides)
    per_side = [components(f, value, levels, row) for f in (a, b)]
    (mean_a, tree_a, _), (mean_b, tree_b, _) = (_unit_means(f, value, levels) for f in (a, b))
    d = mean_b - mean_a
    if d.size < 2:
        raise PerflabError(f"one {levels[0]} holds both sides: B/A cannot vary between them")
    noise = tree_a.mean_variance(per_side[0].estimates) + tree_b.mean_variance(
        per_side[1].estimates
    )
    # E[sample variance of d] = between-unit variance + mean of each d's own noise variance.
    top = float(np.var(d.to_numpy(), ddof=1) - noise.mean())
    lower = [
        ca + cb for ca, cb in zip(per_side[0].estimates[1:], per_side[1].estimates[1:], strict=True)
    ]
    est = [top, *lower]
    units = tuple(min(x, y) for x, y in zip(per_side[0].units, per_side[1].units, strict=True))
    return Components(
        f"log({sides[1]}/{sides[0]}) of {value}",
        (*levels, row),
        tuple(float(max(v, 0.0)) for v in est),
        tuple(float(v) for v in est),
        units,
    )


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
    centre = float(trimmed_means(x, trim))
    q = t_quantile(1 - (1 - confidence) / 2, x.size - 2 * k - 1)
    half = q * math.sqrt(trimmed_variance(x, trim) / x.size)
    return centre, centre - half, centre + half


def t_quantile(p: float, df: int) -> float:
    """Student's t quantile: for integer df up to 200 the exact CDF (the finite series of
    Abramowitz and Stegun 26.7.3-4) inverted by safeguarded Newton steps from Cornish-Fisher's
    expansion (26.7.5), which alone serves beyond."""
    if not 0 < p < 1 or df < 1:
        raise PerflabError(f"no t quantile at p={p} with {df} degrees of freedom")
    if p < 0.5:
        return -t_quantile(1 - p, df)
    z = NormalDist().inv_cdf(p)
    g = (
        (z**3 + z) / 4,
        (5 * z**5 + 16 * z**3 + 3 * z) / 96,
        (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / 384,
        (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / 92160,
    )
    guess = z + sum(gi / df ** (i + 1) for i, gi in enumerate(g))
    if df > 200:
        return guess
    target = 2 * p - 1
    lo, hi = 0.0, 1.0
    while _t_inside(hi, df) < target:
        lo, hi = hi, hi * 2
    density = math.exp(math.lgamma((df + 1) / 2) - math.lgamma(df / 2)) / math.sqrt(df * math.pi)
    t = min(max(guess, lo), hi)
    for _ in range(100):
        miss = _t_inside(t, df) - target
        lo, hi = (t, hi) if miss < 0 else (lo, t)
        step = t - miss / (2 * density * (1 + t * t / df) ** (-(df + 1) / 2))
        step = step if lo < step < hi else (lo + hi) / 2
        if abs(step - t) <= 1e-13 * t:
            return step
        t = step
    return t


def _chi2_cdf(x: float, df: int) -> float:
    """P(X <= x) for X chi-squared with df degrees of freedom: the regularised lower incomplete
    gamma P(df/2, x/2) by its power series (Abramowitz and Stegun 6.5.29), which converges for
    every x; its terms are summed until they no longer change the sum."""
    if x <= 0:
        return 0.0
    a, h = df / 2, x / 2
    term = total = 1 / a
    n = 0
    while term > 1e-17 * total:
        n += 1
        term *= h / (a + n)
        total += term
    return min(math.exp(a * math.log(h) - h - math.lgamma(a)) * total, 1.0)


def chi2_sf(x: float, df: int) -> float:
    """P(X > x) for X chi-squared with df degrees of freedom; 0 far beyond the distribution's
    bulk, where the power series would overflow and the truth is below any float's meaning."""
    if x > df + 40 * math.sqrt(df) + 200:
        return 0.0
    return max(1.0 - _chi2_cdf(x, df), 0.0)


def layouts_differ(d: pd.Series) -> float:
    """The p-value of Kruskal and Wallis's test that every layout's values (d, indexed by
    layout first) come from one distribution: rank-based, so a disturbed pair weighs as one
    rank, and with ties corrected; chi-squared with layouts - 1 degrees of freedom."""
    d = d.dropna()
    groups = d.groupby(level=0)
    k, n = groups.ngroups, d.size
    if k < 2 or n <= k:
        raise PerflabError("fewer than two layouts, or one value each: nothing to test")
    ranks = pd.Series(d.rank().to_numpy(), index=d.index)
    by = ranks.groupby(level=0)
    h = 12 / (n * (n + 1)) * float((by.sum() ** 2 / by.size()).sum()) - 3 * (n + 1)
    ties = d.value_counts().to_numpy(float)
    correction = 1 - float((ties**3 - ties).sum()) / (n**3 - n)
    return chi2_sf(h / correction, k - 1) if correction > 0 else 1.0


def chi2_quantile(p: float, df: int) -> float:
    """The chi-squared quantile: its CDF inverted by bisection from Wilson and Hilferty's
    approximation, to 1e-12 of the value."""
    if not 0 < p < 1 or df < 1:
        raise PerflabError(f"no chi-squared quantile at p={p} with {df} degrees of freedom")
    z, c = NormalDist().inv_cdf(p), 2 / (9 * df)
    guess = df * max(1 - c + z * math.sqrt(c), 0.05) ** 3
    lo, hi = 0.0, guess
    while _chi2_cdf(hi, df) < p:
        lo, hi = hi, hi * 2
    while hi - lo > 1e-12 * hi:
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if _chi2_cdf(mid, df) < p else (lo, mid)
    return (lo + hi) / 2


def variance_ratio_range(df: int, confidence: float) -> tuple[float, float]:
    """The range of true/estimated for a variance estimated with df degrees of freedom, at
    `confidence` (equal tails): df/chi2 at its upper and lower quantiles. A plan's remaining
    work scales with the variance it was made from, so its time carries this range."""
    tail = (1 - confidence) / 2
    return df / chi2_quantile(1 - tail, df), df / chi2_quantile(tail, df)


def _t_inside(t: float, df: int) -> float:
    """P(|T| <= t) for integer df, Abramowitz and Stegun 26.7.3 (odd df) and 26.7.4 (even)."""
    theta = math.atan(t / math.sqrt(df))
    c2 = math.cos(theta) ** 2
    term = total = 1.0
    if df % 2:
        if df == 1:
            return 2 * theta / math.pi
        for k in range(1, (df - 1) // 2):
            term *= 2 * k / (2 * k + 1) * c2
            total += term
        return 2 / math.pi * (theta + math.sin(theta) * math.cos(theta) * total)
    for k in range(1, df // 2):
        term *= (2 * k - 1) / (2 * k) * c2
        total += term
    return math.sin(theta) * total


@dataclass(frozen=True)
class Design:
    """A design's counts per level (outermost first: units of the outermost level, then per
    unit above), the half-width of its B/A interval on the ratio scale and its time."""

    counts: tuple[int, ...]
    half_width: float  # 0.01: the interval reaches 1 % above the estimate
    time: float  # in the unit of the costs


@dataclass(frozen=True)
class Plan:
    """The least-time design to reach a half-width, and a fixed design to weigh it against."""

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
    counts = tuple(int(n) for n in counts)
    spread = math.sqrt(components.variance((1, *counts[1:])) / counts[0])
    q = t_quantile(1 - (1 - confidence) / 2, components.freedom(counts[0]))
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
) -> Plan:
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
    while t_quantile(p, floored.freedom(top)) * math.sqrt(per_unit / top) > h:
        top += 1
    fixed = tuple(fixed) if fixed is not None else (10,) * len(components.levels)
    return Plan(
        components.levels,
        half_width,
        confidence,
        predict(floored, c, (top, *lower), confidence),
        predict(floored, c, fixed, confidence),
        continuous,
    )


@dataclass(frozen=True)
class RatioInterval:
    """B/A with its interval, and the levels whose variation the interval covers."""

    ratio: float
    low: float
    high: float
    confidence: float
    covers: tuple[str, ...]  # the resampled level and those below it
    resampled: str  # the level whose units were drawn with replacement
    units: int  # how many units of it (on the smaller side, when drawn per side)
    per_unit: pd.Series  # B/A of each outermost unit (geometric means), by its label


def _expanded(boot: np.ndarray, confidence: float, n: int) -> tuple[float, float]:
    """The expanded percentile interval (Hesterberg, "What Teachers Should Know About the
    Bootstrap", The American Statistician 69, 2015): the bootstrap's quantiles at
    Phi(-sqrt(n/(n-1)) t_{n-1}), since the percentile interval of a mean of n units is too
    narrow by sqrt((n-1)/n) and by the normal quantile standing for the t."""
    alpha = (1 - confidence) / 2
    z = math.sqrt(n / (n - 1)) * t_quantile(1 - alpha, n - 1)
    tail = NormalDist().cdf(-z)
    lo, hi = np.quantile(boot, [tail, 1 - tail])
    return float(lo), float(hi)


def ratio_interval(
    frame: pd.DataFrame,
    value: str,
    levels: Sequence[str],
    side: str = "side",
    confidence: float = 0.95,
    n_boot: int = 2000,
    seed: int = 0,
    sides: tuple[str, str] = ("A", "B"),
    row: str = "row",
) -> RatioInterval:
    """B/A (geometric: each unit's mean log, its children weighing alike) with a hierarchical
    bootstrap interval, A and B interleaved within each outermost unit.

    The outermost units are drawn with replacement and everything below them kept as measured:
    a unit's mean already carries the variation of its processes and iterations once, and
    drawing again at every level counts it twice, which makes the interval conservative
    (Davison and Hinkley, Bootstrap Methods and their Application, 1997, sec. 3.8; Ren et al.,
    "Nonparametric bootstrapping for hierarchical data", J. Applied Statistics 37, 2010). With
    one outermost unit the first level below it with two units per side is drawn instead, and
    the interval covers only the levels from there down: it says nothing about other layouts.
    The quantiles are the expanded percentile interval's, so ten units keep the stated rate."""
    if not 0 < confidence < 1:
        raise PerflabError(f"confidence must be between 0 and 1, not {confidence}")
    levels = list(levels)
    if not levels:
        raise PerflabError("a hierarchical interval needs at least one level column")
    names = (*levels, row)
    a, b = _sides(frame, levels, side, sides)
    (mean_a, tree_a, y_a), (mean_b, tree_b, y_b) = (_unit_means(f, value, levels) for f in (a, b))
    d = (mean_b - mean_a).to_numpy()
    rng = np.random.default_rng(seed)
    if d.size >= 2:
        boot = d[rng.integers(0, d.size, size=(n_boot, d.size))].mean(axis=1)
        depth, n, estimate = 0, d.size, float(d.mean())
    else:
        (ua, ja), (ub, jb) = _first_replicated(tree_a, y_a), _first_replicated(tree_b, y_b)
        if ua is None or ub is None:
            raise PerflabError(f"one {levels[0]} and one run of a side: no interval")
        boot = ub[rng.integers(0, ub.size, size=(n_boot, ub.size))].mean(axis=1) - ua[
            rng.integers(0, ua.size, size=(n_boot, ua.size))
        ].mean(axis=1)
        depth, n, estimate = max(ja, jb), min(ua.size, ub.size), float(d[0])
    lo, hi = _expanded(boot, confidence, n)
    return RatioInterval(
        math.exp(estimate),
        math.exp(lo),
        math.exp(hi),
        confidence,
        names[depth:],
        names[depth],
        n,
        np.exp(mean_b - mean_a).rename(f"{sides[1]}/{sides[0]}"),
    )


def _first_replicated(tree: _Tree, y: np.ndarray) -> tuple[np.ndarray | None, int]:
    """In a side of one outermost unit: the means of the units of the first level holding two
    or more, and that level."""
    means = tree.means(y)
    for level in range(1, len(means)):
        if means[level].size >= 2:
            return means[level], level
    return None, 0


def log_spread(
    values_a: ArrayLike, values_b: ArrayLike | None = None, robust: bool = False
) -> float:
    """The standard deviation of log values, pooled over the two samples about their own
    centres; robust: 1.4826 x their median absolute deviation, which outliers cannot inflate."""
    samples = [np.log(_positive(v)) for v in (values_a, values_b) if v is not None]
    if robust:
        dev = np.concatenate([np.abs(s - np.median(s)) for s in samples])
        return float(1.4826 * np.median(dev))
    free = sum(s.size - 1 for s in samples)
    if free < 1:
        raise PerflabError("a spread needs two values of one sample")
    return float(math.sqrt(sum(float(np.sum((s - s.mean()) ** 2)) for s in samples) / free))


def _positive(values: ArrayLike) -> np.ndarray:
    x = np.asarray(values, dtype=float)
    x = x[np.isfinite(x)]
    if x.size == 0 or (x <= 0).any():
        raise PerflabError("a spread of log values needs values, all above 0")
    return x


def runs_needed(
    values_a: ArrayLike | None = None,
    values_b: ArrayLike | None = None,
    *,
    spread: float | None = None,
    change: float = 0.02,
    confidence: float = 0.95,
    power: float = 0.8,
    statistic: Literal["mean", "median"] = "mean",
) -> int:
    """Runs per side for an interval of B/A at `confidence` to exclude 1 with probability
    `power` when B is `change` slower (0.02: 2 %): the normal approximation
    n = 2 (z_{(1+confidence)/2} + z_power)^2 s^2 / log(1+change)^2, s the spread of log values
    (log_spread of the values given, or `spread`); for medians the variance is pi/2 that of a
    mean (the median's efficiency at the normal), and the spread the robust one."""
    if spread is None and values_a is not None:
        spread = log_spread(values_a, values_b, robust=statistic == "median")
    elif spread is None or values_a is not None:
        raise PerflabError("runs_needed takes the measured values or their spread, one of them")
    return int(runs_for_spreads(np.array([spread]), change, confidence, power, statistic)[0])


def runs_for_spreads(
    spreads: np.ndarray,
    change: float,
    confidence: float,
    power: float,
    statistic: Literal["mean", "median"] = "mean",
) -> np.ndarray:
    """runs_needed for many spreads at once (a sweep's points), at least 2 each."""
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
