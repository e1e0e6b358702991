"""How often history's change-point search finds a change where there is none, and the one
there is, on series of made-up commits with normal noise: the figures docs/history.md gives.

For each of --series seeds: a series of --commits values with --noise relative noise, searched
as it is (a change found: a false one), and again with a --step step from commit --at on (found
exactly there and nowhere else: right). Printed per penalty (sigma^2 log n per change point).

    PYTHONPATH=src python benchmarks/change_points.py [--series 400] [--step 0.04]
"""

import argparse
import math

import numpy as np
import ruptures

from perflab.lab.history import changes


def search(logs: np.ndarray, se: np.ndarray, penalty: float) -> list[int]:
    """changes.change_points with another penalty."""
    sigma = changes.noise(logs, se)
    pen = penalty * max(sigma, 1e-6) ** 2 * math.log(logs.size)
    algo = ruptures.Pelt(model="l2", min_size=1, jump=1).fit(logs.reshape(-1, 1))
    return [int(k) for k in algo.predict(pen)[:-1]]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--series", type=int, default=400)
    ap.add_argument("--commits", type=int, default=24)
    ap.add_argument("--noise", type=float, default=0.01)
    ap.add_argument("--step", type=float, default=0.04)
    ap.add_argument("--at", type=int, default=15)
    args = ap.parse_args()
    print(
        f"{args.series} series of {args.commits} commits, {args.noise:.0%} noise; a "
        f"{args.step:+.0%} step at commit {args.at} (history's penalty: {changes.PENALTY})"
    )
    for penalty in (2.0, 3.0, 4.0):
        false = right = 0
        for seed in range(args.series):
            logs = np.random.default_rng(seed).normal(0, args.noise, args.commits)
            se = np.full(args.commits, args.noise)
            false += bool(search(logs, se, penalty))
            stepped = logs + math.log1p(args.step) * (np.arange(args.commits) >= args.at)
            right += search(stepped, se, penalty) == [args.at]
        n = args.series
        print(
            f"penalty {penalty} sigma^2 log n: a change where there is none in "
            f"{false / n:.1%}; the step, and only it, in {right / n:.1%}"
        )


if __name__ == "__main__":
    main()
