"""perflab vs perf bench, side by side in one run: memcpy bandwidth at 1 MiB and the pipe ping-pong.

    PYTHONPATH=src python benchmarks/memory_os.py [--rounds 5] [--loops 100000]

memcpy: perf bench mem memcpy -s 1MB -l L -f default times L back-to-back glibc memcpy calls
of 1 MiB (after one prefault copy) with gettimeofday and prints size*L/time. Its best over
4*--rounds invocations, for L = 1, 10 and 100, is compared with the same statistic on
perflab's TSC timings of single copies: the best of 4*--rounds blocks of L copies, each
block's bytes over the sum of its copies' ticks. L=1 is perflab's peak (the sweep's minimum of
trials). Both in GiB/s (perf's "GB" is 1024^3 bytes).

cswitch: perf bench sched pipe -l N and perflab's ping-pong both send a small message down
one pipe and back up another between two processes, N round trips; both report total time
divided by N. Rounds alternate the two tools; medians are compared. Run unpinned (as perf
does by default) and with both processes on CPU 0 (taskset for perf, --cpu for perflab).
"""

import argparse
import re
import shutil
import statistics
import subprocess
import sys

from perflab.lab import cswitch, memcpy
from perflab.system import machine

MIB = 1 << 20
PERF_UNITS = {"B": 1, "KB": 1 << 10, "MB": 1 << 20, "GB": 1 << 30}  # print_bps: K = 1024


def perf(*args: str) -> str:
    """Run perf, stdout and stderr together (perf bench prints to both)."""
    out = subprocess.run(["perf", *args], capture_output=True, text=True, check=True)
    return out.stdout + out.stderr


def perf_memcpy_gibs(loops: int, runs: int) -> float:
    """Best GiB/s of `runs` perf bench invocations, each timing `loops` warm 1 MiB copies."""
    best = 0.0
    for _ in range(runs):
        text = perf("bench", "mem", "memcpy", "-s", "1MB", "-l", str(loops), "-f", "default")
        value, unit = re.search(r"([\d.]+) ([KMG]?B)/sec", text).groups()
        best = max(best, float(value) * PERF_UNITS[unit] / 2**30)
    return best


def perflab_memcpy_gibs(loops: int, runs: int) -> float:
    """perf's statistic on perflab's timings: best of `runs` blocks of `loops` 1 MiB copies.

    Each copy is timed alone by the TSC (min of 1 trial); a block's bandwidth is its bytes over
    the sum of its copies' times, as perf divides size*loops by the loop's time.
    """
    hz, _ = machine.tsc_hz()
    with memcpy.MemoryLock():
        ticks = memcpy.measure([MIB] * (loops * runs), trials=1, kernel="libc")
    seconds = ticks.astype(float).reshape(runs, loops).sum(axis=1) / hz
    return MIB * loops / seconds.min() / 2**30


def perf_pipe_us(loops: int, cpu: int | None) -> float:
    """usecs/op of perf bench sched pipe (one op = one round trip)."""
    args = ["bench", "sched", "pipe", "-l", str(loops)]
    if cpu is not None:
        cmd = ["taskset", "-c", str(cpu), "perf", *args]
        out = subprocess.run(cmd, capture_output=True, text=True, check=True)
        text = out.stdout + out.stderr
    else:
        text = perf(*args)
    return float(re.search(r"([\d.]+) usecs/op", text).group(1))


def perflab_pipe_us(loops: int, cpu: int | None) -> float:
    """perflab cswitch's round trip in µs, unpinned or both sides on one CPU."""
    place = cswitch.CpuPair("unpinned") if cpu is None else cswitch.CpuPair("one CPU", cpu, cpu)
    return cswitch.run_once(loops, place, realtime=False)["roundtrip_us_each"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--loops", type=int, default=100_000)
    args = ap.parse_args()
    if shutil.which("perf") is None:
        print("perf is not installed (apt install linux-perf)", file=sys.stderr)
        return 1

    runs = 4 * args.rounds
    print(f"memcpy 1 MiB, glibc, warm copies: best of {runs} runs of L copies each (GiB/s)")
    for loops in (1, 10, 100):
        theirs = perf_memcpy_gibs(loops, runs)
        ours = perflab_memcpy_gibs(loops, runs)
        print(
            f"  L={loops:<4d} perf bench mem memcpy -s 1MB -l {loops:<3d}: {theirs:6.2f}   "
            f"perflab: {ours:6.2f}   perflab/perf {ours / theirs:5.2f}"
        )
    print("  target: perflab >= 0.9x perf")
    print()

    print(
        f"pipe ping-pong, {args.loops} round trips, median of {args.rounds} alternating rounds (µs)"
    )
    for cpu in (None, machine.usable_cpus()[0]):
        p, q = [], []
        for _ in range(args.rounds):
            p.append(perf_pipe_us(args.loops, cpu))
            q.append(perflab_pipe_us(args.loops, cpu))
        where = "unpinned" if cpu is None else f"both on CPU {cpu}"
        mp, mq = statistics.median(p), statistics.median(q)
        print(
            f"  {where:16s} perf bench sched pipe: median {mp:6.2f} min {min(p):6.2f}   "
            f"perflab cswitch: median {mq:6.2f} min {min(q):6.2f}   "
            f"perflab/perf: median {mq / mp:4.2f} min {min(q) / min(p):4.2f}"
        )
        print(f"  {'':16s} perf rounds    {' '.join(f'{v:.2f}' for v in p)}")
        print(f"  {'':16s} perflab rounds {' '.join(f'{v:.2f}' for v in q)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
