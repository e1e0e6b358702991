"""How close perflab profile's blocked time, and its futex share, come to a wait known by
construction (benchmarks/heldlock.c: waiters block on a lock a holder keeps for a timed interval
each round), and to strace -f -T's sum of the same waiters' futex calls.

Run: PYTHONPATH=src python benchmarks/profile_blocked.py [WAITERS] [ROUNDS] [HOLD_US] [REPS]
"""

import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from perflab.lab import profile
from perflab.system import compiler, machine, stracelog

HERE = Path(__file__).parent


def compile_heldlock(tmp: Path) -> str:
    exe = tmp / "heldlock"
    cmd = [*compiler.compiler(), "-O2", "-pthread", str(HERE / "heldlock.c"), "-o", str(exe)]
    subprocess.run(cmd, check=True)
    return str(exe)


def profiled(argv: list[str], tmp: Path, strace: bool) -> list[dict[str, float]]:
    """One run: per waiter, the constructed wait and what perflab (and strace) report, ns."""
    out = tmp / "out.txt"
    with open(out, "w") as f:
        df = profile.run(argv, stdout=f.fileno(), strace=strace)
    lines = out.read_text().splitlines()[1:]
    known = {int(t): int(ns) for t, ns in (line.split() for line in lines)}
    calls = profile.syscalls(df)
    rows = []
    for w in df[df["comm"] == "waiter"].itertuples():
        row = {"known": known[w.tid], "blocked": w.blocked_ns, "futex": w.blocked_futex_ns,
               "exact": w.cause_exact_ns, "shared": w.cause_shared_ns}  # fmt: skip
        if calls is not None:
            mine = calls[(calls["tid"] == w.tid) & (calls["syscall"] == "futex")]
            row["strace_futex"] = float(mine["total_ns"].sum())
        rows.append(row)
    return rows


def main() -> None:
    waiters, rounds, hold_us, reps = (int(a) for a in [*sys.argv[1:], "4", "100", "5000", "3"][:4])
    load = Path("/proc/loadavg").read_text().split()[:3]
    print(
        f"{machine.cpu_model()}, {len(machine.online_cpus())} CPUs, load average {' '.join(load)}"
    )
    print(f"heldlock {waiters} waiters, {rounds} rounds of {hold_us} us held, {reps} runs a mode")
    with tempfile.TemporaryDirectory() as tmp:
        argv = [compile_heldlock(Path(tmp)), str(waiters), str(rounds), str(hold_us)]
        plain, traced = [], []
        for _ in range(reps):
            plain += profiled(argv, Path(tmp), strace=False)
            if stracelog.find():
                traced += profiled(argv, Path(tmp), strace=True)
    ratio = lambda rows, k: np.array([r[k] / r["known"] for r in rows])  # noqa: E731
    print(f"per waiter ({len(plain)} waiter-runs), median and range of each / constructed wait:")
    for key, what in [
        ("blocked", "blocked (profile)"),
        ("futex", "futex-attributed (profile)"),
        ("exact", "  of which exact"),
        ("shared", "  of which shared (unseen)"),
    ]:
        r = ratio(plain, key)
        print(f"  {what:30s} {np.median(r):7.4f}  [{r.min():.4f}, {r.max():.4f}]")  # fmt: skip
    known_ms = np.median([r["known"] for r in plain]) / 1e6
    print(f"  (constructed wait: median {known_ms:.1f} ms per waiter)")
    if traced:
        print(f"under strace -f -T ({len(traced)} waiter-runs), / constructed wait:")
        for key, what in [
            ("strace_futex", "futex total (strace -T)"),
            ("futex", "futex-attributed (profile)"),
        ]:
            r = ratio(traced, key)
            print(f"  {what:30s} {np.median(r):7.4f}  [{r.min():.4f}, {r.max():.4f}]")  # fmt: skip
        same = np.array([r["futex"] / r["strace_futex"] for r in traced])
        print(f"  profile futex / strace futex, same run: {np.median(same):.4f} "
              f"[{same.min():.4f}, {same.max():.4f}]")  # fmt: skip
        untraced = np.median(ratio(plain, "futex")) / np.median(ratio(traced, "strace_futex"))
        print(f"  profile futex (untraced runs) / strace futex (traced runs), each per "
              f"constructed wait: {untraced:.4f}")  # fmt: skip


if __name__ == "__main__":
    main()
