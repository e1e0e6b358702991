"""What perf record adds to a program's wall time under `perflab profile --samples`: plain vs
profile vs profile --samples vs the classic `perf record -F HZ -- PROGRAM`, interleaved, on the
built-in lock contention (mutex and spin); and perf's start and end, which --samples keeps out
of the program's wall time (perflab's own elapsed time shows them).

Run: PYTHONPATH=src python benchmarks/samples_overhead.py [REPS] [HZ]
"""

import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

from perflab.lab import contention, profile
from perflab.running import spawn
from perflab.store import results
from perflab.system import machine, perfsamples

ITERATIONS, WORK, THREADS = 100_000, 2_000, 2


def plain(argv: list[str]) -> tuple[int, int]:
    """A plain run, timed as perflab times children: (wall ns, the same: nothing around it)."""
    wall = int(spawn.run(argv, options=spawn.SpawnOptions(timeout=None))["wall_ns"])
    return wall, wall


def profiled(argv: list[str], hz: int | None) -> tuple[int, int]:
    """(the program's wall ns as profile reports it, perflab's whole elapsed ns)."""
    t0 = time.monotonic_ns()
    with open(os.devnull, "w") as null:
        df = profile.run(argv, sample_hz=hz, stdout=null.fileno())
    meta = results.metadata(df)
    if hz and meta["samples_note"].startswith("not supported"):
        sys.exit(meta["samples_note"])
    return meta["wall_ns"], time.monotonic_ns() - t0


def classic(argv: list[str], hz: int) -> tuple[int, int]:
    """perf record -- PROGRAM: the program's wall is not separable from perf's start and end."""
    with tempfile.TemporaryDirectory() as tmp:
        cmd = ["perf", "record", "-q", "-F", str(hz), "-o", f"{tmp}/p.data", "--", *argv]
        t0 = time.monotonic_ns()
        subprocess.run(cmd, stdout=subprocess.DEVNULL, check=True)
        took = time.monotonic_ns() - t0
    return took, took


def main() -> None:
    reps = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    hz = int(sys.argv[2]) if len(sys.argv) > 2 else perfsamples.FREQUENCY_HZ
    if shutil.which("perf") is None:
        sys.exit("perf is not installed")
    load = os.getloadavg()[0]
    print(f"{machine.cpu_model()}, {len(machine.usable_cpus())} CPUs, load average {load:.2f}")
    print(f"event: {perfsamples.plan(hz).event} at {hz} Hz; {reps} interleaved runs per mode")
    for kind in contention.KINDS:
        argv = contention.command(kind, THREADS, ITERATIONS, WORK)
        modes = {
            "plain": lambda a=argv: plain(a),
            "profile": lambda a=argv: profiled(a, None),
            "profile --samples": lambda a=argv: profiled(a, hz),
            "perf record -- PROGRAM": lambda a=argv: classic(a, hz),
        }
        walls: dict[str, list[int]] = {m: [] for m in modes}
        totals: dict[str, list[int]] = {m: [] for m in modes}
        for _ in range(reps):
            for mode, fn in modes.items():
                wall, total = fn()
                walls[mode].append(wall)
                totals[mode].append(total)
        base = np.median(walls["plain"])
        print(f"\n{kind}, {THREADS} threads, {ITERATIONS:,} sections of {WORK:,} steps; median:")
        print(f"  {'mode':<24} {'program wall':>13} {'x plain':>8} {'perflab elapsed':>16}")
        for mode in modes:
            w, t = np.median(walls[mode]), np.median(totals[mode])
            print(f"  {mode:<24} {w / 1e6:10.1f} ms {w / base:8.2f} {t / 1e6:13.1f} ms")


if __name__ == "__main__":
    main()
