"""What profiling adds to a program's wall time: plain vs perflab profile (readings alone, with
exit records) vs strace -f -T, interleaved, on a futex ping-pong of a known rate; and the
sleeper's blocked time against strace's futex total for the same thread.

Run: PYTHONPATH=src python benchmarks/profile_overhead.py [HANDOFFS] [REPS] [WORK_US]
WORK_US: clock_gettime-timed spinning by each player before it hands the turn on, to set the rate
of futex waits (0: as fast as they go; 100 gives about 10 000 a second).
"""

import resource
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from perflab.lab import profile
from perflab.running import spawn
from perflab.system import compiler, machine, stracelog, taskstats

# Two threads hand a turn back and forth through a mutex and two condition variables: every
# handoff is one futex wait and one futex wake.
PINGPONG = r"""
#include <pthread.h>
#include <stdlib.h>
#include <time.h>
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t c[2] = {PTHREAD_COND_INITIALIZER, PTHREAD_COND_INITIALIZER};
static long turn, n, work_ns;
static long long now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000LL + t.tv_nsec;
}
static void *player(void *arg)
{
    long me = (long)arg;
    pthread_mutex_lock(&m);
    while (turn < n) {
        while (turn % 2 != me && turn < n)
            pthread_cond_wait(&c[me], &m);
        for (long long t0 = now_ns(); now_ns() - t0 < work_ns;)
            ;
        turn++;
        pthread_cond_signal(&c[1 - me]);
    }
    pthread_mutex_unlock(&m);
    return 0;
}
int main(int argc, char **argv)
{
    pthread_t a, b;
    n = argc > 1 ? atol(argv[1]) : 10000;
    work_ns = argc > 2 ? atol(argv[2]) * 1000 : 0;
    pthread_create(&a, 0, player, (void *)0);
    pthread_create(&b, 0, player, (void *)1);
    pthread_join(a, 0);
    pthread_join(b, 0);
    return 0;
}
"""


def compile_pingpong(tmp: Path) -> str:
    (tmp / "pingpong.c").write_text(PINGPONG)
    exe = tmp / "pingpong"
    subprocess.run(
        [*compiler.compiler(), "-O2", str(tmp / "pingpong.c"), "-o", str(exe)], check=True
    )
    return str(exe)


def wall_ns(argv: list[str]) -> int:
    """A plain run, timed the way perflab times children (spawn.run: wait4 and CLOCK_MONOTONIC)."""
    return int(spawn.run(argv, options=spawn.SpawnOptions(timeout=None))["wall_ns"])


def main() -> None:
    handoffs = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000
    reps = int(sys.argv[2]) if len(sys.argv) > 2 else 7
    work_us = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    records = taskstats.unavailable() is None
    tracer = stracelog.find()
    with tempfile.TemporaryDirectory() as tmp:
        exe = compile_pingpong(Path(tmp))
        argv = [exe, str(handoffs), str(work_us)]
        modes = {
            "plain": lambda: wall_ns(argv),
            # spawned and timed as profile does, never read: what the readings add is the rest
            "profile (no reading)": lambda: profile.run(
                argv, interval=10, exit_records=False
            ).attrs["perflab"]["wall_ns"],
            "profile (readings)": lambda: profile.run(argv, exit_records=False).attrs["perflab"][
                "wall_ns"
            ],
        }
        if records:
            modes["profile (+exit records)"] = lambda: profile.run(argv).attrs["perflab"]["wall_ns"]
        if tracer:
            modes["strace -f -T"] = lambda: wall_ns(
                [tracer, "-f", "-T", "-qq", "-o", "/dev/null", *argv]
            )
        walls: dict[str, list[int]] = {m: [] for m in modes}
        for rep in range(reps):
            order = list(modes) if rep % 2 == 0 else list(reversed(modes))
            for m in order:
                walls[m].append(modes[m]())
        own = own_cpu_us(argv)
    base = np.median(walls["plain"])
    load = Path("/proc/loadavg").read_text().split()[0]
    print(f"{machine.cpu_model()}, {len(machine.online_cpus())} CPUs, load average {load}")
    print(f"pingpong {handoffs} handoffs ({work_us} us of work each), {reps} interleaved runs "
          "per mode, median wall; x: / plain, and / profile spawned but not read:")  # fmt: skip
    unread = np.median(walls["profile (no reading)"])
    for m, w in walls.items():
        rate = handoffs / (np.median(w) / 1e9)
        print(f"  {m:26s} {np.median(w) / 1e6:9.1f} ms  x{np.median(w) / base:5.2f}"
              f"  x{np.median(w) / unread:5.2f}  ({rate:,.0f} handoffs/s)")  # fmt: skip
    print(f"perflab's own CPU per reading of the 3 threads: {own:.0f} us "
          f"(at the default {profile.INTERVAL_S * 1e3:g} ms interval)")  # fmt: skip
    if tracer:
        blocked_vs_futex(handoffs, work_us)


def own_cpu_us(argv: list[str], runs: int = 5) -> float:
    """perflab's CPU (user + system, its own process) per reading, median of a few runs: what
    profiling takes from a machine with no CPU to spare, whatever the noise in wall times. A
    run read once (interval 10 s) is subtracted: spawning, metadata and the frame cost the same."""

    def cpu_and_readings(interval: float) -> tuple[float, int]:
        before = resource.getrusage(resource.RUSAGE_SELF)
        df = profile.run(argv, interval=interval, exit_records=False)
        after = resource.getrusage(resource.RUSAGE_SELF)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        return cpu, df.attrs["perflab"]["readings"]

    per = []
    for _ in range(runs):
        (cpu, n), (cpu0, n0) = cpu_and_readings(profile.INTERVAL_S), cpu_and_readings(10)
        per.append((cpu - cpu0) / max(n - n0, 1) * 1e6)
    return float(np.median(per))


def blocked_vs_futex(handoffs: int, work_us: int) -> None:
    """In one strace'd run: each player's blocked time (/proc, exit records) against strace's sum
    of its futex calls (the article's grep | paste | bc)."""
    with tempfile.TemporaryDirectory() as tmp:
        df = profile.run([compile_pingpong(Path(tmp)), str(handoffs), str(work_us)], strace=True)
    calls = profile.syscalls(df)
    print("same run under strace: blocked and its futex share (profile) vs time inside futex "
          "(strace -T)")  # fmt: skip
    for row in df[(df["tid"] >= 0) & (df["tid"] != df["pid"])].itertuples():
        futex = calls[(calls["tid"] == row.tid) & (calls["syscall"] == "futex")]["total_ns"].sum()
        ms = {k: getattr(row, k) / 1e6 for k in ("blocked_ns", "blocked_futex_ns", "runq_ns")}
        print(f"  tid {row.tid}: blocked {ms['blocked_ns']:7.1f} ms, in futex "
              f"{ms['blocked_futex_ns']:7.1f} ms; strace futex {futex / 1e6:7.1f} ms; "
              f"run queue {ms['runq_ns']:6.1f} ms")  # fmt: skip


if __name__ == "__main__":
    main()
