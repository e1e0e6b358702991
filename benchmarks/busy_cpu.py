"""An env-size sweep beside a real-time busy loop on the CPU perflab used to take (the last
usable one), against a bare spawn loop at the same moment (issue 48: 22.7 s against 2.8 s).

A SCHED_FIFO hog (priority 1, as `chrt -f 1`) pinned to that CPU spins 95 ms of every 100 ms
(and the kernel's real-time throttling, checked on, leaves others 5 % too); it ends itself
after --hog-s seconds whatever happens here, dies with this process (PR_SET_PDEATHSIG), and
is killed at the end. Meanwhile: perflab's env-size sweep with its default CPU (chosen by
reading each CPU's load), then the bare C posix_spawn loop (spawn_overhead.py's) with its
children where and as perflab ran them (taskset -c CHOSEN chrt -f 1). Printed: the CPU perflab
chose and why, each wall time, and the sweep's over the bare loop's (target: at most 1.3),
all-in (start-up and report included) and over its runs alone.

    sudo PYTHONPATH=src python benchmarks/busy_cpu.py [--runs 5000] [--hog-s 55]
"""

import argparse
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

from spawn_overhead import bare

from perflab.errors import PerflabNote
from perflab.lab import env_size
from perflab.store import results
from perflab.system import machine

# The hog: pinned, SCHED_FIFO 1, 95 ms busy in every 100 ms, gone after its deadline or with
# its parent (prctl PR_SET_PDEATHSIG = 1, SIGKILL), whichever comes first.
HOG = r"""
import ctypes, os, signal, sys, time
ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)
if os.getppid() != int(sys.argv[3]):
    sys.exit(0)
os.sched_setaffinity(0, {int(sys.argv[1])})
os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
print("ready", flush=True)
end = time.monotonic() + float(sys.argv[2])
while (now := time.monotonic()) < end:
    while time.monotonic() - now < 0.095:
        pass
    time.sleep(0.005)
"""


def refusal() -> str | None:
    """Why the hog cannot run safely here (None: it can)."""
    if os.geteuid() != 0:
        return "needs root for SCHED_FIFO (sudo)"
    runtime = Path("/proc/sys/kernel/sched_rt_runtime_us").read_text().strip()
    if runtime == "-1":
        return "real-time throttling is off (sched_rt_runtime_us = -1): a FIFO hog could hold a CPU"
    if len(machine.usable_cpus()) < 2:
        return "needs two usable CPUs: one for the hog, one to measure on"
    return None


def start_hog(cpu: int, seconds: float) -> subprocess.Popen:
    """The hog, once it runs pinned at real-time priority."""
    hog = subprocess.Popen([sys.executable, "-c", HOG, str(cpu), str(seconds), str(os.getpid())],
                           stdout=subprocess.PIPE, text=True)  # fmt: skip
    assert hog.stdout is not None
    if hog.stdout.readline().strip() != "ready":
        hog.kill()
        raise SystemExit("the hog did not start (SCHED_FIFO refused?)")
    return hog


def sweep(runs: int, out: Path) -> tuple[float, float, dict, list[str]]:
    """Wall seconds of env_size.sweep over `runs` runs (100 sizes): all-in, and from its first
    run to its last recorded (the runs, without start-up and report); its metadata, its notes."""
    stamps: list[float] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", PerflabNote)
        t = time.perf_counter()
        df = env_size.sweep(min_size=0, max_size=99, repeat=runs // 100, output=out,
                            on_start=lambda todo, done: stamps.append(time.perf_counter()),
                            progress=lambda n: stamps.append(time.perf_counter()))  # fmt: skip
        took = time.perf_counter() - t
    notes = [str(w.message) for w in caught if issubclass(w.category, PerflabNote)]
    return took, stamps[-1] - stamps[0], results.metadata(df), notes


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5000)
    ap.add_argument("--hog-s", type=float, default=55.0, help="The hog's hard time limit.")
    args = ap.parse_args()
    why = refusal()
    if why:
        print(f"skipped: {why}")
        return
    cpu = machine.usable_cpus()[-1]  # what perflab took before it looked
    workload = env_size.resolve_program((), "0")[0][0]
    load = os.getloadavg()[0]
    import pandas  # noqa: F401 - loaded before the clock starts, as in a warm process
    import pyarrow.parquet  # noqa: F401

    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        bare(tmp, workload, 10)  # built and warm before the hog starts
        hog = start_hog(cpu, args.hog_s)
        began = time.monotonic()
        try:
            sweep_s, runs_s, meta, notes = sweep(args.runs, tmp / "sweep.parquet")
            # the bare loop's children where perflab's ran and as they ran: pinned, FIFO 1
            chosen = ",".join(map(str, meta.get("cpus", [])))
            pinned = ("taskset", "-c", chosen, "chrt", "-f", "1")
            bare_s = [bare(tmp, workload, args.runs, pinned) * args.runs / 1e9]
            alive = hog.poll() is None
        finally:
            hog.send_signal(signal.SIGKILL)
            hog.wait()
    spent = time.monotonic() - began
    print(f"{platform.node()}: {machine.cpu_model()}, {len(machine.usable_cpus())} usable CPUs, "
          f"load {load:.2f} before, {os.getloadavg()[0]:.2f} after")  # fmt: skip
    state = "running throughout" if alive else "ENDED BEFORE THE LAST LOOP"
    print(f"hog: SCHED_FIFO 1 on cpu {cpu}, 95 ms busy per 100 ms, {state} ({spent:.1f} s)")
    print(f"perflab chose cpus {meta.get('cpus')}: {meta.get('cpu_choice')}")
    for note in notes:
        print(f"  said: perflab: {note}")
    print(f"perflab sweep env-size, {args.runs} runs: {sweep_s:.2f} s all-in, "
          f"{runs_s:.2f} s from its first run to its last")  # fmt: skip
    print(f"bare spawn loop, {args.runs} runs, taskset -c {chosen} chrt -f 1: {bare_s[0]:.2f} s")
    print(f"ratio sweep / bare: {sweep_s / bare_s[0]:.2f}x all-in, {runs_s / bare_s[0]:.2f}x "
          "its runs (target <= 1.3x)")  # fmt: skip
    disturbed = meta.get("disturbed") or {}
    print(f"disturbed runs flagged: {disturbed.get('runs')} of {disturbed.get('of')}")


if __name__ == "__main__":
    main()
