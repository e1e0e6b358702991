"""The perf assertions' Python callables decided on their steady state: a memoised function's
warm-up runs dropped and said, a function that slows down with no steady state in its runs
inconclusive with that reason, never a pass."""

import functools
import itertools

import numpy as np
import pytest

import perflab
from perflab.assertions.comparison import INCONCLUSIVE, PASS


@functools.lru_cache(maxsize=64)
def _costly(k):
    return sum(range(20000 + k))


_keys = itertools.count()


def memoised():
    """Its first 12 calls fill the cache (each ~0.3 ms), the rest are hits: a warm-up that
    ends within the first look's 20 runs, whatever calibration took of it."""
    return _costly(next(_keys) % 12)


def unmemoised():
    return sum(range(20000))


_grown: list = []
WORK = 5000  # ~40 us a call: one call a run, so the runs are the calls
STEADY_CALLS = 22  # the first call, three of calibration, then 18 runs


def slowing():
    """Steady for its first 22 calls, then each call slower than the one before, by ten
    times its first cost: the list it grows each call is longer than 22."""
    _grown.append(None)
    return sum(range(WORK * (1 + 10 * max(0, len(_grown) - STEADY_CALLS))))


def test_a_memoised_functions_warm_up_is_dropped_and_said():
    c = perflab.check_faster(memoised, unmemoised)
    assert c.verdict == PASS, c.table()
    assert c.warmup[0] == "warm-up" and c.steady_starts[0] > 0 and c.dropped > 0, c.table()
    assert c.medians[0] == pytest.approx(float(np.median(c.samples[0][c.dropped :])))
    assert f"the first {c.dropped} runs of each dropped as warm-up" in c.table()
    assert c.summary()["dropped_warmup_runs"] == c.dropped
    assert not c.frame().query("role == 'fast'")["steady"][: c.dropped].any()


def _slowing_claim():
    """A claim its runs decide at once (its median is far below the limit), on 20 runs."""
    _grown.clear()
    return perflab.check_ticks_below(slowing, limit=1e12, budget="20")


def test_no_steady_state_is_inconclusive_with_the_reason_never_a_pass():
    # A disturbed run just before the slowdown can join the last segment, whose mean +- sd
    # then spans every segment: flat, by warmup_stats' rule (one try in twenty on a busy
    # 2-vCPU guest); three tries make that a chance in ten thousand.
    for _ in range(3):
        c = _slowing_claim()
        if c.no_steady:
            break
    assert (c.runs, c.calls) == (20, (1,))
    assert c.verdict == INCONCLUSIVE and c.no_steady == ("target",), c.table()
    assert c.reason.startswith("no steady state in target's 20 runs (slowing)")
    assert "no steady state: the target side's time per run kept changing" in c.table()
    assert c.summary()["no_steady_state"] == ["target"]
