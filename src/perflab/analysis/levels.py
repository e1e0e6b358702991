"""Variance by level of a nested benchmark design (layouts, pairs, iterations), the
variance-component model of Kalibera and Jones, "Rigorous Benchmarking in Reasonable Time"
(ISMM 2013), as a random-effects model of log(value), and the test that layouts differ at all.
What the model plans is in repetitions.py, the interval over layouts in trimmed.py. scipy.stats
is imported where used, so that perflab starts without it."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from perflab.analysis.trimmed import trimmed_variance
from perflab.core.lazy import pd
from perflab.errors import PerflabError

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
        var = self.check(counts)
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

    def check(self, counts: Sequence[int]) -> tuple[float, ...]:
        """The variances, once counts name one count of at least 1 per level."""
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


def layout_medians(log_ratios: pd.Series) -> pd.DataFrame:
    """Each unit of the first index level (a layout) holding both sides: the median of its
    pairs' log(B / A) (pair_log_ratios) as `log_ratio`, and `pairs`, how many. A pair's two
    runs share what the host did to that moment (this guest ran 1.1-1.5x slower for a second
    at a time, runs' log times correlated at 0.7 lag 1), so its ratio cancels it where medians
    of each side, taken apart, follow a spell that cut one side's runs: over 40 layouts of 4
    pairs of two copies of brotli, the layouts' log B/A spread 0.016 this way against 0.038 as
    B/A of medians."""
    by = log_ratios.groupby(level=0)
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
    per = layout_medians(d)
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
