"""How perflab warmup classifies real programs of known shape (issue 61): the programs of
docs/examples/warmup/ built here with the system compiler, each run as
`perflab warmup --seed S --executions N` for every seed, and per program the class of
each seed's executions and the count of each class over all of them.

    PYTHONPATH=src python benchmarks/warmup_real.py [--seeds 5] [--executions 10] [--only NAME]
"""

import argparse
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

from perflab.lab import warmup
from perflab.system import compiler

EXAMPLES = Path(__file__).resolve().parents[1] / "docs" / "examples" / "warmup"
# each program and the class it is built to show
PROGRAMS = {
    "cache": "warm-up",
    "history": "slowdown",
    "flat": "flat",
    "phases": "no steady state",
    "memo.py": "warm-up",
    "history.py": "slowdown",
}
CLASSES = ("flat", "warm-up", "slowdown", "no steady state")


def argv(name: str, built: Path) -> tuple[str, ...]:
    """The command of one program: a C one compiled into `built`, a Python one under this
    interpreter."""
    if name.endswith(".py"):
        return (sys.executable, str(EXAMPLES / name))
    exe = built / name
    if not exe.exists():
        cmd = [*compiler.compiler(), "-O1", "-Wall", str(EXAMPLES / f"{name}.c"), "-o", str(exe)]
        subprocess.run(cmd, check=True)
    return (str(exe),)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--executions", type=int, default=10)
    ap.add_argument("--only", choices=list(PROGRAMS), action="append")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        rows = []
        for name in args.only or PROGRAMS:
            command = argv(name, Path(d))
            total: Counter[str] = Counter()
            same = 0
            for seed in range(args.seeds):
                frame = warmup.run(command, executions=args.executions, seed=seed)
                got = warmup.classified(frame)
                total.update(e.classification for e in got.executions)
                same += got.classification == PROGRAMS[name]
                counts = ", ".join(f"{n} {c}" for c, n in got.counts.items() if n)
                print(f"{name} seed {seed}: {got.classification} ({counts})", flush=True)
            rows.append((name, PROGRAMS[name], same, total))
    print(f"\n{args.seeds} seeds of {args.executions} executions; seeds all of the built class, "
          "and executions per class")  # fmt: skip
    print(f"  {'program':<11} {'built':<16} {'seeds':>5}" + "".join(f"{c:>16}" for c in CLASSES))
    for name, built, same, total in rows:
        print(f"  {name:<11} {built:<16} {same:>2}/{args.seeds}"
              + "".join(f"{total[c]:>16}" for c in CLASSES))  # fmt: skip


if __name__ == "__main__":
    main()
