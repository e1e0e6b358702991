"""Robust statistics for noisy timings: the FileGuard trimmed table, MAD, bootstrap intervals."""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike

from perflab.core.lazy import pd
from perflab.errors import PerflabError


def _array(values: ArrayLike) -> np.ndarray:
    x = np.asarray(values, dtype=float)
    x = x[~np.isnan(x)]
    if x.size == 0:
        raise PerflabError("no values to summarise")
    return x


def trimmed(values: ArrayLike, k: int) -> np.ndarray:
    """Sorted values minus the k smallest and k largest (FileGuard drops the 10 best, 10 worst)."""
    x = np.sort(_array(values))
    if k < 0 or 2 * k >= x.size:
        raise PerflabError(f"cannot drop {k} from each end of {x.size} values")
    return x[k : x.size - k] if k else x


def mad(values: ArrayLike) -> float:
    """Median absolute deviation from the median (unscaled)."""
    x = _array(values)
    return float(np.median(np.abs(x - np.median(x))))


def summary(values: ArrayLike, trim: int = 0) -> dict[str, float]:
    """n, min, max, mean, median, stdev, MAD, percentiles, and the same extremes after trimming."""
    x = _array(values)
    out = {
        "n": int(x.size),
        "min": float(x.min()),
        "max": float(x.max()),
        "mean": float(x.mean()),
        "median": float(np.median(x)),
        "stdev": float(x.std(ddof=1)) if x.size > 1 else 0.0,
        "mad": mad(x),
        "p5": float(np.percentile(x, 5)),
        "p95": float(np.percentile(x, 95)),
    }
    if trim:
        t = trimmed(x, trim)
        out.update(
            trim=trim,
            trimmed_min=float(t[0]),
            trimmed_max=float(t[-1]),
            trimmed_mean=float(t.mean()),
        )
    return out


def describe(df: pd.DataFrame, by: str | Sequence[str], value: str, trim: int = 0) -> pd.DataFrame:
    """summary() of one value column per group, one row per group."""
    rows = []
    for key, group in df.groupby(by, sort=True):
        vals = group[value].dropna()
        if vals.empty:
            continue
        keys = key if isinstance(key, tuple) else (key,)
        names = [by] if isinstance(by, str) else list(by)
        rows.append({**dict(zip(names, keys, strict=True)), **summary(vals, trim)})
    return pd.DataFrame(rows)


def spearman(x: ArrayLike, y: ArrayLike) -> float:
    """Spearman's rho over the pairs with neither value nan; nan if either side is constant,
    where scipy would warn."""
    a, b = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if a.shape != b.shape:
        raise PerflabError(f"spearman needs equal lengths, got {a.size} and {b.size}")
    keep = ~(np.isnan(a) | np.isnan(b))
    a, b = a[keep], b[keep]
    if a.size < 2 or np.ptp(a) == 0 or np.ptp(b) == 0:
        return float("nan")
    from scipy import stats

    return float(stats.spearmanr(a, b)[0])


def boot_medians(x: np.ndarray, n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """Medians of n_boot resamples, in blocks so memory stays bounded for long series."""
    block = max(1, 2_000_000 // max(x.size, 1))
    out = np.empty(n_boot)
    for start in range(0, n_boot, block):
        stop = min(n_boot, start + block)
        idx = rng.integers(0, x.size, size=(stop - start, x.size))
        out[start:stop] = np.median(x[idx], axis=1)
    return out


def _interval(boot: np.ndarray, confidence: float) -> tuple[float, float]:
    if not 0 < confidence < 1:
        raise PerflabError(f"confidence must be between 0 and 1, not {confidence}")
    alpha = (1 - confidence) / 2
    lo, hi = np.quantile(boot, [alpha, 1 - alpha])
    return float(lo), float(hi)


def ratio_bootstrap_interval(
    baseline: ArrayLike,
    candidate: ArrayLike,
    confidence: float = 0.95,
    n_boot: int = 2000,
    seed: int = 0,
) -> tuple[float, float, float]:
    """Bootstrap interval of median(candidate)/median(baseline): (ratio, lo, hi)."""
    a, b = _array(baseline), _array(candidate)
    if np.median(a) == 0:
        raise PerflabError("baseline median is 0: a ratio is meaningless")
    rng = np.random.default_rng(seed)
    ma, mb = boot_medians(a, n_boot, rng), boot_medians(b, n_boot, rng)
    ok = ma != 0
    return (float(np.median(b) / np.median(a)), *_interval(mb[ok] / ma[ok], confidence))


def quantum(deltas: ArrayLike, share: float = 0.01) -> int:
    """A counter's step: the gcd of the nonzero differences seen in at least `share` of the
    reads, so a stray odd read (a migration, an interrupt) cannot hide it; 0 if none moved."""
    d = np.abs(np.asarray(deltas, dtype=np.int64))
    d = d[d > 0]
    if d.size == 0:
        return 0
    values, counts = np.unique(d, return_counts=True)
    common = values[counts >= share * d.size]
    return int(np.gcd.reduce(common if common.size else values))


@functools.lru_cache(maxsize=256)
def median_rank(n: int, confidence: float) -> int:
    """The 1-based rank l whose [x_(l), x_(n+1-l)] of n values covers their population's median
    with probability >= confidence, for any distribution (0: no rank does): the largest l with
    P(X <= l - 1) <= (1 - confidence)/2, X ~ Binomial(n, 1/2). Cached: a diff's thousands of
    points share a handful of n. scipy.special's bdtr is the CDF scipy.stats.binom calls,
    without the second that importing scipy.stats costs every compare and diff."""
    from scipy.special import bdtr

    ok = np.nonzero(bdtr(np.arange(n + 1), n, 0.5) <= (1 - confidence) / 2)[0]
    return int(ok[-1]) + 1 if ok.size else 0


def median_order_interval(
    values: ArrayLike, confidence: float = 0.95, resolution: float = 0.0
) -> tuple[float, float, float]:
    """Distribution-free interval of the median from order statistics, widened by one
    resolution step each side: (median, lo, hi).

    [x_(l), x_(n+1-l)] covers the population median with probability >= confidence for any
    distribution, ties included; quantized values can put that median up to one step away
    from the unquantized one, hence the widening. Too few values give (-inf, inf).
    """
    if not 0 < confidence < 1:
        raise PerflabError(f"confidence must be between 0 and 1, not {confidence}")
    x = np.sort(_array(values))
    n = x.size
    lrank = median_rank(n, confidence)
    med = float(np.median(x))
    if lrank == 0:
        return med, -math.inf, math.inf
    return med, float(x[lrank - 1]) - resolution, float(x[n - lrank]) + resolution


def ratio_order_interval(
    baseline: ArrayLike,
    candidate: ArrayLike,
    confidence: float = 0.95,
    resolution: tuple[float, float] = (0.0, 0.0),
) -> tuple[float, float, float]:
    """Interval of median(candidate)/median(baseline) from the two sides' median intervals,
    each at 1 - (1 - confidence)/2 (both cover together with probability >= confidence):
    (ratio, lo, hi); an interval of the baseline reaching 0 leaves the ratio unbounded."""
    side = 1 - (1 - confidence) / 2
    ma, la, ha = median_order_interval(baseline, side, resolution[0])
    mb, lb, hb = median_order_interval(candidate, side, resolution[1])
    if ma <= 0:
        raise PerflabError("baseline median is <= 0: a ratio is meaningless")
    lo = max(lb, 0.0) / ha if math.isfinite(ha) else 0.0
    hi = hb / la if la > 0 else math.inf
    return mb / ma, lo, hi
