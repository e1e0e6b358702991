"""How long the CLI takes to start: `perflab --help`, `perflab VERB --help` for every verb and
sub-verb of the VERBS table, and `import perflab.cli`, in fresh processes.

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
HELP = (
    "import sys; sys.argv = ['perflab', *{argv!r}, '--help']\n"
    "from perflab.cli import main\ntry:\n    main()\nexcept SystemExit:\n    pass"
)
COMMANDS = {
    "python -c pass": "pass",
    "perflab --help": HELP.format(argv=[]),
    "import perflab.cli": "import perflab.cli",
    "import perflab": "import perflab",
}
SUBVERBS = ("report show", "report hosts")
PROBE = "\nimport sys; print('LOADED', [m for m in {} if m in sys.modules], file=sys.stderr)"


def verb_commands() -> dict[str, str]:
    """`perflab VERB --help` for every verb and sub-verb, from the CLI's own table."""
    from perflab.cli import VERBS

    return {f"{v} --help": HELP.format(argv=v.split()) for v in [*VERBS, *SUBVERBS]}


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
    ap.add_argument("--no-verbs", action="store_true", help="Skip `perflab VERB --help`.")
    args = ap.parse_args()
    commands = COMMANDS if args.no_verbs else {**COMMANDS, **verb_commands()}
    load_before = os.getloadavg()
    for name, code in commands.items():
        seconds(code)  # warm the page cache
        runs = [seconds(code) for _ in range(args.runs)]
        times = sorted(wall for wall, _ in runs)
        cpu = statistics.median(c for _, c in runs)
        loaded = subprocess.run(
            [sys.executable, "-c", code + PROBE.format(HEAVY)],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, check=True,
        ).stderr.strip().rpartition("LOADED ")[2]  # fmt: skip
        print(
            f"{name:30s} wall median {statistics.median(times):.3f} s (min {times[0]:.3f}, "
            f"max {times[-1]:.3f}), CPU {cpu:.3f} s; {args.runs} runs; loads {loaded}"
        )

    before = ", ".join(f"{x:.1f}" for x in load_before)
    after = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    cpus = sorted(os.sched_getaffinity(0))
    print(f"load average (1, 5, 15 min) {before} before, {after} after; on CPUs {cpus}")


if __name__ == "__main__":
    main()
