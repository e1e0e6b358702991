"""Why two distinct C functions with identical code get a layout allowance, and how large.

Each fresh process runs --trials trials of twin_a against twin_b (identical loops at two
alignments, from benchmarks/perf_assertions.py) as 200 blocks of 10 interleaved pairs at 32
calls per run, either always through the same pointers ("fixed") or rotating over 8 fresh
copies of the library per target, each loaded at its own address ("copies"). The recorded
runs are then replayed through decision rules at the perf assertions' default schedule (looks
at 20, 40, ... 2000 runs, Bonferroni over 8 looks, 95 %): the order-statistic interval with
the ratio widened by an allowance of 0-3 %, and a t-interval over blocks (clusters).
"""

import argparse
import functools
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from perflab.analysis import stats
from perflab.running import timing
from perflab.system import compiler

sys.path.insert(0, str(Path(__file__).parent))
from perf_assertions import TWINS_C, TWINS_FLAGS, _twin_lib

LOOKS = [20, 40, 80, 160, 320, 640, 1280, 2000]
LEVEL = 1 - 0.05 / len(LOOKS)
BLOCKS, PAIRS, CALLS, COPIES = 200, 10, 32, 8


def worker(mode: str, trials: int, work: Path) -> None:
    """trials recordings in this process: one JSON line of per-block raw ticks each."""
    keep = []

    def fresh(name: str):
        path = work / f"copy-{os.getpid()}-{len(keep)}.so"
        shutil.copy(work / "twins.so", path)
        _, lib = _twin_lib(str(path))
        keep.append(lib)
        path.unlink()
        return timing.c_function(getattr(lib, name))

    _, lib = _twin_lib(str(work / "twins.so"))
    for _ in range(trials):
        if mode == "copies":
            ta = [fresh("twin_a") for _ in range(COPIES)]
            tb = [fresh("twin_b") for _ in range(COPIES)]
        else:
            ta, tb = [timing.c_function(lib.twin_a)], [timing.c_function(lib.twin_b)]
        for t in ta + tb:
            t.calls = t.call.calls = CALLS
        blocks = []
        for k in range(BLOCKS):
            ra, _, rb, _ = timing.sample_pair(ta[k % len(ta)], tb[(3 * k + 1) % len(tb)], PAIRS)
            blocks.append([ra.tolist(), rb.tolist()])
        print(json.dumps(blocks), flush=True)


@functools.cache
def t_quantile(df: int, level: float) -> float:
    """Two-sided Student t quantile by bisection on a numerically integrated density."""
    x = np.linspace(0, 2000, 2_000_001)
    logc = math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)
    pdf = np.exp(logc - (df + 1) / 2 * np.log1p(x * x / df))
    cdf = 0.5 + np.concatenate([[0], np.cumsum((pdf[1:] + pdf[:-1]) / 2 * (x[1] - x[0]))])
    return float(x[np.searchsorted(cdf, 1 - (1 - level) / 2)])


def first_claim(blocks, rule: str, allowance: float = 0.0) -> int | None:
    """Runs per side at which the rule first decides, None if it never does."""
    a = np.concatenate([b[0] for b in blocks]).astype(float) / CALLS
    b = np.concatenate([b[1] for b in blocks]).astype(float) / CALLS
    res = timing.timer_step() / CALLS
    for n in LOOKS:
        if rule == "order":
            _, lo, hi = stats.ratio_order_interval(a[:n], b[:n], LEVEL, (res, res))
            lo, hi = lo / (1 + allowance), hi * (1 + allowance)
        else:
            k = n // PAIRS
            r = [
                math.log(
                    np.median(b[i * PAIRS : (i + 1) * PAIRS])
                    / np.median(a[i * PAIRS : (i + 1) * PAIRS])
                )
                for i in range(k)
            ]
            w = t_quantile(k - 1, LEVEL) * np.std(r, ddof=1) / math.sqrt(k) + 2 * res / np.median(
                a[:n]
            )
            lo, hi = math.exp(np.mean(r) - w), math.exp(np.mean(r) + w)
        if lo > 1 or hi < 1:
            return n
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--processes", type=int, default=8)
    parser.add_argument("--trials", type=int, default=3, help="per process")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--work", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, args.trials, args.work)
        return
    print(
        f"timer step {timing.timer_step()} ticks; {args.processes} processes x {args.trials} "
        f"trials per mode; load {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"
    )
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "twins.c").write_text(TWINS_C)
        argv = [
            *compiler.compiler(),
            *TWINS_FLAGS,
            str(work / "twins.c"),
            "-o",
            str(work / "twins.so"),
        ]
        subprocess.run(argv, check=True)
        for mode in ("fixed", "copies"):
            trials = []
            for _ in range(args.processes):
                argv = [sys.executable, __file__, "--worker", mode, "--trials", str(args.trials)]
                done = subprocess.run(
                    [*argv, "--work", str(work)], check=True, capture_output=True, text=True
                )
                trials += [json.loads(line) for line in done.stdout.splitlines()]
            ratios = [
                np.median(np.concatenate([b[1] for b in t]))
                / np.median(np.concatenate([b[0] for b in t]))
                for t in trials
            ]
            line = f"{mode:<7} whole-trial median ratio b/a {min(ratios):.4f}-{max(ratios):.4f};"
            for allowance in (0.0, 0.01, 0.02, 0.03):
                got = sum(first_claim(t, "order", allowance) is not None for t in trials)
                line += f" allowance {allowance:.0%}: {got}/{len(trials)},"
            got = sum(first_claim(t, "cluster") is not None for t in trials)
            print(f"{line} t over blocks of {PAIRS} pairs: {got}/{len(trials)} claims")
    print(f"load average at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
