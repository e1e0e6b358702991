"""The same env-size sweep one child at a time and one child per CPU, alternated: S P S P S P.

Runs env_size.sweep 2 x --pairs times in this process with the same arguments and seed,
--jobs 1 and --jobs 0 (all usable CPUs) in turn, so that drift over the run (other load,
frequency, the host) shows as a difference between the sequential sweeps themselves and cannot
pose as an effect of running in parallel. Prints, with the load average around every sweep:

- the wall-time ratio of each pair (P_i / S_i: the whole sweep call, and its measuring loop
  alone, without the build check, preflight and final merge) and their median;
- per-size medians: parallel minus sequential within each pair, next to the run-to-run spread
  of sequential sweeps (S_j minus S_i, every pair of them): robust sd and bias (median) of the
  differences;
- the windows (start, width) and their spacing found by every sweep;
- each parallel sweep's own check against its sequential reference slice.

Extra arguments go to every sweep (default: the full sweep, 8193 sizes x 100 runs).

    PYTHONPATH=src python benchmarks/parallel_env_sweep.py --step 4 --repeat 50 --pairs 3
"""

import itertools
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from perflab.lab import env_size
from perflab.running import lanes
from perflab.store import results
from perflab.system import machine

AGREE = 1.25  # parallel-vs-sequential spread may exceed the sequential run-to-run one by this
NAMES = {"--min": "min_size", "--max": "max_size", "--step": "step", "--repeat": "repeat",
         "--seed": "seed", "--pairs": "pairs"}  # fmt: skip


def _load() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


def _sweep(params: dict, out: Path, jobs: int) -> tuple[float, float]:
    """One sweep in this process: its wall time (call to return) and its measuring loop's
    (first run started to last run recorded), so process start-up counts for neither."""
    marks: dict[str, float] = {}
    shown = " ".join(f"--{k.replace('_size', '').replace('_', '-')} {v}" for k, v in params.items())
    print(f"$ perflab sweep env-size {shown} --jobs {jobs} -o {out.name}   (load {_load()})",
          flush=True)  # fmt: skip
    t = time.monotonic()
    env_size.sweep(output=out, jobs=jobs, **params,
                   on_start=lambda todo, done: marks.setdefault("start", time.monotonic()),
                   progress=lambda n: marks.__setitem__("last", time.monotonic()))  # fmt: skip
    return time.monotonic() - t, marks["last"] - marks["start"]


def _params(args: list[str]) -> tuple[dict, int]:
    """--min/--max/--step/--repeat/--seed N as sweep() keywords, and --pairs."""
    if len(args) % 2 or any(a not in NAMES for a in args[::2]):
        sys.exit(f"usage: {sys.argv[0]} [--min N] [--max N] [--step N] [--repeat N] [--seed N] "
                 "[--pairs N]")  # fmt: skip
    params = {NAMES[a]: int(v) for a, v in zip(args[::2], args[1::2], strict=True)}
    return params, params.pop("pairs", 3)


def _robust_sd(x: np.ndarray) -> float:
    x = x[np.isfinite(x)]
    return float(1.4826 * np.median(np.abs(x - np.median(x))))


def _medians(df: pd.DataFrame, value: str) -> np.ndarray:
    return env_size.summarize(df, value)["median"].to_numpy(float)


def _windows(df: pd.DataFrame) -> list[tuple[int, int]]:
    w = env_size.detect_windows(env_size.summarize(df))
    return list(zip(w["start"].tolist(), w["width"].tolist(), strict=True))


def _differences(label: str, a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    d = b - a
    sd, bias = _robust_sd(d), float(np.nanmedian(d))
    print(f"  {label}: bias (median) {bias:+8.1f}, robust sd {sd:8.1f}")
    return sd, bias


def main() -> None:
    params, pairs = _params(sys.argv[1:])
    cpus = machine.usable_cpus()
    print(f"machine: {machine.cpu_model()}, usable CPUs {machine.format_cpu_list(cpus)}, "
          f"{os.cpu_count()} online; load average (1/5/15 min) at start: {_load()}")  # fmt: skip
    walls, loops, frames = {}, {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(pairs):
            for kind, jobs in (("S", 1), ("P", 0)):
                out = Path(tmp) / f"{kind}{i + 1}.parquet"
                walls[kind, i], loops[kind, i] = _sweep(params, out, jobs)
                frames[kind, i] = results.load(out)
    print(f"load average at end: {_load()}")

    runs = len(frames["S", 0])
    print(f"\nwall time, {runs} runs per sweep ({len(cpus)} CPUs in parallel):")
    ratios, loop_ratios = [], []
    for i in range(pairs):
        r, lr = walls["P", i] / walls["S", i], loops["P", i] / loops["S", i]
        ratios.append(r)
        loop_ratios.append(lr)
        s, p = walls["S", i], walls["P", i]
        print(f"  pair {i + 1}: sequential {s:6.1f} s, parallel {p:6.1f} s, "
              f"ratio {r:.3f} (measuring loop {lr:.3f})")  # fmt: skip
    print(f"  median ratio {np.median(ratios):.3f} (target <= 0.55), measuring loop "
          f"{np.median(loop_ratios):.3f}")  # fmt: skip

    value = env_size.value_column(frames["S", 0])
    med = {k: _medians(df, value) for k, df in frames.items()}
    print(f"\nper-size medians ({value}), differences over {med['S', 0].size} sizes:")
    seq = [_differences(f"S{j + 1} - S{i + 1} (run to run)", med["S", i], med["S", j])
           for i, j in itertools.combinations(range(pairs), 2)]  # fmt: skip
    par = [_differences(f"P{i + 1} - S{i + 1} (parallel)  ", med["S", i], med["P", i])
           for i in range(pairs)]  # fmt: skip
    own_sd = float(np.median([sd for sd, _ in seq])) if seq else float("nan")
    own_bias = max((abs(b) for _, b in seq), default=float("nan"))
    par_sd, par_bias = (
        float(np.median([sd for sd, _ in par])),
        float(np.median([b for _, b in par])),
    )
    agree = par_sd <= AGREE * own_sd and abs(par_bias) <= max(own_bias, own_sd)
    print(f"  parallel vs sequential: robust sd {par_sd:.1f}, bias {par_bias:+.1f}; sequential "
          f"run to run: robust sd {own_sd:.1f}, largest |bias| {own_bias:.1f} -> "
          f"{'agree' if agree else 'DO NOT agree'} (spread within x{AGREE} of run to run, bias "
          f"within the largest run-to-run bias or one run-to-run sd)")  # fmt: skip

    found = {k: _windows(df) for k, df in frames.items()}
    print("\nwindows (start, width) and spacing:")
    for (kind, i), w in sorted(found.items(), key=lambda kv: (kv[0][1], kv[0][0] == "P")):
        spacing = np.diff([s for s, _ in w]).tolist()
        print(f"  {kind}{i + 1}: {w} spacing {spacing}")
    same = len({tuple(w) for w in found.values()}) == 1
    print(f"  -> {'the same in every sweep' if same else 'NOT the same in every sweep'}")

    print("\nin-run checks of the parallel sweeps against their sequential reference slices:")
    for i in range(pairs):
        print(f"  P{i + 1}:")
        for line in lanes.describe(results.metadata(frames["P", i]).get("interference", {})):
            print(f"  {line}")


if __name__ == "__main__":
    main()
