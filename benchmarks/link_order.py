"""A 24-permutation x 50-repeat link-order sweep of the built-in workload: where the time goes.

From an empty build cache (a temporary XDG_CACHE_HOME): compiling the four objects, linking
each order (at most once: the count is printed), locating symbols, then the runs; then the
same sweep again, whose build phase must link nothing. Side by side: build vs run shares.

    PYTHONPATH=src python benchmarks/link_order.py [--repeat 50] [--permutations all]
"""

import argparse
import os
import tempfile
import time

from perflab import build, link_order, results


def sweep(args) -> tuple[dict, float]:
    """One sweep; (metadata, total seconds), with the compile count added to the metadata."""
    compiles = build.BUILDS["compile"]
    t0 = time.perf_counter()
    df = link_order.sweep(permutations=args.permutations, repeat=args.repeat, seed=args.seed)
    total = time.perf_counter() - t0
    meta = results.metadata(df)
    meta["compiles"] = build.BUILDS["compile"] - compiles
    meta["frame"] = df
    return meta, total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=50)
    parser.add_argument("--permutations", type=link_order.parse_permutations, default="all")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as cache:
        os.environ["XDG_CACHE_HOME"] = cache
        cold, cold_s = sweep(args)
        warm, warm_s = sweep(args)
    runs = len(cold["frame"])
    print(f"{runs} runs per sweep ({cold['frame']['perm'].nunique()} orders x {args.repeat})")
    print(f"{'':24}{'cold cache':>12}{'warm cache':>12}")
    for label, key in (("compiles", "compiles"), ("links", "links")):
        print(f"{label:24}{cold[key]:>12}{warm[key]:>12}")
    for label, c, w in (
        ("compile + link (s)", cold["build_s"], warm["build_s"]),
        ("symbols + loops (s)", cold["layout_s"], warm["layout_s"]),
        ("runs (s)", cold["run_s"], warm["run_s"]),
        ("total (s)", cold_s, warm_s),
    ):
        print(f"{label:24}{c:>12.2f}{w:>12.2f}")
    for label, m, total in (("cold", cold, cold_s), ("warm", warm, warm_s)):
        other = total - m["build_s"] - m["layout_s"] - m["run_s"]
        print(
            f"{label}: build {m['build_s'] / total:.0%}, layout {m['layout_s'] / total:.0%}, "
            f"runs and preflight {m['run_s'] / total:.0%}, other {other / total:.0%}; "
            f"{m['run_s'] / runs * 1e3:.2f} ms per run"
        )
    assert cold["links"] <= cold["frame"]["perm"].nunique() and warm["links"] == 0
    summary = link_order.summarize(cold["frame"])
    spread = link_order.spread(cold["frame"], summary)
    print(
        f"spread (cold sweep): {spread['slowest']} / {spread['fastest']} = {spread['ratio']:.3f} "
        f"({spread['ci_low']:.3f}-{spread['ci_high']:.3f})"
    )


if __name__ == "__main__":
    main()
