"""Variance by level, planned repetition and intervals over layouts, against synthetic data
drawn with known components (Kalibera and Jones, ISMM 2013), and the distributions behind
them against values known without scipy."""

import itertools
import math
import subprocess
import sys
from statistics import NormalDist

import numpy as np
import pandas as pd
import pytest
from conftest import long_beyond
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from perflab.analysis import levels, repetitions
from perflab.analysis.trimmed import trimmed_interval, trimmed_means, trimmed_variance
from perflab.errors import PerflabError


def pairs(rng, layouts, n, layout_sd, run_sd, delta, disturbed=0.0) -> pd.DataFrame:
    """n A and n B runs in each layout: a layout effect both share, one that moves B/A by
    layout_sd, runs with run_sd; a `disturbed` share of runs 1.5x slower (a neighbour)."""
    setup, side, rep = np.indices((layouts, 2, n)).reshape(3, -1)
    y = (
        10
        + delta * side
        + rng.normal(0, 0.05, layouts)[setup]
        + rng.normal(0, layout_sd, layouts)[setup] * side
        + rng.normal(0, run_sd, setup.size)
    )
    y += np.log(1.5) * (rng.random(setup.size) < disturbed)
    return pd.DataFrame(
        {"setup": setup, "side": np.array(["A", "B"])[side], "rep": rep, "ticks": np.exp(y)}
    )


def test_median_components_recover_the_layout_and_add_up_to_what_the_layouts_show():
    rng = np.random.default_rng(11)
    df = pairs(rng, 2000, 3, 0.02, 0.03, 0.05)
    c = levels.paired_ratio_components(df, "ticks")
    assert c.levels == ("setup", "pair") and c.units == (2000, 6000)
    assert math.sqrt(c.variances[0]) == pytest.approx(0.02, rel=0.15)
    assert c.variances[1] == pytest.approx(2 * 0.03**2, rel=0.1) and c.statistic == "median"
    # What the plan extrapolates from is what the layouts' B/A of pairs showed, exactly.
    seen = levels.layout_medians(levels.pair_log_ratios(df, "ticks", "setup"))["log_ratio"].var()
    assert c.variance((1, 3)) == pytest.approx(seen, rel=1e-9)


def test_the_median_plan_is_the_closed_form_from_recovered_components():
    """Layouts that cost 100 pairs: sqrt(c_L / c_p * var_pair / var_layout) pairs a layout."""
    rng = np.random.default_rng(12)
    c = levels.paired_ratio_components(pairs(rng, 3000, 4, 0.01, 0.03, 0.0), "ticks")
    p = repetitions.plan(c, (1.0, 0.01), 0.005)
    closed = math.sqrt(1.0 / 0.01 * math.pi / 2 * c.variances[1] / c.variances[0])
    assert p.optimum == pytest.approx((closed,))
    true = math.sqrt(100 * math.pi / 2 * 2 * 0.03**2 / 0.01**2)  # the same from the true ones
    assert closed == pytest.approx(true, rel=0.2)
    # The count is the integer optimum of the medians' own variance, near the closed form.
    cost = [(1.0 + 0.01 * n) * c.variance((1, n)) for n in range(1, 400)]
    assert p.counts[1] == 1 + int(np.argmin(cost)) and abs(p.counts[1] - closed) <= 0.1 * closed


@pytest.mark.parametrize("layouts", long_beyond([4, 10], {4}))
def test_the_mean_of_layouts_covers_the_true_ratio_at_its_rate_through_disturbed_runs(layouts):
    """Four layouts too: a bootstrap over them cannot reach beyond the four values."""
    rng = np.random.default_rng(13)
    hits = 0
    for _ in range(200):
        df = pairs(rng, layouts, 3, 0.01, 0.02, 0.03, disturbed=0.05)
        d = levels.layout_medians(levels.pair_log_ratios(df, "ticks", "setup"))["log_ratio"]
        _, lo, hi = trimmed_interval(d, 0.9)
        hits += lo < 0.03 < hi
    # 200 experiments at 90 %: 80-97 % holds with probability > 0.999 for a correct interval.
    assert 160 <= hits <= 194


def test_a_trimmed_mean_over_layouts_covers_through_wild_layouts_and_plans_from_its_variance():
    """A tenth of the layouts thrown +-30 % (a loaded machine's bursts): the 20 % trimmed mean
    keeps its rate, and trimmed_variance / n is its variance."""
    rng = np.random.default_rng(14)
    hits = 0
    for _ in range(200):
        d = 0.03 + rng.normal(0, 0.01, 20) + rng.choice([-0.3, 0.3], 20) * (rng.random(20) < 0.1)
        _, lo, hi = trimmed_interval(d, 0.9, trim=0.2)
        hits += lo < 0.03 < hi
    assert 160 <= hits <= 194
    x = 0.03 + rng.normal(0, 0.01, (4000, 20))
    assert trimmed_variance(x.ravel(), 0.2) / 20 == pytest.approx(
        np.var(trimmed_means(x, 0.2)), rel=0.1
    )


def spells(rng, layouts, n, run_sd, delta, slow=0.3, mean_run=12) -> pd.DataFrame:
    """A/B pairs run in time order, A or B first at random, through a host that now and then
    slows every run for a spell (geometric, mean_run runs long, `slow` longer), as this guest's
    host did: a spell that a layout's edge or middle cuts slows some runs of each side."""
    rows, spell = [], 0
    for setup in range(layouts):
        for rep in range(n):
            for side in "AB"[:: rng.choice([1, -1])]:
                spell = (
                    spell - 1 if spell else int(rng.random() < 0.04) * rng.geometric(1 / mean_run)
                )
                y = 10 + delta * (side == "B") + rng.normal(0, run_sd) + slow * (spell > 0)
                rows.append({"setup": setup, "side": side, "rep": rep, "ticks": np.exp(y)})
    return pd.DataFrame(rows)


@pytest.mark.long
def test_pairs_cancel_what_a_host_spell_does_to_both_of_their_runs():
    """A spell slows both runs of a pair alike; B/A of each side's medians follows it where it
    cut one side's runs, the median of the pairs' ratios does not: layouts of 4 pairs spread
    less, the runs' level is the pairs' own noise, and the interval over layouts keeps its rate."""
    rng = np.random.default_rng(15)
    df = spells(rng, 400, 4, 0.01, 0.03)
    paired = levels.layout_medians(levels.pair_log_ratios(df, "ticks", "setup"))["log_ratio"]
    medians = df.groupby(["setup", "side"])["ticks"].median().unstack()
    apart = np.log(medians["B"] / medians["A"])
    assert paired.std() < 0.7 * apart.std()
    c = levels.paired_ratio_components(df, "ticks")
    assert c.variances[1] == pytest.approx(2 * 0.01**2, rel=0.3)
    assert c.variance((1, 4)) == pytest.approx(paired.var(), rel=1e-9)
    hits = 0
    for _ in range(200):
        d = levels.layout_medians(
            levels.pair_log_ratios(spells(rng, 10, 4, 0.01, 0.03), "ticks", "setup")
        )["log_ratio"]
        _, lo, hi = trimmed_interval(d, 0.9)
        hits += lo < 0.03 < hi
    assert 160 <= hits <= 194


def _objective(var, costs, lower):
    q = np.cumprod([1, *lower])
    return float(np.sum(costs * q) * np.sum(var / q))


def _brute(var, costs, bound):
    """Every integer design below the outermost level up to bound, the best first."""
    grid = np.array(list(itertools.product(range(1, bound + 1), repeat=var.size - 1)))
    q = np.cumprod(np.hstack([np.ones((len(grid), 1)), grid]), axis=1)
    f = (q * costs).sum(axis=1) * (var / q).sum(axis=1)
    return float(f.min()), tuple(grid[np.argmin(f)])


@settings(max_examples=120, deadline=None)
@given(
    st.integers(1, 3).flatmap(
        lambda k: st.tuples(
            st.lists(st.floats(-9, -3), min_size=k + 1, max_size=k + 1),
            st.lists(st.floats(-4, 3), min_size=k + 1, max_size=k + 1),
        )
    ),
    st.booleans(),
    st.floats(0.002, 0.05),
)
def test_planned_counts_are_the_integer_optimum_and_the_fewest_outermost_units(
    logs, free_top, half_width
):
    var, costs = np.exp(logs[0]), np.exp(logs[1])
    if free_top:
        costs[0] = 0.0
    names = tuple(f"l{i}" for i in range(var.size))
    comp = levels.Components("log(x)", names, tuple(var), tuple(var), (1,) * var.size)
    p = repetitions.plan(comp, costs, half_width, confidence=0.95)
    bound = {2: 60, 3: 30, 4: 12}[var.size]
    lower = p.counts[1:]
    if max(lower) > bound // 2 or max(p.optimum) > bound // 2:
        return  # the optimum lies beyond what the brute force affords
    best, at = _brute(var, costs, bound)
    assert _objective(var, costs, lower) == pytest.approx(best, rel=1e-9), (lower, at)
    per_unit = comp.variance((1, *lower))

    def reaches(n: int) -> bool:
        return stats.t.ppf(0.975, n - 1) * math.sqrt(per_unit / n) <= math.log1p(half_width)

    top = p.counts[0]
    assert reaches(top) and (top == 2 or not reaches(top - 1))
    assert p.half_width <= half_width
    assert p.time == pytest.approx(
        sum(c * math.prod(p.counts[: i + 1]) for i, c in enumerate(costs))
    )


def test_the_closed_form_is_the_real_optimum():
    """r_i = sqrt(c_{i-1}/c_i * T_i^2 / T_{i-1}^2): no point of a fine grid does better."""
    var, costs = np.array([4e-4, 9e-4, 1e-4]), np.array([5.0, 0.2, 0.001])
    comp = levels.Components("log(x)", ("a", "b", "c"), tuple(var), tuple(var), (1, 1, 1))
    r = repetitions.plan(comp, costs, 0.01).optimum
    assert r == pytest.approx([math.sqrt(5 / 0.2 * 9 / 4), math.sqrt(0.2 / 0.001 * 1 / 9)])
    x, y = np.meshgrid(np.geomspace(1, 50, 400), np.geomspace(1, 50, 400))
    q = np.stack([np.ones_like(x), x, x * y], axis=-1)
    f = (q * costs).sum(-1) * (var / q).sum(-1)
    assert _objective(var, costs, r) <= f.min() * (1 + 1e-12)


def test_a_plan_beats_the_fixed_design_it_is_weighed_against():
    """Layouts dominate and cost little: many layouts of one run each, not 10 x 10."""
    comp = levels.Components("log(B/A)", ("layout", "run"), (8e-4, 1e-4), (8e-4, 1e-4), (1, 1))
    p = repetitions.plan(comp, (0.01, 1.0), 0.01)
    assert p.counts[1] == 1 and p.fixed.counts == (10, 10)
    assert p.half_width <= 0.01 < p.fixed.half_width and p.time < p.fixed.time
    same = repetitions.predict(comp, (0.01, 1.0), (10, 10))
    assert same == p.fixed and same.time == pytest.approx(10 * 0.01 + 100)


def test_a_variances_range_holds_the_true_one_at_its_rate():
    # A pilot's 10 layouts estimate their variance with 9 degrees of freedom: true/estimated
    # falls in the 90 % range 9 times in 10, whatever the true variance.
    low, high = repetitions.variance_ratio_range(9, 0.9)
    assert (low, high) == pytest.approx((0.5319, 2.7067), abs=1e-4)
    rng = np.random.default_rng(11)
    draws = rng.normal(0, 3.0, size=(20000, 10)).var(axis=1, ddof=1)
    inside = np.mean((9.0 / draws >= low) & (9.0 / draws <= high))
    assert 0.89 < inside < 0.91


def _t_exact(p: float, df: int) -> float:
    """Student's t quantile where it has a closed form: df 1 (Cauchy), 2 and 4 (Hill, 1970)."""
    if df == 1:
        return math.tan(math.pi * (p - 0.5))
    if df == 2:
        return (2 * p - 1) / math.sqrt(2 * p * (1 - p))
    a = 4 * p * (1 - p)
    q = math.cos(math.acos(math.sqrt(a)) / 3) / math.sqrt(a)
    return math.copysign(2 * math.sqrt(q - 1), p - 0.5)


def test_the_distributions_are_the_closed_forms_and_the_tables():
    """The t behind trimmed_interval, the chi-squared behind variance_ratio_range and the
    Kruskal-Wallis p of layouts_differ, on values known without scipy: closed forms to 1e-9
    (the hand-written series they replaced agreed with scipy to 2e-9 on df 1..200), printed
    tables (Abramowitz and Stegun 26.10, 26.8) to their four decimals."""

    def t_of(p: float, df: int) -> float:  # the t a trimmed_interval over df + 1 units used
        x = np.arange(df + 1.0) ** 1.5
        _, lo, hi = trimmed_interval(x, 2 * p - 1)
        return (hi - lo) / 2 / math.sqrt(np.var(x, ddof=1) / x.size)

    for df, p in itertools.product((1, 2, 4), (0.6, 0.9, 0.95, 0.975, 0.995, 0.9995)):
        assert t_of(p, df) == pytest.approx(_t_exact(p, df), rel=1e-9), (df, p)
    table = {(0.975, 3): 3.1824, (0.975, 10): 2.2281, (0.975, 30): 2.0423, (0.95, 9): 1.8331,
             (0.975, 120): 1.9799, (0.995, 20): 2.8453, (0.9, 60): 1.2958}  # fmt: skip
    for (p, df), t in table.items():
        assert t_of(p, df) == pytest.approx(t, abs=1e-4), (df, p)

    normal = NormalDist()
    for c in (0.5, 0.9, 0.95, 0.99):
        tail = (1 - c) / 2
        exact_1 = (1 / normal.inv_cdf(1 - tail / 2) ** 2, 1 / normal.inv_cdf(0.5 + tail / 2) ** 2)
        exact_2 = (1 / -math.log(tail), 1 / -math.log(1 - tail))  # chi2(2) is exponential
        assert repetitions.variance_ratio_range(1, c) == pytest.approx(exact_1, rel=1e-9)
        assert repetitions.variance_ratio_range(2, c) == pytest.approx(exact_2, rel=1e-9)
    table = {(9, 0.9): (3.3251, 16.9190), (30, 0.9): (18.4927, 43.7730),
             (100, 0.95): (74.2219, 129.5612), (200, 0.95): (162.7280, 241.0579)}  # fmt: skip
    for (df, c), (lo, hi) in table.items():
        assert repetitions.variance_ratio_range(df, c) == pytest.approx(
            (df / hi, df / lo), rel=1e-5
        )

    def layouts(*groups: list[float]) -> pd.Series:
        index = [(g, i) for g, values in enumerate(groups) for i in range(len(values))]
        return pd.Series([v for g in groups for v in g], index=pd.MultiIndex.from_tuples(index))

    # Three layouts, ranks 1-3, 4-6, 7-9: H = 12/90 (36 + 225 + 576)/3 - 30 = 7.2, and
    # chi-squared with 2 degrees of freedom has P(X > h) = exp(-h/2).
    assert levels.layouts_differ(layouts([1, 2, 3], [4, 5, 6], [7, 8, 9])) == pytest.approx(
        math.exp(-3.6), rel=1e-9
    )
    # Three 2s share rank 3: H = 1752/270, over the ties' correction 1 - 24/720.
    tied = layouts([1, 2, 2], [2, 5, 6], [7, 8, 9])
    assert levels.layouts_differ(tied) == pytest.approx(math.exp(-876 / 261), rel=1e-9)
    # Two layouts, ranks 1-4 against 5-8: H = 12/72 (100 + 676)/4 - 27 = 16/3, chi2(1) the
    # square of a normal.
    p = 2 * (1 - normal.cdf(math.sqrt(16 / 3)))
    assert levels.layouts_differ(layouts([1, 2, 3, 4], [5, 6, 7, 8])) == pytest.approx(p, rel=1e-9)
    assert levels.layouts_differ(layouts([3, 3], [3, 3, 3])) == 1.0


def runs_needed(spread: float, change: float, statistic: str = "mean") -> int:
    return int(repetitions.runs_for_spreads(np.array([spread]), change, 0.95, 0.8, statistic)[0])


def test_runs_needed_is_the_normal_approximation_and_has_its_power():
    s, change = 0.05, 0.02
    n = runs_needed(s, change)
    z = 1.959964 + 0.841621
    assert n == math.ceil(2 * z**2 * s**2 / math.log1p(change) ** 2) == 101
    rng = np.random.default_rng(9)
    a = rng.normal(0, s, (4000, n))
    b = rng.normal(math.log1p(change), s, (4000, n))
    se = np.sqrt((a.var(axis=1, ddof=1) + b.var(axis=1, ddof=1)) / n)
    power = np.mean(b.mean(axis=1) - a.mean(axis=1) > 1.959964 * se)
    assert power == pytest.approx(0.8, abs=0.03)
    half = rng.normal(0, s, (4000, n // 2)), rng.normal(math.log1p(change), s, (4000, n // 2))
    se = np.sqrt((half[0].var(axis=1, ddof=1) + half[1].var(axis=1, ddof=1)) / (n // 2))
    assert np.mean(half[1].mean(axis=1) - half[0].mean(axis=1) > 1.959964 * se) < 0.6
    medians = runs_needed(s, change, "median")
    assert medians == math.ceil(2 * z**2 * math.pi / 2 * s**2 / math.log1p(change) ** 2)


def test_what_cannot_be_estimated_is_one_line():
    df = pd.DataFrame({"setup": [0, 0, 1, 1], "rep": [0, 1, 0, 1], "ticks": [1.0, 2, 3, 4]})
    with pytest.raises(PerflabError, match="no column 'side'"):
        levels.paired_ratio_components(df, "ticks")
    with pytest.raises(PerflabError, match="no variance range"):
        repetitions.variance_ratio_range(0, 0.9)
    with pytest.raises(PerflabError, match="runs needed"):
        repetitions.runs_for_spreads(np.array([0.1]), 0.0, 0.95, 0.8)
    comp = levels.Components("log(x)", ("a", "b"), (1e-4, 1e-4), (1e-4, 1e-4), (1, 1))
    with pytest.raises(PerflabError, match="costs"):
        repetitions.plan(comp, (1.0, 0.0), 0.01)


def looped(rng, layouts, n, k, sds, delta, spiked=0.0, warm=0.0) -> pd.DataFrame:
    """compare's rows of runs that each ran k iterations of the repeat loop, made by the
    engine's own columns (spawn.iteration_columns) from drawn records: a layout effect on
    B/A (sds[0]), each run's (sds[1]) and each iteration's (sds[2]), B exp(delta) slower; a
    `spiked` share of iterations 1.4x long (what this guest's host does); a first iteration
    slower by `warm` on average and by as much again drawn per run (brotli's warms up)."""
    from perflab.running import spawn

    setup, side, rep = np.indices((layouts, 2, n)).reshape(3, -1)
    run = (
        12
        + delta * side
        + rng.normal(0, 0.05, layouts)[setup]
        + rng.normal(0, sds[0], layouts)[setup] * side
        + rng.normal(0, sds[1], setup.size)
    )
    y = run[:, None] + rng.normal(0, sds[2], (setup.size, k))
    y += np.log(1.4) * (rng.random(y.shape) < spiked)
    y[:, 0] += warm + rng.normal(0, warm, setup.size)
    runs = np.zeros(setup.size, dtype=spawn.RUN_DTYPE)
    runs["iteration_ticks"][:, :k] = np.exp(y).astype(np.uint64)
    runs["iterations"] = k
    runs["probe_ticks"] = runs["iteration_ticks"].sum(axis=1)
    runs["outer_ticks"] = runs["probe_ticks"] * 2
    runs["flags"] = spawn.bindings.RUN_HAS_PROBE
    tidy = spawn.tidy_columns(runs)
    return pd.DataFrame(
        {
            "setup": setup,
            "side": np.array(["A", "B"])[side],
            "rep": rep,
            **tidy,
            **spawn.iteration_columns(runs, tidy["ticks"]),
        }
    )


def piloted(rng, layouts, k, sds, delta, spiked=0.0, warm=0.0) -> pd.DataFrame:
    """A --precision pilot's rows: layouts of runs of k iterations, then half as many of one."""
    one = looped(rng, layouts // 2, 4, 1, sds, delta, spiked, warm)
    one["setup"] += layouts
    return pd.concat([looped(rng, layouts, 4, k, sds, delta, spiked, warm), one])


@pytest.mark.parametrize("k", [2, 8])
def test_iterations_are_a_third_level_recovered_from_runs_at_two_counts(k):
    """Each component is A's plus B's; the iterations' is per iteration, which a run's median
    of k divides by median_factor(k): measured from the pairs of runs of k iterations against
    those of one, as compare's --precision pilot runs them."""
    rng = np.random.default_rng(31 + k)
    df = piloted(rng, 1500, k, (0.01, 0.015, 0.03), 0.02)
    c = levels.paired_ratio_components(df, "ticks")
    assert c.levels == ("setup", "pair", "iteration") and c.units == (
        2250,
        9000,
        3000 * (4 * k + 2),
    )
    assert [n for n, _ in c.measured] == [1, k]
    assert math.sqrt(c.variances[0]) == pytest.approx(0.01, rel=0.25)
    assert math.sqrt(c.variances[1] / 2) == pytest.approx(0.015, rel=0.2)
    assert math.sqrt(c.variances[2] / 2) == pytest.approx(0.03, rel=0.15)
    # One count of iterations is no level: nothing tells what another would buy.
    assert levels.paired_ratio_components(df[df["iterations"] == k], "ticks").levels == (
        "setup",
        "pair",
    )


# Where what a plan reads at a count of iterations is what runs of so many show, and how
# closely: everywhere for normal iterations; for a first iteration that warms up, at the
# counts the pilot ran (1 and 8) and past them, the counts between read up to 1.5 times;
# where the host stretches one iteration in ten 1.4x, from the pilot's count up (at one,
# the pairs' robust spread misses what single stretched iterations do to a layout's median:
# 0.56 of it).
HOLDS = {
    "normal": ((0.0, 0.0), {1: 0.15, 2: 0.15, 4: 0.15, 8: 0.15, 16: 0.2}),
    "warm-up": ((0.0, 0.05), {1: 0.2, 8: 0.15, 16: 0.2}),
    "spiked": ((0.1, 0.0), {8: 0.15, 16: 0.2}),
}


@pytest.mark.parametrize("case", HOLDS)
def test_the_plan_reads_at_each_count_of_iterations_what_runs_of_so_many_show(case):
    """From a pilot of 8 iterations a run and of one, what B/A's layouts vary by at a count
    is what runs asked for so many show (HOLDS)."""
    (spiked, warm), within = HOLDS[case]
    sds = (0.01, 0.015, 0.03)
    rng = np.random.default_rng(47)
    c = levels.paired_ratio_components(piloted(rng, 1500, 8, sds, 0.02, spiked, warm), "ticks")
    for j, rel in within.items():
        runs = looped(rng, 1500, 4, j, sds, 0.02, spiked, warm)
        seen = levels.layout_medians(levels.pair_log_ratios(runs, "ticks", "setup"))[
            "log_ratio"
        ].var()
        assert c.variance((1, 4, j)) == pytest.approx(seen, rel=rel), j


def test_the_planned_iterations_and_pairs_are_the_integer_optimum_of_the_three_levels():
    """Kalibera and Jones's iterations a run, sqrt(c_run / c_it * T_it^2 / T_run^2) scaled by
    pi/2 for a run's median of its iterations, is where the integer counts land; those are
    the medians' own optimum: no count of pairs and iterations a brute force tries does
    better per layout."""
    comp = levels.Components("log(B/A)", ("setup", "pair", "iteration"), (1e-4, 4e-4, 2e-3),
                             (1e-4, 4e-4, 2e-3), (1, 1, 1), "median")  # fmt: skip
    costs = (0.5, 0.05, 0.01)
    p = repetitions.plan(comp, costs, 0.005, least=(10, 4, 1), most_inner=64)
    assert p.optimum[1] == pytest.approx(math.sqrt(0.05 / 0.01 * math.pi / 2 * 2e-3 / 4e-4))
    per_layout = [
        ((costs[0] + n * (costs[1] + r * costs[2])) * comp.variance((1, n, r)), n, r)
        for n in range(4, 200)
        for r in range(1, 65)
    ]
    best = min(per_layout)[0]
    planned = (costs[0] + p.counts[1] * (costs[1] + p.counts[2] * costs[2])) * comp.variance(
        (1, *p.counts[1:])
    )
    assert planned == pytest.approx(best, rel=1e-12) and abs(p.counts[2] - p.optimum[1]) < 3
    assert p.half_width <= 0.005 and p.time == pytest.approx(
        costs[0] * p.counts[0]
        + costs[1] * p.counts[0] * p.counts[1]
        + costs[2] * math.prod(p.counts)
    )
    capped = repetitions.plan(comp, (0.5, 50.0, 0.01), 0.005, least=(10, 4, 1), most_inner=64)
    assert capped.counts[2] == 64  # an expensive process asks for more than a run can report


@pytest.mark.long
def test_the_interval_over_layouts_covers_the_true_ratio_at_its_rate_with_iterations():
    rng = np.random.default_rng(33)
    hits = 0
    for _ in range(200):
        df = looped(rng, 10, 4, 6, (0.01, 0.01, 0.03), 0.03, spiked=0.1)
        d = levels.layout_medians(levels.pair_log_ratios(df, "ticks", "setup"))["log_ratio"]
        _, lo, hi = trimmed_interval(d, 0.9)
        hits += lo < 0.03 < hi
    # 200 experiments at 90 %: 80-97 % holds with probability > 0.999 for a correct interval.
    assert 160 <= hits <= 194


def test_scipy_loads_only_when_a_distribution_is_asked_for():
    """scipy.stats takes a second to import: the modules that use it, and compare over them,
    import it inside the functions, so neither `perflab --help` nor a verb's start waits; a
    median's interval, in every compare's summary, needs only scipy.special's binomial CDF."""
    code = (
        "import sys\nimport perflab.lab.compare.measure\n"
        "from perflab.analysis import levels, repetitions, stats, trimmed\n"
        "print('scipy' in sys.modules)\n"
        "stats.median_order_interval(range(20))\nprint('scipy.stats' in sys.modules)\n"
        "repetitions.variance_ratio_range(3, 0.9)\nprint('scipy.stats' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["False", "False", "True"]
