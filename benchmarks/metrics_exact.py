"""compare --metric instructions-exact over seeds (issue 51): two builds of a real program,
xz at -O1 and -O2 would need its sources, so two builds of the C loop below, -O1 against -O2,
each compared 5 times with another seed (other layouts): B/A must agree within 1e-4, and two
copies of one build must never differ beyond start-up's instructions.

    PYTHONPATH=src python benchmarks/metrics_exact.py [--seeds 5]
"""

import argparse
import json
import platform
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from perflab.plan import metrics
from perflab.system import machine

SOURCE = r"""
#include <stdlib.h>
int main(int argc, char **argv) {
    long n = atol(argv[1]);
    volatile long s = 0;
    for (long i = 0; i < n; i++) s += i * 3;
    return 0;
}
"""


def compare(a: str, b: str, seed: int) -> dict:
    argv = [
        sys.executable,
        "-m",
        "perflab",
        "compare",
        a,
        b,
        "--setups",
        "4",
        "--repeat",
        "2",
        "--no-rt",
        "--seed",
        str(seed),
        "--metric",
        "instructions-exact",
        "--json",
    ]
    done = subprocess.run(argv, capture_output=True, text=True, check=True)
    return json.loads(done.stdout)["metrics"]["instructions-exact"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    args = parser.parse_args()
    if metrics.unavailable("instructions-exact"):
        sys.exit(f"not here: {metrics.unavailable('instructions-exact')}")
    work = Path(tempfile.mkdtemp(prefix="perflab-bench-"))
    try:
        (work / "loop.c").write_text(SOURCE)
        for opt in ("1", "2"):
            subprocess.run(["cc", f"-O{opt}", "-o", str(work / f"O{opt}"), str(work / "loop.c")],
                           check=True)  # fmt: skip
        shutil.copy2(work / "O2", work / "O2-copy")
        print(f"# {machine.cpu_model()} · {platform.node()} · perflab compare --metric "
              "instructions-exact, 4 layouts, 100000 turns")  # fmt: skip
        ratios = []
        for seed in range(1, args.seeds + 1):
            said = compare(f"{work / 'O1'} 100000", f"{work / 'O2'} 100000", seed)
            ratios.append(said["ratio"])
            print(f"seed {seed}: -O2/-O1 {said['conclusion']}")
        spread = max(ratios) / min(ratios) - 1
        print(
            f"B/A over {len(ratios)} seeds: {min(ratios):.6f}..{max(ratios):.6f}, "
            f"spread {spread:.2e} (target < 1e-4): {'ok' if spread < 1e-4 else 'MISSED'}"
        )
        for seed in range(1, args.seeds + 1):
            said = compare(f"{work / 'O2'} 100000", f"{work / 'O2-copy'} 100000", seed)
            print(f"seed {seed}: copy/-O2 {said['conclusion']}")
    finally:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
