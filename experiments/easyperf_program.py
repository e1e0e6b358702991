"""easyperf's analysis of a real multithreaded program: xz compressing a generated file at
1..N threads (`perflab sweep threads -- xz -T{threads} ...`), checked against `perf stat`.

The article studied h264dec at 1, 2, 4, 8 threads: wall time, CPU utilisation, IPC. Here the
program is xz, which splits its input into blocks compressed by -T threads; its wall and CPU
time per count are also taken by `perf stat` on the same command, in pairs of one perflab run
and one perf run, so the two tools can be compared while the neighbours' load drifts over both.
"""

import re
import shutil
import subprocess

import _common
import numpy as np

from perflab import machine, results, threads

FULL = {"lines": 2_000_000, "repeat": 7}
QUICK = {"lines": 300_000, "repeat": 3}
# 1 MiB blocks so even the quick file gives every thread a block (xz -1 defaults to 3 MiB).
XZ = ["-1", "--block-size=1MiB", "-c"]


def perf_stat(argv: list[str]) -> tuple[float, float] | None:
    """One `perf stat` run: elapsed ms and task-clock ms, or None without a working perf."""
    perf = shutil.which("perf")
    if perf is None:
        return None
    cmd = [perf, "stat", "-e", "task-clock", "--", *argv]
    proc = subprocess.run(cmd, env={}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          text=True, check=False)  # fmt: skip
    elapsed = re.search(r"([\d.]+) seconds time elapsed", proc.stderr)
    cpu = re.search(r"([\d.,]+) msec task-clock", proc.stderr)
    if proc.returncode != 0 or not elapsed or not cpu:
        return None
    return float(elapsed.group(1)) * 1e3, float(cpu.group(1).replace(",", ""))


def against_perf(command: list[str], n: int, repeat: int) -> tuple[float, float] | None:
    """Median of perflab / perf stat for wall and CPU time over pairs of runs, one of each
    in turn, so the neighbours' load drifts over both tools alike."""
    argv = [shutil.which(command[0]) or command[0], *(a.replace("{threads}", str(n))
                                                      for a in command[1:])]  # fmt: skip
    ratios = []
    for _ in range(repeat):
        ours = threads.program.run(command, [n], repeat=1, warn=lambda line: None).iloc[0]
        theirs = perf_stat(argv)
        if theirs is None:
            return None
        ratios.append((ours["wall_ns"] / 1e6 / theirs[0], ours["cpu_ns"] / 1e6 / theirs[1]))
    wall, cpu = np.median(np.array(ratios), axis=0)
    return float(wall), float(cpu)


def main(argv=None) -> None:
    args = _common.parse(__doc__, argv)
    if shutil.which("xz") is None:
        _common.cannot_run_here("xz is not installed: this experiment sweeps xz -T{threads}")
    stem = _common.name(__file__)
    params = QUICK if args.quick else FULL
    data = args.out / f"{stem}_input.txt"
    data.write_text("".join(f"{i}\n" for i in range(params["lines"])))
    counts = [n for n in (1, 2, 4, 8) if n <= len(machine.usable_cpus())]  # as the article
    command = ["xz", "-T{threads}", *XZ, str(data)]
    df = threads.program.run(command, counts, repeat=params["repeat"], seed=22)
    table = threads.program.summarize(df)
    _common.save(df, args, stem, input_bytes=data.stat().st_size)
    threads.program.plot(df, _common.figure(args, stem))
    print(f"figure: {_common.figure(args, stem)}")
    print(f"{results.metadata(df)['command']}\n{table.dropna(axis=1, how='all').to_string()}")
    rows = []
    for n in counts:
        pair = against_perf(command, n, params["repeat"])
        what = f"{n} thread(s): perflab / perf stat, median of {params['repeat']} pairs"
        if pair is None:
            rows.append((what, "-", "perf not usable here"))
            continue
        rows.append((what, "-", f"wall {pair[0] - 1:+.1%}, CPU {pair[1] - 1:+.1%}"))
    most = table.iloc[-1]
    rows += [
        ("scaling", "h264dec: stops after 4 threads on 4 cores",
         f"speedup {most['speedup']:.2f} at {int(most['threads'])} threads"),
        ("CPU utilisation", "5 threads -> 4 busy",
         f"{int(most['threads'])} threads -> {most['utilisation']:.2f} busy"),
        ("IPC", "from perf stat cycles/instructions",
         "n/a: no PMU here" if table["ipc"].isna().all() else f"{most['ipc']:.2f}"),
        ("runs flagged disturbed", "-", f"{int(table['disturbed'].sum())} of {len(df)}"),
    ]  # fmt: skip
    _common.side_by_side("A real program's thread scaling, and perf stat on the same runs", rows)
    data.unlink()
    _common.done(args)


if __name__ == "__main__":
    main()
