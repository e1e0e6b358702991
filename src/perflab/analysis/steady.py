"""What the faces that decide take from the warm-up classification (analysis/warmup.py): the
iterations of one run that lie in its steady state, and when the steady state over executions
is known well enough to stop adding executions (Laaber et al., "Dynamically reconfiguring
software microbenchmarks", FSE 2020: stop once a measure of stability says the result would
not move; its RCIW criterion is the relative width of a confidence interval, 3 % there)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike

from perflab.analysis import warmup
from perflab.analysis.stats import median_order_interval

# What a run's iterations were found to be; "unclassified": too few for it (MIN_ITERATIONS).
RunClass = Literal["unclassified", "flat", "warm-up", "slowdown", "no steady state"]
RUN_CLASSES: tuple[RunClass, ...] = (
    "unclassified",
    "flat",
    "warm-up",
    "slowdown",
    "no steady state",
)


def steady_run(times: ArrayLike) -> tuple[RunClass, int, float]:
    """One run's iterations classified; the iterations before its steady state (0 where it
    has none or too few iterations to tell) and the median of the rest: of all of them where
    the run reached no steady state, which the class then says."""
    x = np.asarray(times, dtype=float)
    if x.size < warmup.MIN_ITERATIONS:
        return "unclassified", 0, float(np.median(x))
    e = warmup.classify(x)
    start = e.steady_start or 0
    return e.classification, start, float(np.median(x[start:]))


def relative_width(executions: Sequence[warmup.Execution], confidence: float = 0.95) -> float:
    """The steady value over executions (the median of theirs) known to: its order-statistic
    interval's width over the median; inf while an execution has no steady state or the
    executions are too few for a finite interval (six at 95 %)."""
    values = [e.steady[0] for e in executions if e.steady is not None]
    if len(values) < len(executions) or not values:
        return math.inf
    centre, lo, hi = median_order_interval(values, confidence)
    if not (math.isfinite(lo) and math.isfinite(hi)) or not centre > 0:
        return math.inf
    return (hi - lo) / centre
