"""Variance by level, planned repetition and hierarchical intervals, against synthetic data
drawn with known components (Kalibera and Jones, ISMM 2013)."""

import itertools
import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perflab.analysis import levels
from perflab.errors import PerflabError


def nested(rng, sds, counts, unbalanced=False) -> pd.DataFrame:
    """Rows of exp(10 + setup + process + iteration effects), each effect normal with its sd;
    counts per level (unbalanced: each unit holds 1..2n-1 of the level below)."""
    recs = []
    for s in range(counts[0]):
        a = rng.normal(0, sds[0])
        for p in range(rng.integers(1, 2 * counts[1]) if unbalanced else counts[1]):
            b = rng.normal(0, sds[1])
            k = rng.integers(1, 2 * counts[2]) if unbalanced else counts[2]
            recs += [(s, p, math.exp(10 + a + b + e)) for e in rng.normal(0, sds[2], k)]
    return pd.DataFrame(recs, columns=["setup", "process", "ticks"])


def interleaved(rng, layouts, procs, iters, sds, delta) -> pd.DataFrame:
    """A and B in each layout: a layout effect both share, one that moves B/A (sds[0], per
    side), then processes and iterations; B is exp(delta) slower over all layouts."""
    shape = (layouts, 2, procs, iters)
    setup, side, proc, _ = np.indices(shape).reshape(4, -1)
    shared = rng.normal(0, 0.05, layouts)[setup]
    moved = rng.normal(0, sds[0], (layouts, 2))[setup, side]
    process = rng.normal(0, sds[1], (layouts, 2, procs))[setup, side, proc]
    y = 10 + delta * side + shared + moved + process + rng.normal(0, sds[2], setup.size)
    return pd.DataFrame(
        {"setup": setup, "side": np.array(["A", "B"])[side], "process": proc, "ticks": np.exp(y)}
    )


def test_components_recover_the_true_ones_on_a_large_unbalanced_design():
    rng = np.random.default_rng(1)
    df = nested(rng, (0.05, 0.02, 0.01), (300, 8, 8), unbalanced=True)
    c = levels.components(df, "ticks", ["setup", "process"], row="iteration")
    assert c.levels == ("setup", "process", "iteration") and c.of == "log(ticks)"
    assert c.units[0] == 300 and c.units[-1] == len(df)
    assert np.sqrt(c.variances) == pytest.approx([0.05, 0.02, 0.01], rel=0.1)
    assert sum(c.shares().values()) == pytest.approx(1)
    assert c.describe().startswith("variance of log(ticks) by level: setup 8")


def test_moment_estimates_are_unbiased_on_small_unbalanced_designs():
    rng = np.random.default_rng(2)
    est = []
    for _ in range(300):
        df = nested(rng, (0.3, 0.2, 0.1), (6, 3, 3), unbalanced=True)
        try:
            est.append(levels.components(df, "ticks", ["setup", "process"]).estimates)
        except PerflabError:  # a draw with one process everywhere: nothing to tell apart
            continue
    assert len(est) > 250
    mean, err = np.mean(est, axis=0), np.std(est, axis=0) / math.sqrt(len(est))
    assert np.all(np.abs(mean - [0.09, 0.04, 0.01]) < 4 * err), (mean, err)


def test_balanced_designs_give_kalibera_and_jones_t_squared():
    """Their S_1^2 is the mean variance within processes, S_i^2 the variance of the means one
    level down; T_1^2 = S_1^2 and T_i^2 = S_i^2 - S_{i-1}^2 / n_{i-1}."""
    rng = np.random.default_rng(3)
    df = nested(rng, (0.04, 0.03, 0.02), (7, 5, 4))
    y = np.log(df["ticks"]).to_numpy().reshape(7, 5, 4)
    s1 = y.var(axis=2, ddof=1).mean()
    s2 = y.mean(axis=2).var(axis=1, ddof=1).mean()
    s3 = y.mean(axis=(1, 2)).var(ddof=1)
    t = [s3 - s2 / 5, s2 - s1 / 4, s1]
    assert levels.components(df, "ticks", ["setup", "process"]).estimates == pytest.approx(t)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.lists(st.integers(1, 5), min_size=1, max_size=4), min_size=2, max_size=6),
    st.integers(0, 2**32 - 1),
    st.floats(1e-3, 1e3),
)
def test_shares_sum_to_one_and_a_unit_change_moves_nothing(shape, seed, scale):
    """Any nesting with variance at some level; ticks and microseconds have the same spread."""
    rng = np.random.default_rng(seed)
    rows = [(s, p) for s, procs in enumerate(shape) for p, k in enumerate(procs) for _ in range(k)]
    df = pd.DataFrame(rows, columns=["setup", "process"]).assign(
        ticks=np.exp(rng.normal(0, 0.1, len(rows)))
    )
    try:
        c = levels.components(df, "ticks", ["setup", "process"])
    except PerflabError as exc:
        assert "holds one" in str(exc)
        return
    assert sum(c.shares().values()) == pytest.approx(1) and min(c.variances) >= 0
    scaled = levels.components(df.assign(ticks=df["ticks"] * scale), "ticks", ["setup", "process"])
    assert scaled.estimates == pytest.approx(c.estimates, abs=1e-12)


def test_ratio_components_keep_what_moves_b_over_a_and_drop_what_moves_both():
    rng = np.random.default_rng(4)
    df = interleaved(rng, 300, 6, 5, (0.02, 0.01, 0.005), 0.05)
    c = levels.ratio_components(df, "ticks", ["setup", "process"], row="iteration")
    assert c.of == "log(B/A) of ticks" and c.levels == ("setup", "process", "iteration")
    # Each component is A's plus B's: twice the per-side variance drawn.
    assert np.sqrt(np.array(c.variances) / 2) == pytest.approx([0.02, 0.01, 0.005], rel=0.12)
    assert c.shares()["setup"] == pytest.approx(4 / 5.25, abs=0.06)


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
    seen = levels.paired_ratios(df, "ticks", "setup")["log_ratio"].var()
    assert c.variance((1, 3)) == pytest.approx(seen, rel=1e-9)


def test_the_median_plan_is_the_closed_form_from_recovered_components():
    """Layouts that cost 100 pairs: sqrt(c_L / c_p * var_pair / var_layout) pairs a layout."""
    rng = np.random.default_rng(12)
    c = levels.paired_ratio_components(pairs(rng, 3000, 4, 0.01, 0.03, 0.0), "ticks")
    p = levels.plan(c, (1.0, 0.01), 0.005)
    closed = math.sqrt(1.0 / 0.01 * math.pi / 2 * c.variances[1] / c.variances[0])
    assert p.optimum == pytest.approx((closed,))
    true = math.sqrt(100 * math.pi / 2 * 2 * 0.03**2 / 0.01**2)  # the same from the true ones
    assert closed == pytest.approx(true, rel=0.2)
    # The count is the integer optimum of the medians' own variance, near the closed form.
    cost = [(1.0 + 0.01 * n) * c.variance((1, n)) for n in range(1, 400)]
    assert p.counts[1] == 1 + int(np.argmin(cost)) and abs(p.counts[1] - closed) <= 0.1 * closed


@pytest.mark.parametrize("layouts", [4, 10])
def test_the_mean_of_layouts_covers_the_true_ratio_at_its_rate_through_disturbed_runs(layouts):
    """Four layouts too: a bootstrap over them cannot reach beyond the four values."""
    rng = np.random.default_rng(13)
    hits = 0
    for _ in range(200):
        df = pairs(rng, layouts, 3, 0.01, 0.02, 0.03, disturbed=0.05)
        d = levels.paired_ratios(df, "ticks", "setup")["log_ratio"]
        _, lo, hi = levels.trimmed_interval(d, 0.9)
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
        _, lo, hi = levels.trimmed_interval(d, 0.9, trim=0.2)
        hits += lo < 0.03 < hi
    assert 160 <= hits <= 194
    x = 0.03 + rng.normal(0, 0.01, (4000, 20))
    assert levels.trimmed_variance(x.ravel(), 0.2) / 20 == pytest.approx(
        np.var(levels.trimmed_means(x, 0.2)), rel=0.1
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


def test_pairs_cancel_what_a_host_spell_does_to_both_of_their_runs():
    """A spell slows both runs of a pair alike; B/A of each side's medians follows it where it
    cut one side's runs, the median of the pairs' ratios does not: layouts of 4 pairs spread
    less, the runs' level is the pairs' own noise, and the interval over layouts keeps its rate."""
    rng = np.random.default_rng(15)
    df = spells(rng, 400, 4, 0.01, 0.03)
    paired = levels.paired_ratios(df, "ticks", "setup")["log_ratio"]
    medians = df.groupby(["setup", "side"])["ticks"].median().unstack()
    apart = np.log(medians["B"] / medians["A"])
    assert paired.std() < 0.7 * apart.std()
    c = levels.paired_ratio_components(df, "ticks")
    assert c.variances[1] == pytest.approx(2 * 0.01**2, rel=0.3)
    assert c.variance((1, 4)) == pytest.approx(paired.var(), rel=1e-9)
    hits = 0
    for _ in range(200):
        d = levels.paired_ratios(spells(rng, 10, 4, 0.01, 0.03), "ticks", "setup")["log_ratio"]
        _, lo, hi = levels.trimmed_interval(d, 0.9)
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
    p = levels.plan(comp, costs, half_width, confidence=0.95)
    bound = {2: 60, 3: 30, 4: 12}[var.size]
    lower = p.counts[1:]
    if max(lower) > bound // 2 or max(p.optimum) > bound // 2:
        return  # the optimum lies beyond what the brute force affords
    best, at = _brute(var, costs, bound)
    assert _objective(var, costs, lower) == pytest.approx(best, rel=1e-9), (lower, at)
    per_unit = comp.variance((1, *lower))

    def reaches(n: int) -> bool:
        return levels.t_quantile(0.975, n - 1) * math.sqrt(per_unit / n) <= math.log1p(half_width)

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
    r = levels.plan(comp, costs, 0.01).optimum
    assert r == pytest.approx([math.sqrt(5 / 0.2 * 9 / 4), math.sqrt(0.2 / 0.001 * 1 / 9)])
    x, y = np.meshgrid(np.geomspace(1, 50, 400), np.geomspace(1, 50, 400))
    q = np.stack([np.ones_like(x), x, x * y], axis=-1)
    f = (q * costs).sum(-1) * (var / q).sum(-1)
    assert _objective(var, costs, r) <= f.min() * (1 + 1e-12)


def test_a_plan_beats_the_fixed_design_it_is_weighed_against():
    """Layouts dominate and cost little: many layouts of one run each, not 10 x 10."""
    comp = levels.Components("log(B/A)", ("layout", "run"), (8e-4, 1e-4), (8e-4, 1e-4), (1, 1))
    p = levels.plan(comp, (0.01, 1.0), 0.01)
    assert p.counts[1] == 1 and p.fixed.counts == (10, 10)
    assert p.half_width <= 0.01 < p.fixed.half_width and p.time < p.fixed.time
    same = levels.predict(comp, (0.01, 1.0), (10, 10))
    assert same == p.fixed and same.time == pytest.approx(10 * 0.01 + 100)


def test_t_quantiles_are_the_tables():
    table = {1: 12.7062, 2: 4.3027, 3: 3.1824, 5: 2.5706, 10: 2.2281, 30: 2.0423, 120: 1.9799}
    for df, t in table.items():
        assert levels.t_quantile(0.975, df) == pytest.approx(t, abs=1e-4)
    assert levels.t_quantile(0.95, 9) == pytest.approx(1.8331, abs=1e-4)
    assert levels.t_quantile(0.975, 1000) == pytest.approx(1.9623, abs=1e-4)
    assert levels.t_quantile(0.025, 4) == pytest.approx(-2.7764, abs=1e-4)


def test_chi2_quantiles_are_the_tables():
    table = {(0.05, 9): 3.3251, (0.95, 9): 16.9190, (0.95, 1): 3.8415, (0.05, 30): 18.4927,
             (0.99, 2): 9.2103, (0.5, 100): 99.3341, (0.975, 200): 241.0579}  # fmt: skip
    for (p, df), x in table.items():
        assert levels.chi2_quantile(p, df) == pytest.approx(x, abs=1e-4)
    with pytest.raises(PerflabError, match="no chi-squared quantile"):
        levels.chi2_quantile(1.0, 9)


def test_a_variances_range_holds_the_true_one_at_its_rate():
    # A pilot's 10 layouts estimate their variance with 9 degrees of freedom: true/estimated
    # falls in the 90 % range 9 times in 10, whatever the true variance.
    low, high = levels.variance_ratio_range(9, 0.9)
    assert (low, high) == pytest.approx((0.5319, 2.7067), abs=1e-4)
    rng = np.random.default_rng(11)
    draws = rng.normal(0, 3.0, size=(20000, 10)).var(axis=1, ddof=1)
    inside = np.mean((9.0 / draws >= low) & (9.0 / draws <= high))
    assert 0.89 < inside < 0.91


def test_the_hierarchical_interval_covers_the_true_ratio_at_its_rate():
    rng = np.random.default_rng(7)
    hits = 0
    for k in range(200):
        df = interleaved(rng, 10, 4, 3, (0.02, 0.01, 0.005), 0.05)
        r = levels.ratio_interval(df, "ticks", ["setup", "process"], confidence=0.9, n_boot=1000,
                                  seed=k)  # fmt: skip
        hits += r.low < math.exp(0.05) < r.high
    # 200 experiments at 90 %: 80-97 % holds with probability > 0.999 for a correct interval.
    assert 160 <= hits <= 194
    assert r.covers == ("setup", "process", "row") and r.resampled == "setup" and r.units == 10
    assert len(r.per_unit) == 10 and r.ratio == pytest.approx(np.exp(np.log(r.per_unit).mean()))


def test_one_layout_gives_an_interval_that_says_it_covers_no_layout():
    rng = np.random.default_rng(8)
    df = interleaved(rng, 1, 8, 3, (0.02, 0.01, 0.005), 0.05)
    r = levels.ratio_interval(df, "ticks", ["setup", "process"], row="iteration")
    assert r.covers == ("process", "iteration") and r.units == 8 and r.low < r.ratio < r.high
    runs = interleaved(rng, 1, 1, 9, (0.02, 0.01, 0.005), 0.05)
    r = levels.ratio_interval(runs, "ticks", ["setup", "process"], row="iteration")
    assert r.covers == ("iteration",)


def test_runs_needed_is_the_normal_approximation_and_has_its_power():
    s, change = 0.05, 0.02
    n = levels.runs_needed(spread=s, change=change)
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
    values = np.exp(rng.normal(3, s, 5000))
    assert levels.runs_needed(values, values * 1.01, change=change) == pytest.approx(n, rel=0.06)
    medians = levels.runs_needed(spread=s, change=change, statistic="median")
    assert medians == math.ceil(2 * z**2 * math.pi / 2 * s**2 / math.log1p(change) ** 2)


def test_what_cannot_be_estimated_is_one_line():
    df = pd.DataFrame({"setup": [0, 0, 1, 1], "process": [0, 1, 2, 3], "ticks": [1.0, 2, 3, 4]})
    with pytest.raises(PerflabError, match="each setup holds one process"):
        levels.components(df.assign(process=df["setup"]), "ticks", ["setup", "process"])
    with pytest.raises(PerflabError, match="the data holds one setup"):
        levels.components(df.assign(setup=0), "ticks", ["setup"])
    with pytest.raises(PerflabError, match="<= 0"):
        levels.components(df.assign(ticks=df["ticks"] - 2), "ticks", ["setup"])
    with pytest.raises(PerflabError, match="no column 'layout'"):
        levels.components(df, "ticks", ["layout"])
    with pytest.raises(PerflabError, match="no column 'side'"):
        levels.ratio_interval(df, "ticks", ["setup"])
    with pytest.raises(PerflabError, match="one of them"):
        levels.runs_needed([1.0, 2.0], spread=0.1)
    comp = levels.Components("log(x)", ("a", "b"), (1e-4, 1e-4), (1e-4, 1e-4), (1, 1))
    with pytest.raises(PerflabError, match="costs"):
        levels.plan(comp, (1.0, 0.0), 0.01)


def looped(rng, layouts, n, k, sds, delta, spiked=0.0, warm=0.0) -> pd.DataFrame:
    """compare's rows of runs that each ran k iterations of the repeat loop, made by the
    engine's own columns (spawn.iteration_columns) from drawn records: a layout effect on
    B/A (sds[0]), each run's (sds[1]) and each iteration's (sds[2]), B exp(delta) slower; a
    `spiked` share of iterations 1.4x long (what this guest's host does); a first iteration
    slower by `warm` on average and by as much again drawn per run (brotli's warms up)."""
    from perflab.engine import spawn

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
        seen = levels.paired_ratios(runs, "ticks", "setup")["log_ratio"].var()
        assert c.variance((1, 4, j)) == pytest.approx(seen, rel=rel), j


def test_the_planned_iterations_and_pairs_are_the_integer_optimum_of_the_three_levels():
    """Kalibera and Jones's iterations a run, sqrt(c_run / c_it * T_it^2 / T_run^2) scaled by
    pi/2 for a run's median of its iterations, is where the integer counts land; those are
    the medians' own optimum: no count of pairs and iterations a brute force tries does
    better per layout."""
    comp = levels.Components("log(B/A)", ("setup", "pair", "iteration"), (1e-4, 4e-4, 2e-3),
                             (1e-4, 4e-4, 2e-3), (1, 1, 1), "median")  # fmt: skip
    costs = (0.5, 0.05, 0.01)
    p = levels.plan(comp, costs, 0.005, least=(10, 4, 1), most_inner=64)
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
    capped = levels.plan(comp, (0.5, 50.0, 0.01), 0.005, least=(10, 4, 1), most_inner=64)
    assert capped.counts[2] == 64  # an expensive process asks for more than a run can report


def test_the_interval_over_layouts_covers_the_true_ratio_at_its_rate_with_iterations():
    rng = np.random.default_rng(33)
    hits = 0
    for _ in range(200):
        df = looped(rng, 10, 4, 6, (0.01, 0.01, 0.03), 0.03, spiked=0.1)
        d = levels.paired_ratios(df, "ticks", "setup")["log_ratio"]
        _, lo, hi = levels.trimmed_interval(d, 0.9)
        hits += lo < 0.03 < hi
    # 200 experiments at 90 %: 80-97 % holds with probability > 0.999 for a correct interval.
    assert 160 <= hits <= 194
