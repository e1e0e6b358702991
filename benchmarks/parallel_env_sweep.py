"""The same env-size sweep one child at a time and one child per CPU: time, medians, windows.

Runs env_size.sweep twice in this process with the same arguments and seed, --jobs 1 then
--jobs 0 (all usable CPUs), and prints: the wall-time ratios (the whole sweep call, and its
measuring loop alone, without the build check, preflight and final merge); how far the
parallel per-size medians are from the sequential ones, next to the sequential sweep's own
run-to-run spread (the difference between its even and odd repetitions, scaled to full
samples); whether the same windows (start, width, spacing) are found; and the parallel
sweep's own check against its sequential reference slice. Extra arguments go to both sweeps
(default: the full sweep, 8193 sizes x 100 runs).

    PYTHONPATH=src python benchmarks/parallel_env_sweep.py --max 2047 --repeat 100
"""

import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from perflab import env_size, machine, parallel, results

AGREE = 1.25  # parallel-vs-sequential spread may exceed the sequential run-to-run one by this


def _sweep(args: list[str], out: Path, jobs: int) -> tuple[float, float]:
    """One sweep in this process: its wall time (call to return) and its measuring loop's
    (first run started to last run recorded), so process start-up counts for neither."""
    marks: dict[str, float] = {}
    params = _params(args)
    shown = " ".join(f"--{k.replace('_size', '').replace('_', '-')} {v}" for k, v in params.items())
    print(f"$ perflab sweep env-size {shown} --jobs {jobs} -o {out}", flush=True)
    t = time.monotonic()
    env_size.sweep(output=out, jobs=jobs, **params,
                   on_start=lambda todo, done: marks.setdefault("start", time.monotonic()),
                   progress=lambda n: marks.__setitem__("last", time.monotonic()))  # fmt: skip
    return time.monotonic() - t, marks["last"] - marks["start"]


def _params(args: list[str]) -> dict:
    """--min/--max/--step/--repeat/--seed N as sweep() keywords (the benchmark's only options)."""
    names = {"--min": "min_size", "--max": "max_size", "--step": "step", "--repeat": "repeat",
             "--seed": "seed"}  # fmt: skip
    if len(args) % 2 or any(a not in names for a in args[::2]):
        sys.exit(f"usage: {sys.argv[0]} [--min N] [--max N] [--step N] [--repeat N] [--seed N]")
    return {names[a]: int(v) for a, v in zip(args[::2], args[1::2], strict=True)}


def _robust_sd(x: np.ndarray) -> float:
    return float(1.4826 * np.median(np.abs(x - np.median(x))))


def _windows(df) -> list[tuple[int, int]]:
    w = env_size.detect_windows(env_size.summarize(df))
    return list(zip(w["start"], w["width"], strict=True))


def main() -> None:
    args = sys.argv[1:]
    cpus = machine.usable_cpus()
    print(f"machine: {machine.cpu_model()}, usable CPUs {machine.format_cpu_list(cpus)}; "
          f"load average before: {os.getloadavg()[0]:.2f}")  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        seq_out, par_out = Path(tmp) / "seq.parquet", Path(tmp) / "par.parquet"
        t_seq, loop_seq = _sweep(args, seq_out, 1)
        load_mid = os.getloadavg()[0]
        t_par, loop_par = _sweep(args, par_out, 0)
        seq, par = results.load(seq_out), results.load(par_out)
    print(f"load average between: {load_mid:.2f}, after: {os.getloadavg()[0]:.2f}")
    print(f"runs: {len(seq)} each; sweep wall: sequential {t_seq:.1f} s, {len(cpus)} CPUs "
          f"{t_par:.1f} s, ratio {t_par / t_seq:.3f} (target <= 0.55); measuring loop alone: "
          f"{loop_seq:.1f} s vs {loop_par:.1f} s, ratio {loop_par / loop_seq:.3f}")  # fmt: skip

    value = env_size.value_column(seq)
    a, b = env_size.summarize(seq, value), env_size.summarize(par, value)
    diff = (b["median"] - a["median"]).to_numpy(float)
    even, odd = (env_size.summarize(seq[seq["rep"] % 2 == k], value) for k in (0, 1))
    own = (even["median"] - odd["median"]).to_numpy(float) / np.sqrt(2)  # half samples: x sqrt 2
    own_sd, diff_sd = _robust_sd(own[np.isfinite(own)]), _robust_sd(diff[np.isfinite(diff)])
    bias = float(np.nanmedian(diff))
    within = float(np.nanmean(np.abs(diff) <= 2 * own_sd))
    agree = diff_sd <= AGREE * own_sd and abs(bias) <= own_sd
    print(f"per-size medians ({value}): parallel - sequential: median {bias:+.1f}, robust sd "
          f"{diff_sd:.1f}; sequential run-to-run robust sd {own_sd:.1f}; {within:.1%} of sizes "
          f"within 2 run-to-run sd -> {'agree' if agree else 'DO NOT agree'} "
          f"(spread within x{AGREE}, bias within 1 sd)")  # fmt: skip

    wa, wb = _windows(seq), _windows(par)
    same = wa == wb
    print(f"windows (start, width): sequential {wa}; parallel {wb} -> "
          f"{'the same' if same else 'DIFFERENT'}")  # fmt: skip
    if len(wa) > 1 and len(wb) > 1:
        print(f"spacing: sequential {np.diff([s for s, _ in wa]).tolist()}, "
              f"parallel {np.diff([s for s, _ in wb]).tolist()}")  # fmt: skip
    for line in parallel.describe(results.metadata(par).get("interference", {})):
        print(line)


if __name__ == "__main__":
    main()
