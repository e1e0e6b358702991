"""Trimmed means of independent units (a design's layouts) and their t interval (Yuen's): an
interval over a few units that reaches beyond the values seen, as a bootstrap's cannot. scipy is
imported where used, so that perflab starts without it."""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike

from perflab.errors import PerflabError


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
