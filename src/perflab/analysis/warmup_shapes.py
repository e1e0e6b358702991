"""Series of iteration times of a known shape, the class warmup_stats would give each, for
checking perflab's classification and drawing each class: flat, one or two steps down, steps
up, or oscillating to the end; with gaussian, heavy-tailed (Student's t, 3 degrees of freedom)
or multiplicative (log-normal) noise, and slow outliers (an interrupt's iteration)."""

from __future__ import annotations

import numpy as np

from perflab.errors import PerflabError

# each shape and the class it is built to have
SHAPES = {
    "flat": "flat",
    "step down": "warm-up",
    "two steps down": "warm-up",
    "steps up": "slowdown",
    "oscillating": "no steady state",
}
NOISES = ("gaussian", "heavy-tailed", "multiplicative")


def _levels(shape: str, n: int, rng: np.random.Generator) -> np.ndarray:
    """Each iteration's time before noise, relative to the steady state (1). Every step is
    5-40 % and lies before the middle, so that the last quarter is steady; an oscillation
    moves 5-20 % every 30-200 iterations to the end."""
    level = np.ones(n)
    if shape == "flat":
        return level
    if shape in ("step down", "two steps down", "steps up"):
        steps = {"step down": 1, "two steps down": 2}.get(shape) or int(rng.integers(1, 3))
        for at in rng.integers(n // 20, n // 2, size=steps):
            step = 1 + rng.uniform(0.05, 0.4)
            level[:at] = level[:at] / step if shape == "steps up" else level[:at] * step
        return level
    if shape == "oscillating":
        half = int(rng.integers(30, 200))
        up = (np.arange(n) // half) % 2 == 1
        return np.where(up, 1 + rng.uniform(0.05, 0.2), 1.0)
    raise PerflabError(f"no shape {shape!r}: one of {', '.join(SHAPES)}")


def shaped(shape: str, noise: str, seed: int, n: int = 2000, outliers: float = 0.005) -> np.ndarray:
    """A series of `shape` with `noise` of 0.2-1 % and a share `outliers` of iterations 1.5-4
    times slower, its steady level drawn over six decades (the classification has no unit)."""
    if noise not in NOISES:
        raise PerflabError(f"no noise {noise!r}: one of {', '.join(NOISES)}")
    rng = np.random.default_rng(seed)
    base = 10 ** rng.uniform(-6, 0)
    sigma = rng.uniform(0.002, 0.01)
    level = _levels(shape, n, rng)
    if noise == "gaussian":
        x = level + sigma * rng.standard_normal(n)
    elif noise == "heavy-tailed":
        x = level + sigma * rng.standard_t(3, n) / np.sqrt(3.0)  # t3's variance is 3
    else:
        x = level * np.exp(sigma * rng.standard_normal(n))
    slow = rng.random(n) < outliers
    x[slow] *= rng.uniform(1.5, 4.0, size=int(slow.sum()))
    return base * np.maximum(x, 0.0)
