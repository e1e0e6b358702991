"""Warm-up classification against the shapes built into synthetic series and against
softdevteam/warmup_stats' own rules, transcribed below from its source at commit 41212e0
(github.com/softdevteam/warmup_stats), applied to the same outliers and change points."""

import itertools
import math
from collections import Counter

import numpy as np
import pytest

from perflab.analysis import warmup
from perflab.analysis.warmup_plot import plot_executions
from perflab.analysis.warmup_shapes import NOISES, SHAPES, shaped
from perflab.core.bindings import pelt_meanvar
from perflab.errors import PerflabError

SEEDS = 20  # per shape and noise: 300 series of 2,000 iterations


# ---- warmup_stats, transcribed (Python 2's integer `/` as `//`, xrange as range) ----------


def ws_clamp_window_size(index, data_size, window_size=200):
    """warmup/outliers.py lines 9-24, _clamp_window_size."""
    half_window = window_size // 2
    lh_index = 0 if (index - half_window) < 0 else index - half_window
    rh_index = data_size if (index + half_window) > data_size else index + half_window
    return (lh_index, rh_index)


def ws_median(data):
    """warmup/outliers.py, median."""
    size = len(data)
    if size == 1:
        return data[0]
    index = (size - 1) // 2
    if size % 2 == 1:
        return data[index]
    return (data[index] + data[index + 1]) / 2.0


def ws_percentile(data, pc):
    """warmup/outliers.py lines 104-123, percentile."""
    size = len(data)
    if size == 1:
        return data[0]
    index = (size - 1) * (pc / 100.0)
    index_floor = math.floor(index)
    index_ceil = math.ceil(index)
    if index_floor == index_ceil:
        return data[int(index)]
    d0 = data[int(index_floor)] * (index_ceil - index)
    d1 = data[int(index_ceil)] * (index - index_floor)
    return d0 + d1


def ws_tukey_all_outliers(data, window_size):
    """warmup/outliers.py lines 40-57, _tukey_all_outliers."""
    all_outliers = []
    size = len(data)
    for index, datum in enumerate(data):
        l_slice, r_slice = ws_clamp_window_size(index, size, window_size)
        if l_slice == 0 and r_slice < window_size:
            continue
        window_sorted = sorted(data[l_slice:r_slice])
        window_median = ws_median(window_sorted)
        pc_band = 3 * (ws_percentile(window_sorted, 90.0) - ws_percentile(window_sorted, 10.0))
        if datum > (window_median + pc_band) or datum < (window_median - pc_band):
            all_outliers.append(index)
    return all_outliers


def ws_get_absolute_delta(delta, seg_time):
    """warmup/statistics.py lines 38-53, get_absolute_delta(_using_fastest_seg)."""
    try:
        return float(delta)
    except ValueError:
        assert delta.endswith("%")
        return seg_time * (float(delta[:-1]) / 100)


class WsSegment:
    """bin/mark_changepoints_in_json, Segment."""

    def __init__(self, start, end, mean, variance):
        self.start, self.end, self.mean, self.variance = start, end, mean, variance


def ws_segments(length, cpts, means, variances):
    """bin/mark_changepoints_in_json lines 56-92, Segments.__init__ (the segments only)."""
    segments = []
    if len(means) == 1:
        return [WsSegment(0, length - 1, means[0], variances[0])]
    for index in range(len(means)):
        if index == 0:
            segments.append(WsSegment(0, cpts[index], means[index], variances[index]))
        else:
            segments.append(WsSegment(cpts[index - 1], cpts[index], means[index], variances[index]))
    assert cpts[:-1] == [s.end for s in segments][:-1]
    return segments


def ws_get_classification(segments, length, steady_state, delta):
    """bin/mark_changepoints_in_json lines 111-140, get_classification (raw_deltas off)."""
    last_segment = segments[-1]
    delta = ws_get_absolute_delta(delta, min(s.mean for s in segments))
    lower_bound = min(last_segment.mean - last_segment.variance, last_segment.mean - delta)
    upper_bound = max(last_segment.mean + last_segment.variance, last_segment.mean + delta)
    classification = "flat"
    for index in range(len(segments) - 2, -1, -1):
        current_segment = segments[index]
        if (
            current_segment.mean + current_segment.variance >= lower_bound
            and current_segment.mean - current_segment.variance <= upper_bound
        ):
            continue
        elif current_segment.end > (length - steady_state):
            classification = "no steady state"
            break
        elif current_segment.mean - current_segment.variance < lower_bound:
            classification = "slowdown"
            break
        assert current_segment.mean + current_segment.variance > upper_bound
        classification = "warmup"
    return classification


def ws_steady_iter(cpts_out, means, variances, classification, delta):
    """warmup/summary_statistics.py lines 103-152: the walk back over segments equivalent to
    the last, and the steady iteration it reports (1 for a flat execution)."""
    abs_delta = ws_get_absolute_delta(delta, min(means))
    first_steady_segment = len(means) - 1
    lower_bound = min(means[-1] - variances[-1], means[-1] - abs_delta)
    upper_bound = max(means[-1] + variances[-1], means[-1] + abs_delta)
    for index in range(len(means) - 2, -1, -1):
        if (
            means[index] + variances[index] >= lower_bound
            and means[index] - variances[index] <= upper_bound
        ):
            first_steady_segment -= 1
        else:
            break
    if classification != "flat":
        return cpts_out[first_steady_segment - 1] + 1
    return 1


def ws_category(categories):
    """warmup/summary_statistics.py lines 154-161."""
    categories_set = set(categories)
    if len(categories_set) == 1:
        return categories[0]
    if categories_set == {"flat", "warmup"}:
        return "good inconsistent"
    return "bad inconsistent"


def warmup_stats(
    x: np.ndarray, outliers: list[int], ends_kept: list[int]
) -> tuple[str, int | None]:
    """warmup_stats' class and steady iteration for a series, given its outliers and the change
    points cpt.meanvar returned on it without them (`ends_kept`, as R's cpts: each segment's
    last index counted from 1). Its means and variances are R's param.est (mean and var() of
    each segment); each variance enters as its square root, perflab's one change to the
    rules."""
    data = list(x)
    length = len(data)
    out = set(outliers)
    p_exec = [v for i, v in enumerate(data) if i not in out]
    # bin/mark_changepoints_in_json lines 193-209, get_segments: indices back on the data
    c_points = [int(cpoint - 1) for cpoint in ends_kept]
    for outlier in outliers:
        for index in range(len(c_points)):
            if c_points[index] >= outlier:
                c_points[index] += 1
    bounds = [0, *ends_kept]
    pieces = [np.array(p_exec[a:b]) for a, b in itertools.pairwise(bounds)]
    means = [float(p.mean()) for p in pieces]
    spreads = [float(np.sqrt(p.var(ddof=1))) for p in pieces]
    segments = ws_segments(length, c_points, means, spreads)
    steady = int(length * warmup.STEADY_SHARE)
    cls = ws_get_classification(segments, length, steady, f"{warmup.DELTA * 100}%")
    if cls == "no steady state":
        return cls, None
    return cls, ws_steady_iter(c_points[:-1], means, spreads, cls, f"{warmup.DELTA * 100}%")


# ---- the corpus ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def corpus():
    """Every shape with every noise, SEEDS series each, classified all at once."""
    built = [
        (shape, noise, shaped(shape, noise, seed=1000 * i + k))
        for i, (shape, noise) in enumerate((s, n) for s in SHAPES for n in NOISES)
        for k in range(SEEDS)
    ]
    result = warmup.classify_executions([x for _, _, x in built])
    return [(s, n, x, e) for (s, n, x), e in zip(built, result.executions, strict=True)]


def test_agrees_with_the_shape_built(corpus):
    """95 % or more of the series get the class their shape was built with; the confusion
    table is printed (pytest -s) for the record."""
    table = Counter((shape, e.classification) for shape, _, _, e in corpus)
    print("\nbuilt shape -> class: count")
    for (shape, cls), count in sorted(table.items()):
        print(f"  {shape:15} -> {cls:16} {count}")
    right = sum(SHAPES[shape] == e.classification for shape, _, _, e in corpus)
    assert right / len(corpus) >= 0.95, table


def test_agrees_with_warmup_stats_rules_on_every_series(corpus):
    """warmup_stats' transcribed rules, given the outliers and change points perflab found (in
    the kept iterations, as cpt.meanvar returns them; the outliers are warmup_stats' own, as
    the next test checks), give the same class in every series, and the same steady iteration
    but for warmup_stats' 1 where perflab says 0 (a flat execution)."""
    names = {"warmup": "warm-up"}
    for shape, noise, x, e in corpus:
        ends_kept = [int(k) for k in np.cumsum([s.kept for s in e.segments])]
        cls, steady = warmup_stats(x, list(e.outliers), ends_kept)
        assert names.get(cls, cls) == e.classification, (shape, noise)
        if e.classification == "flat":
            assert (steady, e.steady_start) == (1, 0)
        else:
            assert steady == e.steady_start, (shape, noise)


@pytest.mark.long
def test_outliers_are_warmup_stats_outliers(corpus):
    """The bounded search marks exactly the iterations warmup_stats' window marks: every
    fifth series of the corpus, and short series whose windows are few."""
    for _, _, x, e in corpus[::5]:
        assert list(e.outliers) == ws_tukey_all_outliers(list(x), int(x.size * 0.1))
    for seed, n in enumerate((20, 21, 37, 64, 129, 333)):
        x = shaped("step down", "heavy-tailed", seed, n=n, outliers=0.05)
        assert list(warmup.outliers(x)) == ws_tukey_all_outliers(list(x), int(n * 0.1))


def test_sets_of_executions_named_as_the_paper_names_them(corpus):
    """One class throughout is that class; flat and warm-up mixed is good inconsistent;
    any other mix bad inconsistent, as summary_statistics.py has it."""
    by_class: dict[str, list] = {}
    for _, _, x, e in corpus:
        by_class.setdefault(e.classification, []).append(x)
    flat, warm, slow = by_class["flat"][:3], by_class["warm-up"][:3], by_class["slowdown"][:2]
    cases = [
        (warm, "warm-up"),
        (flat + warm, "good inconsistent"),
        (flat + slow, "bad inconsistent"),
    ]
    for series, want in cases:
        got = warmup.classify_executions(series)
        old = [
            "warmup" if e.classification == "warm-up" else e.classification for e in got.executions
        ]
        assert (
            got.classification
            == want
            == {"warmup": "warm-up"}.get(ws_category(old), ws_category(old))
        )
    mixed = warmup.classify_executions(flat + warm)
    frame = mixed.frame()
    assert list(frame["classification"]) == ["flat"] * 3 + ["warm-up"] * 3
    assert list(frame["steady_start"][:3]) == [0, 0, 0]
    assert (frame["steady_lo"] <= frame["steady"]).all() and (
        frame["steady"] <= frame["steady_hi"]
    ).all()
    med, lo, hi = mixed.steady_start
    assert lo <= med <= hi and med == np.median(frame["steady_start"])
    segs = mixed.segments_frame()
    assert segs.groupby("execution")["kept"].sum().tolist() == [
        e.iterations - len(e.outliers) for e in mixed.executions
    ]
    none = warmup.classify_executions(warm + by_class["no steady state"][:1])
    assert none.classification == "bad inconsistent"
    assert none.steady is None and none.steady_start is None


# ---- the change points: R's cost and penalty, and ruptures' --------------------------


def standardized(x: np.ndarray) -> np.ndarray:
    """What perflab hands PELT: the kept iterations, centred and scaled."""
    keep = np.ones(x.size, dtype=bool)
    keep[warmup.outliers(x)] = False
    v = x[keep]
    return (v - v.mean()) / v.std()


def test_ruptures_cost_normal_is_twice_the_negative_log_likelihood_less_a_constant():
    """ruptures' CostNormal (without its 1e-6, which warns) is cpt.meanvar's cost less
    m (log 2 pi + 1): the same scale, so 15 log n means the same to both."""
    from ruptures.costs import CostNormal

    y = standardized(shaped("two steps down", "gaussian", 3, n=300))
    cost = CostNormal(add_small_diag=False).fit(y)
    for a, b in [(0, 300), (10, 40), (100, 102), (57, 250)]:
        m, s2 = b - a, y[a:b].var()
        r = m * (math.log(2 * math.pi) + math.log(s2) + 1)
        assert cost.error(a, b) == pytest.approx(r - m * (math.log(2 * math.pi) + 1), rel=1e-12)


@pytest.mark.parametrize(
    ("shape", "noise", "seed"),
    [("flat", "gaussian", 1), ("step down", "multiplicative", 2), ("oscillating", "gaussian", 9),
     ("steps up", "heavy-tailed", 4)],
)  # fmt: skip
def test_change_points_are_ruptures_pelt(shape, noise, seed):
    """The core's PELT finds what ruptures' Pelt(model="normal", jump=1, min_size=2) finds
    with the same penalty, on series short enough for ruptures (one of 1,000 takes 10 to 17 s)."""
    import ruptures

    y = standardized(shaped(shape, noise, seed, n=160))
    pen = warmup.PENALTY * math.log(y.size)
    algo = ruptures.Pelt(model="normal", min_size=2, jump=1, params={"add_small_diag": False})
    assert pelt_meanvar(y, pen, warmup.FLOOR, 2) == algo.fit(y).predict(pen=pen)


def test_change_points_are_the_optimum_where_pelt_pruning_misses_it():
    """PELT's pruning, R's and ruptures' alike, drops a candidate at s that is still needed
    at s + 1 (where s itself is too close to be one), so in rare series it misses the least
    penalized cost (4 of 3,000 short series with large outliers here): the core keeps it."""
    import ruptures

    rng = np.random.default_rng(421)
    n = int(rng.integers(30, 120))
    y = rng.standard_normal(n)
    slow = rng.integers(0, n, size=int(rng.integers(2, 8)))
    y[slow] *= rng.uniform(5, 100, size=slow.size)
    pen = warmup.PENALTY * math.log(n)

    def total(ends):
        bounds = [0, *ends]
        parts = [y[a:b] for a, b in itertools.pairwise(bounds)]
        return sum(p.size * math.log(max(p.var(), warmup.FLOOR)) for p in parts) + pen * len(ends)

    algo = ruptures.Pelt(model="normal", min_size=2, jump=1, params={"add_small_diag": False})
    pruned, ours = algo.fit(y).predict(pen=pen), pelt_meanvar(y, pen, warmup.FLOOR, 2)
    assert (pruned, ours) == ([2, 18, 20, 42], [20, 42])
    assert total(ours) < total(pruned) - 0.5


# ---- edge cases ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("times", "words"),
    [
        (np.ones(19), "20 iterations or more, not 19"),
        (np.r_[np.ones(30), np.nan], "iteration 30 took nan"),
        (np.r_[np.ones(25), np.inf, np.ones(5)], "iteration 25 took inf"),
        (np.r_[-1.0, np.ones(30)], "iteration 0 took -1.0"),
        (np.ones((5, 40)), "one-dimensional"),
    ],
)
def test_refused_in_one_line(times, words):
    with pytest.raises(PerflabError) as err:
        warmup.classify(times)
    assert words in str(err.value) and "\n" not in str(err.value)


def test_no_executions_refused():
    with pytest.raises(PerflabError, match="no executions"):
        warmup.classify_executions([])


def test_constant_series_is_flat():
    """No variance anywhere: one segment, flat, steady from the first iteration at its value."""
    e = warmup.classify(np.full(500, 1234.0))
    assert (e.classification, e.changepoints, e.outliers) == ("flat", (), ())
    assert e.steady_start == 0 and e.steady == (1234.0, 1234.0, 1234.0)
    assert e.time_to_steady == 0.0


def test_quantized_flat_series_is_flat_given_the_timer_step():
    """Times a coarse timer rounded to 10 ns: runs of equal values are the timer's, not
    segments of no variance, once the classification knows the step."""
    rng = np.random.default_rng(5)
    x = 10 * np.round(100 + 0.4 * rng.standard_normal(2000))
    assert warmup.classify(x, resolution=10.0).classification == "flat"


def test_the_unit_changes_nothing():
    """Seconds or nanoseconds, the same classes and change points: delta is a share."""
    for i, shape in enumerate(SHAPES):
        x = shaped(shape, "gaussian", 40 + i)
        s, ns = warmup.classify(x), warmup.classify(x * 1e9)
        assert (s.classification, s.changepoints) == (ns.classification, ns.changepoints)


@pytest.mark.long
def test_figure_marks_every_execution(tmp_path):
    """One panel per execution drawn, its class in its title, the file written."""
    xs = [shaped(s, "gaussian", i) for i, s in enumerate(SHAPES)]
    result = warmup.classify_executions(xs)
    fig = plot_executions(result, tmp_path / "warmup.png", unit="s")
    titles = [ax.get_title() for ax in fig.axes if ax.get_visible()]
    assert len(titles) == len(xs)
    assert [t.split(": ")[1].split(",")[0] for t in titles] == [
        e.classification for e in result.executions
    ]
    assert (tmp_path / "warmup.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
