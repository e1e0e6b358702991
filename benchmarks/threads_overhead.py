"""What perflab's thread runner adds to what it measures: start skew, counters, launch cost.

Run: PYTHONPATH=src python benchmarks/threads_overhead.py [--rt]
"""

import sys
import time

import numpy as np

from perflab.lab import threads
from perflab.system import machine

REPS = 40


def skew_us(cpus, rt):
    """How late the last worker starts after the barrier opens (µs): the pair's misalignment."""
    out = []
    for _ in range(REPS):
        df = threads.run_threads(cpus, 1, rt=rt, events=[])
        out.append((df["start_ns"].max() - df["release_ns"].iloc[0]) / 1e3)
    return np.median(out)


def counters_ratio(cpu, rt):
    """CPU time of the loop kernel with all seven counters open / with none, interleaved."""
    on, off = [], []
    for _ in range(REPS // 2):
        on.append(threads.run_threads([cpu], 20, rt=rt)["cpu_ns"].iloc[0])
        off.append(threads.run_threads([cpu], 20, rt=rt, events=[])["cpu_ns"].iloc[0])
    return np.median(on) / np.median(off), np.median(off) / 1e6


def launch_ms(cpus, rt):
    """Whole run_threads call around a 1-loop kernel vs the workers' own wall time (ms)."""
    calls, walls = [], []
    for _ in range(REPS):
        t0 = time.perf_counter()
        df = threads.run_threads(cpus, 1, rt=rt, events=[])
        calls.append((time.perf_counter() - t0) * 1e3)
        walls.append(df["wall_ns"].max() / 1e6)
    return np.median(calls), np.median(walls)


def main():
    rt = "--rt" in sys.argv[1:]
    cpus = machine.usable_cpus()[:2]
    print(f"{REPS} runs each, medians, rt={rt}, on a shared machine")
    print(f"start skew of {len(cpus)} pinned workers after the barrier: {skew_us(cpus, rt):.1f} us")
    ratio, base = counters_ratio(cpus[0], rt)
    print(f"20 loops with 7 counters / without: {ratio:.3f} (without: {base:.1f} ms CPU)")
    call, wall = launch_ms(cpus, rt)
    print(f"run_threads call {call:.2f} ms for a {wall:.2f} ms kernel: {call - wall:.2f} ms more")


if __name__ == "__main__":
    main()
