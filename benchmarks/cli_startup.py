"""How long the CLI takes to start: `perflab --help` and `import perflab.cli`, fresh processes.

Each command runs --runs times in a new interpreter (so nothing is cached in the process; the
OS page cache is warm after the first). Printed: the median wall time and its range, the median
CPU time (user + system, from wait4: less swayed by other tenants than wall time on a shared
machine), and which heavy modules the process loaded. The issue's target: `perflab --help`
under 0.15 s.

    PYTHONPATH=src python benchmarks/cli_startup.py [--runs 21]
"""

import argparse
import os
import statistics
import subprocess
import sys
import time

HEAVY = ("numpy", "pandas", "matplotlib", "matplotlib.pyplot")
COMMANDS = {
    "python -c pass": "pass",
    "perflab --help": "import sys; sys.argv = ['perflab', '--help']\n"
    "from perflab.cli import main\ntry:\n    main()\nexcept SystemExit:\n    pass",
    "import perflab.cli": "import perflab.cli",
    "import perflab": "import perflab",
}
PROBE = "\nimport sys; print('LOADED', [m for m in {} if m in sys.modules], file=sys.stderr)"


def seconds(code: str) -> tuple[float, float]:
    """Wall and CPU time of one fresh interpreter running code, output discarded."""
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise SystemExit(f"{code!r} failed with exit status {proc.returncode}")
    return wall, usage.ru_utime + usage.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=21)
    args = ap.parse_args()
    for name, code in COMMANDS.items():
        seconds(code)  # warm the page cache
        runs = [seconds(code) for _ in range(args.runs)]
        times = sorted(wall for wall, _ in runs)
        cpu = statistics.median(c for _, c in runs)
        loaded = subprocess.run(
            [sys.executable, "-c", code + PROBE.format(HEAVY)],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, check=True,
        ).stderr.strip().rpartition("LOADED ")[2]  # fmt: skip
        print(
            f"{name:20s} wall median {statistics.median(times):.3f} s (min {times[0]:.3f}, "
            f"max {times[-1]:.3f}), CPU {cpu:.3f} s; {args.runs} runs; loads {loaded}"
        )


if __name__ == "__main__":
    main()
