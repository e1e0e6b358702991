"""Warm-up: each iteration sums a memoised function over 10 keys, a block of them taken in
turn, and does a fixed amount of other work. The first pass over the 20 blocks computes
every value (functools.lru_cache fills); from iteration 20 on each is looked up. Prints one
time per iteration, ns of time.perf_counter_ns."""

import functools
import time

ITERATIONS = 200
BLOCKS = 20
KEYS = 10


@functools.lru_cache(maxsize=None)
def value(key):
    """An expensive function of its key: computed once, looked up after."""
    return sum(i * i % 7 for i in range(key, key + 5000))


def other_work():
    """The same work every iteration."""
    return sum(i % 3 for i in range(2000))


for it in range(ITERATIONS):
    start = time.perf_counter_ns()
    block = it % BLOCKS
    total = sum(value(block * KEYS + k) for k in range(KEYS)) + other_work()
    print(time.perf_counter_ns() - start)
