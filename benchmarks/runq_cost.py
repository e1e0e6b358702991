"""What reading the run-queue wait of a child's threads costs per run: the engine's batch of a
short static child with runq off (the wait4 path every other sweep takes), auto (taskstats
where perflab may) and proc (/proc readings), in interleaved rounds so drift hits all alike.

    PYTHONPATH=src python benchmarks/runq_cost.py [--runs 1000] [--rounds 5]
"""

import argparse
import os
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np

from perflab.running import spawn
from perflab.system import compiler, machine

# One worker thread that exits before main: the case the zombie read exists for.
CHILD = r"""
#include <pthread.h>
static void *work(void *arg) { return arg; }
int main(void)
{
    pthread_t t;
    if (pthread_create(&t, 0, work, 0) != 0)
        return 1;
    return pthread_join(t, 0);
}
"""


def per_run_us(exe: str, runs: int, mode: str, cpu: int) -> tuple[float, str]:
    """Wall time of one batch / runs, in µs, and the source the runs reported."""
    options = spawn.SpawnOptions(cpus=(cpu,), runq=mode, timeout=10.0)
    t = time.perf_counter_ns()
    out = spawn.run_batch([(exe,)], np.zeros(runs, np.int64), options=options)
    us = (time.perf_counter_ns() - t) / runs / 1e3
    assert (out["status"] == 0).all()
    return us, spawn.RUNQ_SOURCES[int(out["runq_source"][-1])]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    cpu = machine.usable_cpus()[-1]
    with tempfile.TemporaryDirectory() as tmp:
        exe = str(Path(tmp) / "child")
        (Path(tmp) / "child.c").write_text(CHILD)
        argv = [*compiler.compiler(), "-O1", "-pthread", f"{tmp}/child.c", "-o", exe]
        subprocess.run([*argv, "-static"], check=False, capture_output=True)
        if not os.path.exists(exe):
            subprocess.run(argv, check=True)
        modes = ("off", "auto", "proc")
        times: dict[str, list[float]] = {m: [] for m in modes}
        sources = {}
        for _ in range(args.rounds):
            for m in modes:
                us, sources[m] = per_run_us(exe, args.runs, m, cpu)
                times[m].append(us)
    load = os.getloadavg()[0]
    print(f"{args.runs} runs x {args.rounds} rounds, child pinned to CPU {cpu}; load {load:.2f}")
    head = f"{'runq':6} {'source':10} {'median us/run':>14} {'min us/run':>11}"
    print(f"{head} {'vs off (median)':>16}")
    base = np.median(times["off"])
    for m in modes:
        med = np.median(times[m])
        print(f"{m:6} {sources[m]:10} {med:14.1f} {min(times[m]):11.1f} {med - base:+15.1f}")


if __name__ == "__main__":
    main()
