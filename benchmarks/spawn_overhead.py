"""Cost of perflab's env-size sweep vs a bare C posix_spawn loop (and hyperfine -N).

Per run (default): all three run the same static workload (the built-in Mytkowicz loop) the
same number of times, in interleaved rounds so machine drift hits them alike; the per-run
cost of a method is the median over rounds of (wall time of the round / runs).

Whole process (--whole): `perflab sweep env-size --min 0 --max 199 --repeat 100 --aslr off
--cpu N -o FILE` as a command (start-up, analysis and report included) against the bare loop
running the same binary with the same environment sizes in the same order (ASLR off, under
taskset -c N and chrt -f 1 as perflab's defaults pin and prioritise the child), in
interleaved rounds, plus perflab's start-up alone (the same command for one run). Printed:
wall and CPU time of each, and perflab / bare with and without its start-up.

    PYTHONPATH=src python benchmarks/spawn_overhead.py [--runs 2000] [--rounds 5]
    PYTHONPATH=src python benchmarks/spawn_overhead.py --whole [--repeat 100] [--rounds 3]
        [--against OTHER/src]

With --against, the same sweep also runs from another tree's sources (built in place: `python
setup.py build_ext --inplace` there) in every round, the two trees' order alternating, and the
ratio this tree / that tree is printed per round's pair: median and its 95 % order-statistic
interval over rounds, so that "within 2 %" is decided by the interval, not read from two runs.
The children's work is the same from either tree, and on a shared guest it spreads the whole
by several per cent a round; so perflab's own process CPU (its children's left out, read at its
exit) is printed too, and its difference between the trees as a share of the whole.
"""

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from perflab.analysis import stats
from perflab.lab import env_size
from perflab.lab.env_size import windows
from perflab.lab.env_size.plan import EnvSizePlan
from perflab.running import cpuchoice
from perflab.system import compiler

OTHER = "perflab sweep env-size (--against)"

BARE = r"""
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
/* bare N PROGRAM [SIZES]: N runs of PROGRAM with only A=<100 a>, or A=<SIZES[i] a> (int64s). */
int main(int argc, char **argv)
{
    int n = atoi(argv[1]), st;
    static char pad[1 << 16] = "A=";
    char *av[] = {argv[2], NULL}, *ev[] = {pad, NULL};
    int64_t *sizes = calloc(n, sizeof *sizes);
    FILE *f = argc > 3 ? fopen(argv[3], "rb") : NULL;
    struct timespec a, b;
    pid_t pid;
    if (!sizes || (argc > 3 && (!f || fread(sizes, sizeof *sizes, n, f) != (size_t)n)))
        return 1;
    for (int i = 0; i < n; i++)
        sizes[i] = argc > 3 ? sizes[i] : 100;
    memset(pad + 2, 'a', sizeof pad - 3);
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (int i = 0; i < n; i++) {
        pad[2 + sizes[i]] = '\0';
        if (posix_spawn(&pid, argv[2], NULL, NULL, av, ev) != 0 || waitpid(pid, &st, 0) < 0)
            return 1;
        pad[2 + sizes[i]] = 'a';
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    printf("%.0f\n", (b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec));
    return 0;
}
"""


def compiled(tmp: Path) -> Path:
    """The bare loop, built once per temporary directory."""
    exe = tmp / "bare"
    if not exe.exists():
        (tmp / "bare.c").write_text(BARE)
        cc = compiler.compiler()
        subprocess.run([*cc, "-O2", "-Wall", "-Werror", tmp / "bare.c", "-o", exe], check=True)
    return exe


def bare(tmp: Path, workload: str, runs: int, prefix: tuple[str, ...] = ()) -> float:
    """ns per run of the C loop (timed inside it); prefix e.g. taskset/chrt for its conditions."""
    cmd = [*prefix, str(compiled(tmp)), str(runs), workload]
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


# perflab run so that, at its exit, it writes its own CPU seconds (its children's left out) to
# the file $PERFLAB_BENCH_SELF: the part of the whole that perflab's code, not the runs, spends.
SELF_CPU = """import atexit, os, resource, runpy
def said():
    u = resource.getrusage(resource.RUSAGE_SELF)
    with open(os.environ["PERFLAB_BENCH_SELF"], "w") as f:
        f.write(repr(u.ru_utime + u.ru_stime))
atexit.register(said)
runpy.run_module("perflab", run_name="__main__", alter_sys=True)
"""


def timed(cmd: list[str], own: Path | None = None) -> tuple[float, ...]:
    """Wall and CPU seconds (user + system of the process and the children it waited for) of
    one command, its output discarded; Python may cache bytecode, as an installed perflab has.
    With `own` (a command started through SELF_CPU), perflab's own CPU seconds as a third."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    if own is not None:
        own.unlink(missing_ok=True)
        env["PERFLAB_BENCH_SELF"] = str(own)
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    assert proc.stderr is not None
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.stderr.close()
    if os.waitstatus_to_exitcode(status):
        raise SystemExit(f"{' '.join(map(str, cmd))} failed:\n{err.decode(errors='replace')}")
    cpu = usage.ru_utime + usage.ru_stime
    return (wall, cpu) if own is None else (wall, cpu, float(own.read_text()))


def whole(repeat: int, rounds: int, pin_perflab: bool, cpu: str, against: Path | None) -> None:
    """perflab's sweep as a command vs the bare loop on the same runs, with and without its
    start-up (the same command for one run); with `against`, the same sweep from that tree."""
    workload = env_size.resolve_program((), "0")[0][0]
    sizes = EnvSizePlan(min_size=0, max_size=199, repeat=repeat).pairs()[0]
    rt = ("taskset", "-c", cpu, "chrt", "-f", "1")
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        (tmp / "sizes").write_bytes(sizes.astype(np.int64).tobytes())
        out = tmp / "sweep.parquet"
        own = tmp / "own-cpu" if against is not None else None

        def sweep(max_size: int, times: int, src: Path | None = None) -> list[str]:
            out.unlink(missing_ok=True)
            opts = f"--min 0 --max {max_size} --repeat {times} --aslr off --cpu {cpu}".split()
            cmd = ["perflab", "sweep", "env-size", *opts, "-o", str(out)]
            path = () if src is None else ("env", f"PYTHONPATH={src}")
            pin = ("taskset", "-c", cpu) if pin_perflab else ()
            start = ("-c", SELF_CPU) if against is not None else ("-m", "perflab")
            return [*path, *pin, sys.executable, *start, *cmd[1:]]

        bare_cmd = [*rt, "setarch", platform.machine(), "-R", str(compiled(tmp)),
                    str(sizes.size), workload, str(tmp / "sizes")]  # fmt: skip
        methods = {
            "bare C posix_spawn+waitpid": lambda: timed(bare_cmd),
            "perflab sweep env-size": lambda: timed(sweep(199, repeat), own),
            "perflab start-up (the same, 1 run)": lambda: timed(sweep(0, 1)),
        }
        if against is not None:
            methods[OTHER] = lambda: timed(sweep(199, repeat, against), own)
        got: dict[str, list[tuple[float, ...]]] = {name: [] for name in methods}
        load = os.getloadavg()[0]
        for r in range(rounds):
            names = list(methods)
            if against is not None and r % 2:
                names[1], names[-1] = names[-1], names[1]
            for name in names:
                got[name].append(methods[name]())
    print(
        f"{sizes.size} runs (env sizes 0..199 x {repeat}, perflab's random order) of "
        f"{Path(workload).name}, ASLR off, child on CPU {cpu} under SCHED_FIFO 1, "
        f"{rounds} interleaved rounds; perflab itself "
        f"{'pinned to CPU ' + cpu if pin_perflab else 'unpinned'}; "
        f"load {load:.2f} before, {os.getloadavg()[0]:.2f} after"
    )
    print(f"{'method':<40}{'wall s median':>14}{'min':>8}{'CPU s median':>14}")
    for name, v in got.items():
        wall, cpu_s = np.array(v).T[:2]
        print(f"{name:<40}{np.median(wall):>14.3f}{wall.min():>8.3f}{np.median(cpu_s):>14.3f}")
    bare_s, full, start = (np.array(got[k]).T for k in list(got)[:3])
    print("perflab / bare, median over rounds of the per-round ratio [ratio of the minima]:")
    for what, i in (("wall", 0), ("CPU", 1)):
        ratios = [(full[i], "whole process"), (full[i] - start[i], "start-up removed")]
        print(f"  {what}: " + ", ".join(
            f"{name} {np.median(x / bare_s[i]):.3f} [{x.min() / bare_s[i].min():.3f}]"
            for x, name in ratios))  # fmt: skip
    if against is not None:
        other = np.array(got[OTHER]).T
        print(f"this tree / {against} (the same sweep, per round; 95 % order-statistic interval):")
        for what, i in (("wall", 0), ("CPU", 1)):
            med, lo, hi = stats.median_order_interval(full[i] / other[i])
            if lo >= 0.98 and hi <= 1.02:
                verdict = "within 2 %"
            elif lo > 1.02 or hi < 0.98:
                verdict = "differs by more than 2 %"
            else:
                verdict = "undecided: more rounds"
            print(f"  {what}: {med:.3f} ({lo:.3f}-{hi:.3f}): {verdict}")
        # The children run the same binary with the same environments in the same order from
        # either tree: what a tree can change is its own process's CPU, read apart from theirs.
        med, lo, hi = stats.median_order_interval(full[2] / other[2])
        print(
            f"  perflab's own CPU (children left out; {np.median(full[2]):.2f} s of "
            f"{np.median(full[1]):.2f} s here): {med:.3f} ({lo:.3f}-{hi:.3f})"
        )
        med, lo, hi = stats.median_order_interval((full[2] - other[2]) / other[1])
        print(f"  that difference as a share of the whole CPU: {med:+.2%} ({lo:+.2%} to {hi:+.2%})")
    json.dump({k: [list(x) for x in v] for k, v in got.items()}, sys.stderr)
    print(file=sys.stderr)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--whole", action="store_true", help="Whole processes: see above.")
    ap.add_argument("--repeat", type=int, default=100, help="With --whole: runs per size.")
    ap.add_argument("--pin-perflab", action="store_true",
                    help="With --whole: perflab's own process on the child's CPU too.")  # fmt: skip
    ap.add_argument("--cpu", default=str(cpuchoice.pick().cpus[0]),
                    help="With --whole: the children's CPU (default: perflab's).")  # fmt: skip
    ap.add_argument("--against", type=Path,
                    help="With --whole: another tree's src/, the same sweep from it.")  # fmt: skip
    args = ap.parse_args()
    if args.whole:
        whole(args.repeat, args.rounds, args.pin_perflab, args.cpu, args.against)
        return
    workload = str(windows.build_loop().path)
    cpu = cpuchoice.pick().cpus[0]
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
