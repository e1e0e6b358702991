"""Slowdown: each call appends 400 items to a list and sums it. The list keeps the newest
20,000 (the oldest dropped), so it grows for the first 50 calls and holds its size after.
Prints one time per call, ns of time.perf_counter_ns."""

import time

ITERATIONS = 200
GROW = 400
KEEP = 50 * GROW

history = []


def record(it):
    """Append this call's items, drop the oldest beyond KEEP, and sum what is kept."""
    history.extend(range(it, it + GROW))
    del history[:-KEEP]
    return sum(history)


for it in range(ITERATIONS):
    start = time.perf_counter_ns()
    record(it)
    print(time.perf_counter_ns() - start)
