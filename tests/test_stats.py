"""Statistics against data with a known truth."""

import numpy as np
import pytest

from perflab.analysis import stats
from perflab.errors import PerflabError


def test_summary_of_known_values():
    s = stats.summary([1, 2, 3, 4, 100], trim=1)
    assert (s["n"], s["min"], s["max"], s["median"]) == (5, 1, 100, 3)
    assert s["mad"] == 1
    assert (s["trimmed_min"], s["trimmed_max"], s["trimmed_mean"]) == (2, 4, 3)


def test_trimmed_drops_exactly_k_from_each_end():
    x = np.arange(100)
    t = stats.trimmed(np.random.default_rng(1).permutation(x), 10)
    assert t.size == 80 and t[0] == 10 and t[-1] == 89
    with pytest.raises(PerflabError):
        stats.trimmed([1, 2, 3], 2)


def test_ratio_bootstrap_interval_sees_a_doubling_and_no_change():
    rng = np.random.default_rng(3)
    a = rng.normal(100, 5, 300)
    ratio, lo, hi = stats.ratio_bootstrap_interval(a, rng.normal(200, 10, 300))
    assert 1.9 < lo < ratio < hi < 2.1
    _, lo, hi = stats.ratio_bootstrap_interval(a, rng.normal(100, 5, 300))
    assert lo < 1.0 < hi


def test_describe_groups():
    import pandas as pd

    df = pd.DataFrame({"g": [1, 1, 2, 2], "v": [1.0, 3.0, 10.0, 30.0]})
    d = stats.describe(df, "g", "v")
    assert list(d["g"]) == [1, 2] and list(d["median"]) == [2.0, 20.0]


def test_spearman_shares_ranks_between_ties():
    assert stats.spearman([1, 2, 3, 4], [10, 20, 30, 45]) == pytest.approx(1.0)
    assert stats.spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    # x ranks 1, 2.5, 2.5, 4 against y ranks 1, 3, 2, 4: Pearson gives sqrt(0.9)
    assert stats.spearman([1, 2, 2, 3], [1, 3, 2, 4]) == pytest.approx(0.9**0.5)
    assert np.isnan(stats.spearman([5, 5, 5], [1, 2, 3]))
    # a pair with a nan on either side drops out whole
    assert stats.spearman([1, np.nan, 2, 3], [3, 1, 2, 4]) == pytest.approx(0.5)


def _quantized_twins(rng, step, calls, n):
    """Per-call values of two identical workloads timed by a counter with this step: ~800
    ticks per call, small noise, each run's start at a random phase of the step."""
    true = rng.normal(800 * calls, 3, size=(2, n)) + rng.exponential(20, size=(2, n))
    phase = rng.uniform(0, step, size=(2, n))
    ticks = np.floor((phase + true) / step) * step - np.floor(phase / step) * step
    return ticks / calls


@pytest.mark.parametrize("step", [1, 20, 100])
def test_identical_quantized_samples_keep_the_error_rate(step):
    # Truth known: both sides have one distribution. 400 trials at 90 %: a correct interval
    # excludes 1 at most 10 % of the time; the bound below is the binomial 99.9 % tail.
    rng = np.random.default_rng(step)
    claims = 0
    for _ in range(400):
        a, b = _quantized_twins(rng, step, calls=32, n=40)
        _, lo, hi = stats.ratio_order_interval(a, b, 0.9, (step / 32, step / 32))
        assert hi - lo > 0
        claims += not lo <= 1 <= hi
    assert claims <= 58


def test_a_one_step_gap_between_tied_medians_decides_nothing():
    # All ties, the sides one 20-tick step apart (per call 20/32): the bootstrap collapses to
    # a point and excludes 1; the interval that knows the step does not.
    a = np.full(60, 25_600 / 32)
    b = np.full(60, 25_620 / 32)
    _, lo, hi = stats.ratio_bootstrap_interval(a, b, 0.99)
    assert lo == hi != 1.0
    _, lo, hi = stats.ratio_order_interval(a, b, 0.99, (20 / 32, 20 / 32))
    assert lo < 1 < hi


@pytest.mark.parametrize("step", [1, 20, 100])
def test_a_real_ten_percent_difference_is_seen_through_the_step(step):
    rng = np.random.default_rng(10 + step)
    a, _ = _quantized_twins(rng, step, calls=32, n=80)
    b = _quantized_twins(rng, step, calls=32, n=80)[1] * 1.1
    ratio, lo, hi = stats.ratio_order_interval(a, b, 0.99, (step / 32, step / 32))
    assert 1.0 < lo <= ratio <= hi and abs(ratio - 1.1) < 0.02


def test_median_interval_covers_with_ties_and_refuses_tiny_samples():
    med, lo, hi = stats.median_order_interval([5.0] * 30, 0.95, 1.0)
    assert (med, lo, hi) == (5.0, 4.0, 6.0)
    assert stats.median_order_interval([1.0, 2.0, 3.0], 0.99) == (2.0, -np.inf, np.inf)


@pytest.mark.parametrize(("step", "odd"), [(1, 0), (20, 0), (100, 1)])
def test_quantum_finds_the_step_despite_a_stray_read(step, odd):
    rng = np.random.default_rng(step)
    deltas = step * rng.integers(2, 9, 5000)
    deltas[:odd] = 7  # one read off the grid (a migration) must not hide the step
    assert stats.quantum(deltas) == step
    assert stats.quantum(np.zeros(10)) == 0


def test_median_rank_is_the_exact_binomial_rank():
    """The order-statistic rank from scipy's binomial matches exact rational arithmetic: the
    largest l with P(X <= l - 1) <= alpha/2 for X ~ Binomial(n, 1/2), counted with math.comb."""
    from fractions import Fraction
    from math import comb

    for level in (0.9, 0.95, 0.99, 1 - 0.05 / 12):
        half_alpha = (1 - Fraction(level)) / 2
        for n in range(1, 160):
            cdf, exact = Fraction(0), 0
            for k in range(n + 1):
                cdf += Fraction(comb(n, k), 2**n)
                if cdf > half_alpha:
                    break
                exact = k + 1
            assert stats.median_rank(n, level) == exact, (n, level)
    assert stats.median_rank(5, 0.95) == 0 and stats.median_rank(6, 0.95) == 1
    assert stats.median_rank(20, 0.95) == 6
