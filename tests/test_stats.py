"""Statistics against data with a known truth."""

import numpy as np
import pytest

from perflab import stats
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


def test_median_ci_covers_the_true_median():
    x = np.random.default_rng(2).normal(50, 5, 400)
    med, lo, hi = stats.median_ci(x)
    assert lo < 50 < hi and lo <= med <= hi


def test_ratio_ci_sees_a_doubling_and_no_change():
    rng = np.random.default_rng(3)
    a = rng.normal(100, 5, 300)
    ratio, lo, hi = stats.ratio_ci(a, rng.normal(200, 10, 300))
    assert 1.9 < lo < ratio < hi < 2.1
    _, lo, hi = stats.ratio_ci(a, rng.normal(100, 5, 300))
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
