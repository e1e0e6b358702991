"""The full default env-size sweep (8193 sizes x 100 = 819 200 runs): wall time and peak RSS.

Runs `perflab sweep env-size` as a child process and reads its wait4 rusage; targets:
under 12 minutes, peak RSS under 500 MB. Extra arguments go to the sweep, so a subset
(e.g. --max 1023) is measured and extrapolated to the full sweep, labelled as such.

    PYTHONPATH=src python benchmarks/full_env_sweep.py -o full.parquet --plot full.png
    PYTHONPATH=src python benchmarks/full_env_sweep.py --max 1023 --repeat 20 -o part.parquet
"""

import os
import subprocess
import sys
import time

from perflab.store import results

FULL_RUNS = 8193 * 100


def main() -> None:
    args = sys.argv[1:]
    if "-o" not in args:
        args += ["-o", "full_env_sweep.parquet"]
    out = args[args.index("-o") + 1]
    cmd = [sys.executable, "-m", "perflab", "sweep", "env-size", *args]
    print("$ " + " ".join(["perflab", "sweep", "env-size", *args]), flush=True)
    t = time.monotonic()
    proc = subprocess.Popen(cmd)
    _, status, ru = os.wait4(proc.pid, 0)
    wall = time.monotonic() - t
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"the sweep failed (exit {os.waitstatus_to_exitcode(status)})")
    runs = len(results.load(out))
    per_run = wall / runs
    print(f"runs: {runs}  wall: {wall / 60:.2f} min  per run: {per_run * 1e6:.0f} us (all in)")
    print(f"peak RSS of the perflab process: {ru.ru_maxrss / 1024:.0f} MB (target < 500 MB)")
    verdict = "within" if per_run * FULL_RUNS < 720 else "over"
    label = "measured" if runs == FULL_RUNS else f"extrapolated from {runs} runs"
    print(
        f"full default sweep ({FULL_RUNS} runs): {per_run * FULL_RUNS / 60:.1f} min, {label} "
        f"({verdict} the 12 min target); load average {os.getloadavg()[0]:.2f} on a shared machine"
    )


if __name__ == "__main__":
    main()
