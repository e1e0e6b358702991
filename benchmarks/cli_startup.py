"""How long the CLI takes to start: `perflab --help` and `import perflab.cli`, fresh processes.

Each command runs --runs times in a new interpreter (so nothing is cached in the process; the
OS page cache is warm after the first); the median and the range are printed, with which heavy
modules the process loaded. The issue's target: `perflab --help` under 0.15 s.

    PYTHONPATH=src python benchmarks/cli_startup.py [--runs 21]
"""

import argparse
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


def seconds(code: str) -> float:
    """Wall time of one fresh interpreter running code, output discarded."""
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], stdout=subprocess.DEVNULL, check=True)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=21)
    args = ap.parse_args()
    for name, code in COMMANDS.items():
        seconds(code)  # warm the page cache
        times = sorted(seconds(code) for _ in range(args.runs))
        loaded = subprocess.run(
            [sys.executable, "-c", code + PROBE.format(HEAVY)],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, check=True,
        ).stderr.strip().rpartition("LOADED ")[2]  # fmt: skip
        print(
            f"{name:22s} median {statistics.median(times):.3f} s "
            f"(min {times[0]:.3f}, max {times[-1]:.3f}; {args.runs} runs)  loads {loaded}"
        )


if __name__ == "__main__":
    main()
