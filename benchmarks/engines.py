"""The env-size sweep's two engines side by side: exec'd runs, the shift engine, a bare C loop.

One invocation runs, on the same sizes, a bare C posix_spawn+waitpid loop of the built-in loop's
binary (spawn_overhead.py's, under the same taskset and chrt as perflab's default pinning and
real-time priority), `env_size.sweep(engine="exec")` and `env_size.sweep(engine="shift")`, in
interleaved rounds; it prints each method's cost per run, their ratios, the windows each
engine found with the windows the addresses predict, and how the engines' per-size medians
agree away from every window: their median ratio over sizes, and the sizes where they stand
further apart than the exec engine's first and last rounds stand from each other (2 % at least).
Whether they agree is a property of the CPU and of the host's noise, not a test: an AMD EPYC
guest agreed, a Xeon with AMX (model A7h) agreed in most runs and read 3 % apart in one, a Xeon
model CFh read 8-14 % apart at 21 of 48 sizes (the shift engine's timing check refuses such).

    PYTHONPATH=src python benchmarks/engines.py                      # 2300..2400, 20 a size
    PYTHONPATH=src python benchmarks/engines.py --min 0 --max 1023 --repeat 10 --rounds 3
    PYTHONPATH=src python benchmarks/engines.py --full               # 0..8192, 100 a size

--full is the default sweep of `perflab sweep env-size` (819 300 runs) with each engine once,
journaled to a temporary file as the command line does: about ten minutes for the exec engine
on a 2-CPU guest. Its bare loop runs 20 000 runs only (--bare-runs), timed per run.
"""

import argparse
import os
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
from spawn_overhead import bare

from perflab.lab import env_size
from perflab.lab.env_size import windows
from perflab.running import cpuchoice
from perflab.store import results
from perflab.system import machine


def sweep(out: Path, engine: str, **plan) -> tuple[pd.DataFrame, float, float]:
    """One sweep with an engine: its rows, seconds all in (build-cache lookup, checks, final
    merge) and seconds from its first chunk submitted to its last journaled."""
    out.unlink(missing_ok=True)
    stamps: list[float] = []
    start = time.perf_counter()
    df = env_size.sweep(
        engine=engine,
        output=out,
        on_start=lambda todo, done: stamps.append(time.perf_counter()),
        progress=lambda n: stamps.append(time.perf_counter()),
        **plan,
    )
    return df, time.perf_counter() - start, stamps[-1] - stamps[0]


def edges(df: pd.DataFrame) -> str:
    """The windows the sweep's medians show, as start-end, k = 5 as the CLI's default."""
    found = env_size.detect_windows(env_size.summarize(df))
    return ", ".join(f"{w.start}-{w.end}" for w in found.itertuples()) or "none"


def predicted(df: pd.DataFrame) -> str:
    sizes = np.unique(df["env_size"])
    table = windows.predicted_from(results.metadata(df), sizes)
    if table is None:
        return "none recorded"
    return ", ".join(f"{w.start}-{w.end}" for w in table.itertuples()) or "none"


def agreement(rounds: dict[str, list[pd.DataFrame]]) -> str:
    """How the shift engine's per-size medians stand from the exec engine's, away from the
    windows either engine shows: median ratio and the sizes beyond exec's own agreement."""
    med = {e: env_size.summarize(pd.concat(r)).set_index("env_size")["median"]
           for e, r in rounds.items()}  # fmt: skip
    outside = med["exec"].index
    for df in rounds["exec"] + rounds["shift"]:
        for w in env_size.detect_windows(env_size.summarize(df)).itertuples():
            outside = outside[(outside < w.start) | (outside > w.end)]
    first, last = (env_size.summarize(rounds["exec"][i]).set_index("env_size")["median"]
                   for i in (0, -1))  # fmt: skip
    itself = max(float(np.abs(np.log(last[outside] / first[outside])).max()), np.log1p(0.02))
    ratio = med["shift"][outside] / med["exec"][outside]
    beyond = int((np.abs(np.log(ratio)) > itself).sum())
    median = float(np.exp(np.log(ratio).median()))
    return (
        f"shift / exec medians away from windows: {median:.3f} over {len(ratio)} sizes; "
        f"{beyond} beyond exec's own agreement ({np.expm1(itself):.1%})"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--min", type=int, default=2300)
    ap.add_argument("--max", type=int, default=2400)
    ap.add_argument("--step", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--full", action="store_true", help="0..8192, 100 a size, one round")
    ap.add_argument("--bare-runs", type=int, default=20000, help="the bare loop's runs in --full")
    args = ap.parse_args()
    if args.full:
        args.min, args.max, args.step, args.repeat, args.rounds = 0, 8192, 1, 100, 1
    plan = dict(min_size=args.min, max_size=args.max, step=args.step, repeat=args.repeat)
    runs = len(range(args.min, args.max + 1, args.step)) * args.repeat
    bare_runs = min(runs, args.bare_runs) if args.full else runs
    workload = str(windows.build_loop().path)
    cpu = cpuchoice.pick().cpus[0]
    pinned_rt = ("taskset", "-c", str(cpu), "chrt", "-f", "1")
    methods = ("bare", "exec", "shift")
    per_run: dict[str, list[float]] = {m: [] for m in methods}
    all_in: dict[str, list[float]] = {m: [] for m in methods}
    frames: dict[str, pd.DataFrame] = {}
    rounds: dict[str, list[pd.DataFrame]] = {"exec": [], "shift": []}
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        for _ in range(args.rounds):
            ns = bare(tmp, workload, bare_runs, pinned_rt)
            per_run["bare"].append(ns / 1e3)
            all_in["bare"].append(ns / 1e3)
            for engine in ("exec", "shift"):
                df, total, steady = sweep(tmp / f"{engine}.parquet", engine, **plan)
                per_run[engine].append(steady / runs * 1e6)
                all_in[engine].append(total / runs * 1e6)
                frames[engine] = df
                rounds[engine].append(df)
    print(
        f"sizes {args.min}..{args.max} step {args.step}, {args.repeat} runs a size: {runs} runs "
        f"per engine ({bare_runs} for the bare loop), {args.rounds} interleaved round(s)"
    )
    info = machine.cpuinfo()
    family = (f" (family {int(info['cpu family']):X}h, model {int(info.get('model', 0)):X}h)"
              if "cpu family" in info else "")  # fmt: skip
    print(
        f"{machine.cpu_model()}{family}; {len(machine.usable_cpus())} usable CPUs, load "
        f"{os.getloadavg()[0]:.2f}; runs pinned to CPU {cpu}, SCHED_FIFO 1 where granted"
    )
    names = {
        "bare": f"bare C posix_spawn+waitpid (taskset -c {cpu} chrt -f 1)",
        "exec": "perflab --engine exec",
        "shift": "perflab --engine shift",
    }
    print(f"{'method':<58}{'us/run':>9}{'all-in':>9}")
    for m in methods:
        print(f"{names[m]:<58}{np.median(per_run[m]):>9.1f}{np.median(all_in[m]):>9.1f}")
    print("ratios (median over rounds of the per-round ratio; all-in in brackets):")
    for num, den in (("exec", "shift"), ("bare", "shift"), ("exec", "bare")):
        a, b = np.array(per_run[num]), np.array(per_run[den])
        c, e = np.array(all_in[num]), np.array(all_in[den])
        print(f"  {num} / {den}: {np.median(a / b):.2f}x [{np.median(c / e):.2f}x]")
    print(f"windows predicted from the addresses: {predicted(frames['exec'])}")
    found = {engine: edges(df) for engine, df in frames.items()}
    for engine, text in found.items():
        print(f"windows seen, {engine} engine: {text}")
    print(f"same edges: {'yes' if found['exec'] == found['shift'] else 'NO'}")
    print(agreement(rounds))


if __name__ == "__main__":
    main()
