"""The timer on this machine: what an empty timed region costs and the step its ticks move in."""

import functools

import numpy as np

from perflab.analysis import stats
from perflab.core import bindings

STEP_READS = 20_000
SPREAD_DELAYS = 64
SPREAD_READS = 400
SPREAD_SHARE = 0.05


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
    steps = [stats.quantum(timer_reads())] + [
        stats.quantum(ticks, SPREAD_SHARE) for ticks in _spread_reads()
    ]
    return max(1, int(np.gcd.reduce([s for s in steps if s] or [1])))


def _spread_reads() -> list[np.ndarray]:
    """Regions around 0 to SPREAD_DELAYS - 1 spin iterations: back-to-back reads may all
    differ by one multiple of the step (78 ticks where it is 26), regions of several lengths
    cannot, so their common divisor is the step itself."""
    groups = []
    for delay in range(SPREAD_DELAYS):
        call = bindings.c_call(*bindings.spin_call(delay))
        call.calls = 1
        groups.append(call.time(SPREAD_READS).astype(np.int64))
    return groups
