"""How often check_faster claims a difference between twins, and what deciding a real one costs.

Each case runs in --processes fresh worker processes x --trials trials (per-process layout
biases differ between processes, so one process proves little). Twins are identical work:
any decided verdict is a false claim, reported with its Clopper-Pearson 95 % interval next to
the promised rate 1 - confidence. Real differences (spin loops 2 %, 10 %, 2x apart) report the
share decided correctly and the median seconds to decide.
"""

import argparse
import functools
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from perflab.assertions import claims
from perflab.errors import PerflabError
from perflab.running import placement, timing
from perflab.system import compiler

TWINS_C = r"""
#include <stdint.h>
#define LOOP(n) { for (uint64_t i = 0; i < n; i++) __asm__ volatile("" : "+r"(i)); }
__asm__(".text\n.p2align 6\n");
void twin_a(void) LOOP(1000)
__asm__(".text\n.p2align 6\n.skip 88\n");
void twin_b(void) LOOP(1000)
void more_102(void) LOOP(1020)
void more_110(void) LOOP(1100)
void more_200(void) LOOP(2000)
"""
# Identical code bytes at two alignments: no loop padding, functions placed as written.
TWINS_FLAGS = [
    "-O2",
    "-shared",
    "-fPIC",
    "-fno-toplevel-reorder",
    "-falign-functions=1",
    "-fno-align-loops",
    "-fno-align-jumps",
    "-fno-align-labels",
]
LOOP_C = r"""
#include <stdlib.h>
#include "perflab_probe.h"
int main(int argc, char **argv)
{
    long n = atol(argv[1]);
    PERFLAB_PROBE_BEGIN();
    for (long i = 0; i < n; i++)
        __asm__ volatile("" : "+r"(i));
    PERFLAB_PROBE_END();
    return 0;
}
"""
TWINS = ("python twins", "C twins", "same pointer", "program twins")
# Real differences: one C function (spin) with more turns, and distinct C functions
# (twin_a against a longer loop), which pay the machine's placement floor.
REAL = {"C 1.02x": 1020, "C 1.10x": 1100, "C 2x": 2000}
DISTINCT = {
    "C distinct 1.02x": "more_102",
    "C distinct 1.10x": "more_110",
    "C distinct 2x": "more_200",
}
PROGRAM_BUDGET = "5s,160"


@functools.cache
def _twin_lib(so: str):
    """Loaded once per process: a collected library would unmap the code its pointers reach."""
    import cffi

    ffi = cffi.FFI()
    ffi.cdef(" ".join(f"void {f}(void);" for f in ("twin_a", "twin_b", *DISTINCT.values())))
    return ffi, ffi.dlopen(so)


def pair(case: str, work: Path):
    """A fresh (fast, slow) target pair of the case and its budget (None: the default)."""
    if case == "python twins":
        return (lambda: sum(range(200))), (lambda: sum(range(200))), None
    if case in ("C twins", "same pointer"):
        _, lib = _twin_lib(str(work / "twins.so"))
        second = lib.twin_b if case == "C twins" else lib.twin_a
        return timing.c_function(lib.twin_a), timing.c_function(second), None
    if case in DISTINCT:
        _, lib = _twin_lib(str(work / "twins.so"))
        return timing.c_function(lib.twin_a), timing.c_function(getattr(lib, DISTINCT[case])), None
    if case == "program twins":
        a, b = (timing.program([str(work / d / "loop"), "20000"]) for d in ("a", "b"))
        return a, b, PROGRAM_BUDGET
    return timing.spin(1000), timing.spin(REAL[case]), None


def worker(case: str, trials: int, work: Path, confidence: float, floor: float | None) -> None:
    """trials fresh comparisons in this process: one JSON line each."""
    for _ in range(trials):
        fast, slow, budget = pair(case, work)
        t0 = time.monotonic()
        try:
            verdict = claims.check_faster(
                fast, slow, confidence=confidence, budget=budget, placement_floor=floor
            )
        except PerflabError as exc:  # e.g. a median at or below the empty call's under load
            verdict = f"error: {exc}"
        else:
            verdict = verdict.verdict
        print(json.dumps({"verdict": verdict, "seconds": time.monotonic() - t0}), flush=True)


def prepare(work: Path) -> None:
    """The C twins library and two copies of one program at paths of equal length."""
    src = work / "twins.c"
    src.write_text(TWINS_C)
    argv = [*compiler.compiler(), *TWINS_FLAGS, str(src), "-o", str(work / "twins.so")]
    subprocess.run(argv, check=True)
    loop = work / "loop.c"
    loop.write_text(LOOP_C)
    binary = compiler.build(loop).path
    for d in ("a", "b"):
        (work / d).mkdir()
        shutil.copy2(binary, work / d / "loop")


def binom_cdf(k: int, n: int, p: float) -> float:
    if p <= 0:
        return 1.0
    if p >= 1:
        return float(k >= n)
    return sum(
        math.exp(
            math.lgamma(n + 1)
            - math.lgamma(i + 1)
            - math.lgamma(n - i + 1)
            + i * math.log(p)
            + (n - i) * math.log1p(-p)
        )
        for i in range(k + 1)
    )


def clopper_pearson(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """Exact binomial interval by bisection on the binomial tails."""
    a = (1 - level) / 2

    def solve(f):
        lo, hi = 0.0, 1.0
        for _ in range(60):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if f(mid) else (lo, mid)
        return (lo + hi) / 2

    lower = 0.0 if k == 0 else solve(lambda p: 1 - binom_cdf(k - 1, n, p) < a)
    upper = 1.0 if k == n else solve(lambda p: binom_cdf(k, n, p) > a)
    return lower, upper


def run_case(case, args, work) -> list[dict]:
    out = []
    for _ in range(args.processes):
        argv = [sys.executable, __file__, "--worker", case, "--trials", str(args.trials)]
        argv += ["--work", str(work), "--confidence", str(args.confidence)]
        if args.placement_floor is not None:
            argv += ["--placement-floor", str(args.placement_floor)]
        done = subprocess.run(argv, check=True, capture_output=True, text=True)
        out += [json.loads(line) for line in done.stdout.splitlines()]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--processes", type=int, default=10)
    parser.add_argument("--trials", type=int, default=20, help="per process")
    parser.add_argument("--confidence", type=float, default=0.95)
    parser.add_argument(
        "--placement-floor",
        type=float,
        help="widen distinct C functions' ratios by this share (default: the machine's "
        "measured floor; 0 trusts placement)",
    )
    parser.add_argument("--case", action="append", help="only these cases (repeatable)")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--work", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, args.trials, args.work, args.confidence, args.placement_floor)
        return
    cases = args.case or [*TWINS, *REAL, *DISTINCT]
    floor, _ = placement.floor()
    shown = (
        f"{100 * floor.share:.2g} % (measured {floor.measured_at})"
        if args.placement_floor is None
        else f"{100 * args.placement_floor:.2g} % (given)"
    )
    print(
        f"check_faster at confidence {args.confidence} (promise: false claims <= "
        f"{1 - args.confidence:.0%}); timer step {timing.timer_step()} ticks; "
        f"{args.processes} processes x {args.trials} trials per case; default budget "
        f"{claims.Budget()}, programs {PROGRAM_BUDGET}; placement floor between distinct C "
        f"functions {shown}; load {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"
    )
    print(f"{'case':<18}{'claims':>9}{'rate':>8}{'95% CI':>17}{'decided':>9}{'median s':>10}")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        prepare(work)
        for case in cases:
            rows = run_case(case, args, work)
            n = len(rows)
            errors = [r for r in rows if r["verdict"].startswith("error")]
            if errors:
                print(f"{case}: {len(errors)} trials refused: {errors[0]['verdict']}")
            rows = [r for r in rows if r not in errors]
            n = len(rows)
            decided = [r for r in rows if r["verdict"] != claims.INCONCLUSIVE]
            if case in TWINS:
                lo, hi = clopper_pearson(len(decided), n)
                print(
                    f"{case:<18}{len(decided):>5}/{n:<3}{len(decided) / n:>8.1%}"
                    f"{f'[{lo:.1%}, {hi:.1%}]':>17}"
                )
            else:
                right = [r for r in rows if r["verdict"] == claims.PASS]
                secs = statistics.median(r["seconds"] for r in right) if right else math.nan
                print(f"{case:<18}{'':>9}{'':>8}{'':>17}{len(right) / n:>9.1%}{secs:>10.4f}")
    print(f"load average at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
