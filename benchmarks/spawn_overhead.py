"""Per-run cost of perflab's env-size sweep path vs a bare C posix_spawn loop vs hyperfine -N.

All three run the same static workload (the built-in Mytkowicz loop) the same number of
times, in interleaved rounds so machine drift hits them alike; the per-run cost of a method
is the median over rounds of (wall time of the round / runs).

    PYTHONPATH=src python benchmarks/spawn_overhead.py [--runs 2000] [--rounds 5]
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from perflab.engine import childruns
from perflab.lab import env_size
from perflab.system import compiler

BARE = r"""
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
int main(int argc, char **argv)
{
    int n = atoi(argv[1]), st;
    char pad[128] = "A=", *av[] = {argv[2], NULL}, *ev[] = {pad, NULL};
    struct timespec a, b;
    pid_t pid;
    memset(pad + 2, 'a', 100);
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (int i = 0; i < n; i++) {
        if (posix_spawn(&pid, argv[2], NULL, NULL, av, ev) != 0 || waitpid(pid, &st, 0) < 0)
            return 1;
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    printf("%.0f\n", (b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec));
    return 0;
}
"""


def bare(tmp: Path, workload: str, runs: int, prefix: tuple[str, ...] = ()) -> float:
    """ns per run of the C loop (timed inside it); prefix e.g. taskset/chrt for its conditions."""
    exe = tmp / "bare"
    if not exe.exists():
        (tmp / "bare.c").write_text(BARE)
        cc = compiler.compiler()
        subprocess.run([*cc, "-O2", "-Wall", "-Werror", tmp / "bare.c", "-o", exe], check=True)
    cmd = [*prefix, str(exe), str(runs), workload]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return float(out.stdout) / runs


def perflab(tmp: Path, runs: int, **kw) -> tuple[float, float]:
    """ns per run of env_size.sweep: (steady state, all-in).

    Steady state runs from the first chunk's submission to the last chunk's journaling: C
    batches, tidy frames and the journal. All-in adds the fixed costs around it (metadata,
    build-cache lookup, the unrecorded warm-up run, the final merge into one Parquet file).
    """
    out = tmp / "p.parquet"
    out.unlink(missing_ok=True)
    stamps: list[int] = []
    t = time.perf_counter_ns()
    env_size.sweep(
        min_size=0,
        max_size=99,
        repeat=runs // 100,
        output=out,
        on_start=lambda todo, done: stamps.append(time.perf_counter_ns()),
        progress=lambda n: stamps.append(time.perf_counter_ns()),
        **kw,
    )
    end = time.perf_counter_ns()
    return (stamps[-1] - stamps[0]) / runs, (end - t) / runs


def hyperfine(tmp: Path, workload: str, runs: int) -> float | None:
    """ns per run of `hyperfine -N --runs N` (whole process wall time), None when missing."""
    exe = shutil.which("hyperfine")
    if exe is None:
        return None
    cmd = [exe, "-N", "--runs", str(runs), "--style", "none", "--export-json", tmp / "h.json"]
    t = time.perf_counter_ns()
    subprocess.run([*cmd, workload], env={"A": "a" * 100}, capture_output=True, check=True)
    return (time.perf_counter_ns() - t) / runs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    workload = str(compiler.mytkowicz().path)
    cpu = childruns.default_cpus()[0]
    pinned_rt = ("taskset", "-c", str(cpu), "chrt", "-f", "1")
    bare_plain, bare_rt = "bare C posix_spawn+waitpid", f"bare C, taskset -c {cpu} chrt -f 1"
    plain, tuned, hf = (
        "perflab, --no-rt, no pinning",
        f"perflab defaults (--cpu {cpu}, --rt)",
        "hyperfine -N",
    )
    methods = {
        bare_plain: lambda t: bare(t, workload, args.runs),
        plain: lambda t: perflab(t, args.runs, cpus=(), rt=False),
        hf: lambda t: hyperfine(t, workload, args.runs),
        bare_rt: lambda t: bare(t, workload, args.runs, pinned_rt),
        tuned: lambda t: perflab(t, args.runs),
    }
    if shutil.which("hyperfine") is None:
        print("hyperfine not found (apt-get install -y hyperfine): its row is skipped")
    costs: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as d:
        for _ in range(args.rounds):
            for name, fn in methods.items():
                cost = fn(Path(d))
                if isinstance(cost, tuple):
                    cost, all_in = cost
                    costs.setdefault(f"{name}, all-in", []).append(all_in)
                if cost is not None:
                    costs.setdefault(name, []).append(cost)
    print(
        f"{args.runs} runs x {args.rounds} interleaved rounds of {Path(workload).name} "
        f"(static, -O0); shared 2-CPU machine, load {os.getloadavg()[0]:.2f}"
    )
    print(f"{'method':<48}{'median us/run':>14}{'min us/run':>12}")
    for name, v in costs.items():
        v = np.array(v) / 1e3
        print(f"{name:<48}{np.median(v):>14.1f}{v.min():>12.1f}")
    print("ratios: median over rounds of the per-round ratio [ratio of the minima]")
    for num, den in [(plain, bare_plain), (tuned, bare_rt), (plain, hf), (f"{plain}, all-in", hf)]:
        if num in costs and den in costs:
            a, b = np.array(costs[num]), np.array(costs[den])
            print(f"  {num} / {den}: {np.median(a / b):.3f} [{a.min() / b.min():.3f}]")
    json.dump(costs, sys.stderr)
    print(file=sys.stderr)


if __name__ == "__main__":
    main()
