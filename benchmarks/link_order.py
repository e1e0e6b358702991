"""A 24-permutation x 50-repeat link-order sweep of the built-in workload: where the time goes.

From an empty build cache (a temporary XDG_CACHE_HOME): compiling the four objects, linking
each order (at most once: the count is printed), locating symbols, then the runs; then the
same sweep again, whose build phase must link nothing. Side by side: build vs run shares.
Last, the warm sweep's per-run cost against a bare C loop (posix_spawn + wait4, no probe,
no journal) running the same linked binaries in the same order on the same CPU: the ratio
is what perflab's engine costs per run beyond spawning the program at all.

    PYTHONPATH=src python benchmarks/link_order.py [--repeat 50] [--permutations all]
"""

import argparse
import os
import subprocess
import tempfile
import time
from pathlib import Path

from perflab.lab import link_order
from perflab.store import results
from perflab.system import compiler

BARE = r"""
#define _GNU_SOURCE
#include <sched.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
/* bare CPU PROGRAM... < order: run PROGRAM[i] for each index i read, print ns per run. */
int main(int argc, char **argv)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(atoi(argv[1]), &set);
    sched_setaffinity(0, sizeof set, &set);
    static int order[1 << 20];
    int n = 0;
    while (n < (1 << 20) && scanf("%d", &order[n]) == 1)
        n++;
    char *env[] = {NULL};
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (int i = 0; i < n; i++) {
        char *args[] = {argv[2 + order[i]], NULL};
        pid_t pid;
        int status;
        if (posix_spawn(&pid, args[0], NULL, NULL, args, env) != 0 || waitpid(pid, &status, 0) < 0)
            return 1;
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    printf("%.0f\n", ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / n);
    return 0;
}
"""


def bare_ns_per_run(df, cpu: int) -> float:
    """ns per run of a bare posix_spawn loop over the sweep's programs, in the sweep's order."""
    paths = [str(p) for p in results.metadata(df)["program_paths"]]
    with tempfile.TemporaryDirectory() as d:
        src, exe = Path(d) / "bare.c", Path(d) / "bare"
        src.write_text(BARE)
        subprocess.run([*compiler.compiler(), "-O2", str(src), "-o", str(exe)], check=True)
        order = " ".join(str(p) for p in df["perm"])
        done = subprocess.run(
            [str(exe), str(cpu), *paths], input=order, capture_output=True, text=True, check=True
        )
    return float(done.stdout)


def sweep(args) -> tuple[dict, float]:
    """One sweep; (metadata, total seconds), with the compile count added to the metadata."""
    compiles = compiler.BUILDS["compile"]
    t0 = time.perf_counter()
    df = link_order.sweep(
        permutations=args.permutations, repeat=args.repeat, seed=args.seed, rt=args.rt
    )
    total = time.perf_counter() - t0
    meta = results.metadata(df)
    meta["compiles"] = compiler.BUILDS["compile"] - compiles
    meta["frame"] = df
    return meta, total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=50)
    parser.add_argument("--permutations", type=link_order.parse_permutations, default="all")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rt", action=argparse.BooleanOptionalAction, default=False)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as cache:
        os.environ["XDG_CACHE_HOME"] = cache
        cold, cold_s = sweep(args)
        warm, warm_s = sweep(args)
        bare_ns = bare_ns_per_run(warm["frame"], warm["cpus"][0])  # the binaries live in cache
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
    sweep_ns = warm["run_s"] / runs * 1e9  # run_s includes one preflight run per order
    print(
        f"per run (warm sweep): perflab {sweep_ns / 1e3:,.0f} us, bare C posix_spawn loop "
        f"{bare_ns / 1e3:,.0f} us over the same binaries and order: ratio {sweep_ns / bare_ns:.3f}"
    )
    summary = link_order.summarize(cold["frame"])
    spread = link_order.spread(cold["frame"], summary)
    print(
        f"spread (cold sweep): {spread['slowest']} / {spread['fastest']} = {spread['ratio']:.3f} "
        f"({spread['ci_low']:.3f}-{spread['ci_high']:.3f})"
    )


if __name__ == "__main__":
    main()
