"""perflab's rdtscp read cost next to a bare C loop of back-to-back rdtscp, in one run.

    python benchmarks/clock_cost.py [--reads N] [--trials T]

Each reports the minimum over trials of the mean ticks per read; perflab must stay
within 10 % of the bare instruction. A loop that uses each value (as any timer must)
pays the short dependency chain that rdtscp waits for, which the third row shows.
"""

import argparse
import shutil
import subprocess
import tempfile
from pathlib import Path

from perflab import machine
from perflab._native import ffi, lib

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


def bare_ticks(reads: int, trials: int) -> tuple[float, float]:
    """Min mean ticks per rdtscp of bare C loops (value dropped, value used), built with -O2."""
    with tempfile.TemporaryDirectory() as tmp:
        src, exe = Path(tmp) / "bare.c", Path(tmp) / "bare"
        src.write_text(BARE)
        cc = shutil.which("cc") or "gcc"
        subprocess.run([cc, "-O2", "-o", str(exe), str(src)], check=True)
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
    ap.add_argument("--trials", type=int, default=20)
    args = ap.parse_args()
    hz, how = machine.tsc_hz()
    bare, bare_used = bare_ticks(args.reads, args.trials)
    ours = perflab_ticks(args.reads, args.trials)
    print(f"TSC {hz / 1e9:.4f} GHz ({how}); {args.reads:,} reads x {args.trials} trials, min")
    print(f"{'method':>28} {'ticks/read':>11} {'ns/read':>9}")
    rows = (
        ("bare rdtscp, value dropped", bare),
        ("bare rdtscp, value used", bare_used),
        ("perflab rdtscp batch", ours),
    )
    for name, t in rows:
        print(f"{name:>28} {t:11.2f} {t / hz * 1e9:9.2f}")
    print(f"ratio perflab / bare instruction = {ours / bare:.3f} (target <= 1.10)")
    print(f"ratio perflab / bare loop using its reads = {ours / bare_used:.3f}")


if __name__ == "__main__":
    main()
