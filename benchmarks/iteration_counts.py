"""What a count of iterations a run does to B/A between processes, measured, not modelled: the
-O2 and -O2 -fno-tree-ch builds of brotli's encoder in perflab's repeat loop
(real_program.py --looped), as A/B pairs of runs of one iteration and of N, interleaved, each
pair's order drawn. It prints the spread of a pair's log B/A (robust: from the median |difference|
between pairs) for runs of one, for the first iteration alone of runs of N, and for runs of N
(their median iteration), with the mean B/A of each.

Why compare plans from runs at two counts (levels._by_count): if the first iteration of a run
of N read as a run of one, a pilot at N alone would tell what one iteration a run does.

    PYTHONPATH=src python benchmarks/iteration_counts.py [--pairs 60] [--iterations 4]
"""

import argparse
import math

import numpy as np
import pandas as pd
import real_program

from perflab.analysis import levels
from perflab.running import spawn
from perflab.system import machine


def spread(log_ratios: np.ndarray) -> float:
    """The variance of one value as compare reads its pairs' (the median |difference|)."""
    one = pd.Series(np.zeros(log_ratios.size))  # the pairs as one layout
    return levels._robust_variance(pd.Series(log_ratios), [one])


def _first(ticks: np.ndarray) -> float:
    """A run's first iteration: what a run asked for one would read, were they alike."""
    return float(ticks[0])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pairs", type=int, default=60, help="A/B pairs at each count (60)")
    p.add_argument("--iterations", type=int, default=4, help="the larger count (4)")
    args = p.parse_args()
    a = real_program.command(["-O2"], looped=True)
    b = real_program.command(["-O2", "-fno-tree-ch"], looped=True)
    rt = machine.realtime_allowed()
    last = max(machine.allowed_cpus())  # away from this process where there are two
    runs = {n: spawn.SpawnOptions(iterations=n, rt=rt, cpus=(last,)) for n in (1, args.iterations)}
    rng = np.random.default_rng(0)
    seen: dict[str, list[float]] = {"one": [], "first": [], "median": []}
    for _ in range(args.pairs):
        for n, options in runs.items():
            ticks = {}
            for side, argv in sorted((("A", a), ("B", b)), key=lambda _: rng.random()):
                rec = spawn.run(argv, {}, options)
                ticks[side] = rec["iteration_ticks"][: int(rec["iterations"])].astype(float)
            first, median = (math.log(f(ticks["B"]) / f(ticks["A"])) for f in (_first, np.median))
            if n == 1:
                seen["one"].append(first)
            else:
                seen["first"].append(first)
                seen["median"].append(median)
    where = f"{'real-time' if rt else 'normal priority'}, CPU {last}"
    print(f"{args.pairs} A/B pairs at each count, interleaved ({where}):")
    for name, what in (("one", "runs of 1"), ("first", f"runs of {args.iterations}, first "
                       "iteration"), ("median", f"runs of {args.iterations}, median")):  # fmt: skip
        x = np.array(seen[name])
        print(f"  {what:32s} var of log B/A {spread(x):.2e}, B/A {math.exp(x.mean()):.4f}")


if __name__ == "__main__":
    main()
