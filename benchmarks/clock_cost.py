"""perflab's rdtscp read cost next to a bare C loop of back-to-back rdtscp, in one run.

    python benchmarks/clock_cost.py [--reads N] [--trials T]

Each reports the minimum over trials of the mean ticks per read; perflab must stay
within 10 % of the bare instruction. A loop that uses each value (as any timer must)
pays the short dependency chain that rdtscp waits for, which the third row shows.
"""

import argparse
import subprocess
import tempfile
from pathlib import Path

from perflab.core.bindings import ffi, lib
from perflab.system import compiler, machine

BARE = r"""
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <x86intrin.h>
int main(int argc, char **argv)
{
    size_t n = strtoull(argv[1], 0, 10);
    int trials = atoi(argv[2]);
    unsigned aux;
    double best = 1e30, used = 1e30;
    uint64_t acc = 0;
    for (int t = 0; t < trials; t++) {
        uint64_t t0 = __rdtscp(&aux);
        for (size_t i = 0; i < n; i++)
            __rdtscp(&aux);
        uint64_t t1 = __rdtscp(&aux);
        for (size_t i = 0; i < n; i++)
            acc ^= __rdtscp(&aux);
        uint64_t t2 = __rdtscp(&aux);
        if ((double)(t1 - t0) / n < best)
            best = (double)(t1 - t0) / n;
        if ((double)(t2 - t1) / n < used)
            used = (double)(t2 - t1) / n;
    }
    printf("%f %f %d\n", best, used, (int)(acc & 1));
    return 0;
}
"""


def compile_bare(tmp: str) -> Path:
    """The bare C loops, built here with -O2."""
    src, exe = Path(tmp) / "bare.c", Path(tmp) / "bare"
    src.write_text(BARE)
    subprocess.run([*compiler.compiler(), "-O2", "-o", str(exe), str(src)], check=True)
    return exe


def bare_ticks(exe: Path, reads: int, trials: int) -> tuple[float, float]:
    """Min mean ticks per rdtscp of the bare C loops (value dropped, value used)."""
    out = subprocess.run([str(exe), str(reads), str(trials)], capture_output=True, text=True)
    dropped, used, _ = out.stdout.split()
    return float(dropped), float(used)


def perflab_ticks(reads: int, trials: int) -> float:
    """Min mean ticks per read of perflab's rdtscp batch."""
    ticks = ffi.new("uint64_t *")
    best = float("inf")
    for _ in range(trials):
        lib.perflab_batch_ticks(lib.PERFLAB_TSC_RDTSCP, reads, ticks)
        best = min(best, ticks[0] / reads)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reads", type=int, default=1_000_000)
    ap.add_argument("--trials", type=int, default=5, help="trials per round (min taken)")
    ap.add_argument("--rounds", type=int, default=7, help="interleaved rounds: bare, perflab")
    args = ap.parse_args()
    hz, how = machine.tsc_hz()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        exe = compile_bare(tmp)
        for _ in range(args.rounds):
            dropped, used = bare_ticks(exe, args.reads, args.trials)
            rows.append((dropped, used, perflab_ticks(args.reads, args.trials)))
    bare, bare_used, ours = (min(col) for col in zip(*rows, strict=True))
    per_round = sorted(r[2] / r[0] for r in rows)
    print(
        f"TSC {hz / 1e9:.4f} GHz ({how}); {args.reads:,} reads, min of {args.trials} trials "
        f"x {args.rounds} interleaved rounds"
    )
    print(f"{'method':>28} {'ticks/read':>11} {'ns/read':>9}")
    named = (
        ("bare rdtscp, value dropped", bare),
        ("bare rdtscp, value used", bare_used),
        ("perflab rdtscp batch", ours),
    )
    for name, t in named:
        print(f"{name:>28} {t:11.2f} {t / hz * 1e9:9.2f}")
    median = per_round[len(per_round) // 2]
    print(
        f"ratio perflab / bare instruction = {ours / bare:.3f} of the minima, "
        f"{median:.3f} median per round (target <= 1.10)"
    )
    print(f"ratio perflab / bare loop using its reads = {ours / bare_used:.3f}")


if __name__ == "__main__":
    main()
