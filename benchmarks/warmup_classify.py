"""How long classifying warm-up takes, and how often it gives the shape a series was built with:
the figures docs and issue 61 ask for (100 executions of 2,000 iterations under a second).

--executions synthetic series of --iterations each (every shape of analysis/warmup_shapes.py in
turn, every noise), classified together --repeats times: wall and CPU time of each, and of
marking their outliers alone. Then the confusion table of built shape against class over
--table series per shape and noise (other seeds). --ruptures N also times ruptures' Pelt
(model "normal", jump 1, as R's PELT tries every iteration) on one flat series of N.

    PYTHONPATH=src python benchmarks/warmup_classify.py [--executions 100] [--ruptures 1000]
"""

import argparse
import itertools
import math
import time
from collections import Counter

import numpy as np

from perflab.analysis import warmup
from perflab.analysis.warmup_shapes import NOISES, SHAPES, shaped


def timed(fn) -> tuple[float, float]:
    """Wall and CPU seconds of fn()."""
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - wall, time.process_time() - cpu


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--executions", type=int, default=100)
    ap.add_argument("--iterations", type=int, default=2000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--table", type=int, default=40, help="series per shape and noise")
    ap.add_argument("--ruptures", type=int, default=0, metavar="N")
    args = ap.parse_args()
    kinds = list(itertools.product(SHAPES, NOISES))
    xs = [
        shaped(*kinds[i % len(kinds)], seed=i, n=args.iterations) for i in range(args.executions)
    ]
    warmup.classify_executions(xs[:2])  # the core and scipy loaded before the clock runs
    print(f"{args.executions} executions of {args.iterations} iterations, classified together:")
    runs = [timed(lambda: warmup.classify_executions(xs)) for _ in range(args.repeats)]
    for wall, cpu in runs:
        print(f"  {wall:.3f} s wall, {cpu:.3f} s CPU")
    best = min(runs)
    print(f"  best {best[0]:.3f} s wall, {min(c for _, c in runs):.3f} s CPU", end="; ")
    wall, cpu = timed(lambda: [warmup.outliers(x) for x in xs])
    print(f"their outliers alone {wall:.3f} s wall, {cpu:.3f} s CPU")

    seeds = range(10_000, 10_000 + args.table)
    table: Counter[tuple[str, str]] = Counter()
    for shape, noise in kinds:
        got = warmup.classify_executions([shaped(shape, noise, s, args.iterations) for s in seeds])
        table.update((shape, e.classification) for e in got.executions)
    classes = ["flat", "warm-up", "slowdown", "no steady state"]
    total = sum(table.values())
    right = sum(n for (shape, cls), n in table.items() if SHAPES[shape] == cls)
    print(
        f"\n{total} series ({args.table} per shape and noise: {', '.join(NOISES)}), "
        f"built shape (rows) against class: {right / total:.1%} as built"
    )
    print(f"  {'':16}" + "".join(f"{c:>17}" for c in classes))
    for shape in SHAPES:
        print(f"  {shape:16}" + "".join(f"{table[shape, c]:>17}" for c in classes))

    if args.ruptures:
        import ruptures

        y = np.random.default_rng(0).standard_normal(args.ruptures)
        algo = ruptures.Pelt(model="normal", min_size=2, jump=1, params={"add_small_diag": False})
        pen = warmup.PENALTY * math.log(y.size)
        wall, cpu = timed(lambda: algo.fit(y).predict(pen=pen))
        print(f"\nruptures' Pelt, one flat series of {y.size}: {wall:.1f} s wall, {cpu:.1f} s CPU")


if __name__ == "__main__":
    main()
