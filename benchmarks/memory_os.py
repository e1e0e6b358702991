"""perflab vs perf bench, side by side in one run: memcpy bandwidth at 1 MiB and the pipe ping-pong.

    PYTHONPATH=src python benchmarks/memory_os.py [--rounds 5] [--loops 100000]

memcpy: perf bench mem memcpy -s 1MB -l 1 -f default times one warm glibc memcpy of 1 MiB
(after one prefault copy) with gettimeofday; its best over --rounds*10 runs is compared with
perflab's minimum over as many single copies timed by the TSC. Both print GiB/s (perf's "GB"
is 1024^3 bytes).

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

from perflab import cswitch, machine, memcpy

MIB = 1 << 20


def perf(*args: str) -> str:
    """Run perf, stdout and stderr together (perf bench prints to both)."""
    out = subprocess.run(["perf", *args], capture_output=True, text=True, check=True)
    return out.stdout + out.stderr


def perf_memcpy_gibs(runs: int) -> list[float]:
    """GiB/s of `runs` separate perf bench invocations, one warm 1 MiB copy each."""
    vals = []
    for _ in range(runs):
        text = perf("bench", "mem", "memcpy", "-s", "1MB", "-l", "1", "-f", "default")
        vals.append(float(re.search(r"([\d.]+) GB/sec", text).group(1)))
    return vals


def perflab_memcpy_gibs(trials: int) -> float:
    """Peak GiB/s of perflab's libc memcpy at 1 MiB: min ticks over `trials` single copies."""
    hz, _ = machine.tsc_hz()
    with memcpy.MemoryLock():
        ticks = memcpy.measure([MIB], trials=trials, kernel="libc")[0]
    return MIB / (ticks / hz) / 2**30


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
    place = cswitch.Placement("unpinned") if cpu is None else cswitch.Placement("one CPU", cpu, cpu)
    return cswitch.run_once(loops, place, realtime=False)["roundtrip_us_each"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--loops", type=int, default=100_000)
    args = ap.parse_args()
    if shutil.which("perf") is None:
        print("perf is not installed (apt install linux-perf)", file=sys.stderr)
        return 1

    runs = 10 * args.rounds
    theirs = max(perf_memcpy_gibs(runs))
    ours = perflab_memcpy_gibs(runs)
    print(f"memcpy 1 MiB, glibc, best of {runs} single warm copies (GiB/s)")
    print(f"  {'perf bench mem memcpy -s 1MB -l 1 -f default':45s}: {theirs:8.2f}")
    print(f"  {f'perflab (TSC, min of {runs} trials)':45s}: {ours:8.2f}")
    print(f"  {'ratio perflab/perf':45s}: {ours / theirs:8.2f}  (target >= 0.9)")
    print()

    print(
        f"pipe ping-pong, {args.loops} round trips, median of {args.rounds} alternating rounds (µs)"
    )
    for cpu in (None, machine.online_cpus()[0]):
        p, q = [], []
        for _ in range(args.rounds):
            p.append(perf_pipe_us(args.loops, cpu))
            q.append(perflab_pipe_us(args.loops, cpu))
        where = "unpinned" if cpu is None else f"both on CPU {cpu}"
        mp, mq = statistics.median(p), statistics.median(q)
        print(
            f"  {where:16s} perf bench sched pipe : {mp:7.3f}   perflab cswitch : {mq:7.3f}   "
            f"ratio perflab/perf : {mq / mp:5.2f}"
        )
        print(f"  {'':16s} perf rounds {' '.join(f'{v:.2f}' for v in p)}")
        print(f"  {'':16s} perflab rounds {' '.join(f'{v:.2f}' for v in q)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
