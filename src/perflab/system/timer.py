"""The timer on this machine: what an empty timed region costs and the step its ticks move in."""

import functools

import numpy as np

from perflab.analysis import stats
from perflab.core import bindings

STEP_READS = 20_000


@functools.cache
def timer_overhead() -> int:
    """Ticks of an empty timed region: subtracted once from every sample."""
    return bindings.timer_overhead_ticks()


def timer_reads(n: int = STEP_READS) -> np.ndarray:
    """Ticks between the timing layer's begin and end reads, n empty regions back to back."""
    return bindings.time_empty(n) + timer_overhead()


@functools.cache
def timer_step() -> int:
    """The tick counter's step (20 on some AMD EPYC guests, 1 on most hosts): no timing is
    finer than this, so it sets how long a sample must be and how close two medians can be."""
    return max(1, stats.quantum(timer_reads()))
