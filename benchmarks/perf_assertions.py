"""How often perflab's assert_faster claims a difference, and what deciding costs, by true ratio.

Identical workloads measure the false-claim rate (should stay below 1 - confidence); spin
loops of known relative length measure how many runs and seconds a decision takes.
"""

import argparse
import collections
import statistics

from perflab import perfassert, timing


def trials(make_fast, make_slow, n, confidence, budget):
    """Verdict counts, median runs and median seconds over n fresh comparisons."""
    verdicts, runs, seconds = collections.Counter(), [], []
    for _ in range(n):
        c = perfassert.check_faster(make_fast(), make_slow(), confidence=confidence, budget=budget)
        verdicts[c.verdict] += 1
        runs.append(c.runs)
        seconds.append(c.seconds)
    return verdicts, statistics.median(runs), statistics.median(seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--confidence", type=float, default=0.95)
    parser.add_argument("--budget", default="30s,160")
    args = parser.parse_args()
    cases = [
        ("identical C spin(1000)", lambda: timing.spin(1000), lambda: timing.spin(1000)),
        (
            "identical Python sum(range(50))",
            lambda: lambda: sum(range(50)),
            lambda: lambda: sum(range(50)),
        ),
        ("C 1.02x (spin 1000 vs 1020)", lambda: timing.spin(1000), lambda: timing.spin(1020)),
        ("C 1.10x (spin 1000 vs 1100)", lambda: timing.spin(1000), lambda: timing.spin(1100)),
        ("C 2x (spin 1000 vs 2000)", lambda: timing.spin(1000), lambda: timing.spin(2000)),
    ]
    print(
        f"assert_faster(fast, slow), {args.trials} trials each, confidence {args.confidence}, "
        f"budget {args.budget}"
    )
    print(f"{'case':<34}{'pass':>6}{'fail':>6}{'inconcl.':>10}{'median runs':>13}{'median s':>10}")
    for name, fast, slow in cases:
        v, runs, secs = trials(fast, slow, args.trials, args.confidence, args.budget)
        print(
            f"{name:<34}{v['pass']:>6}{v['fail']:>6}{v['inconclusive']:>10}{runs:>13g}{secs:>10.3f}"
        )


if __name__ == "__main__":
    main()
