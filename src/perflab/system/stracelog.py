"""Time inside each system call, per thread, from `strace -f -T`: the article's grep | paste | bc.

A call that blocks is split by strace into `<unfinished ...>` and `<... NAME resumed>`; the
duration strace prints on the resumed line is the whole call's, so only lines that end in
`<seconds>` are counted and each call is counted once.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from perflab.core.lazy import pd

# -T durations are wall time inside a call, blocked or not; grouped as the article reads them.
KINDS = {
    "futex": "futex",
    "read": "read/recv", "readv": "read/recv", "pread64": "read/recv", "preadv": "read/recv",
    "preadv2": "read/recv", "recvfrom": "read/recv", "recvmsg": "read/recv",
    "recvmmsg": "read/recv",
    "poll": "poll/epoll", "ppoll": "poll/epoll", "select": "poll/epoll",
    "pselect6": "poll/epoll", "epoll_wait": "poll/epoll", "epoll_pwait": "poll/epoll",
    "epoll_pwait2": "poll/epoll",
    "nanosleep": "sleep", "clock_nanosleep": "sleep",
    "wait4": "wait", "waitid": "wait",
    "write": "write/send", "writev": "write/send", "pwrite64": "write/send",
    "sendto": "write/send", "sendmsg": "write/send",
}  # fmt: skip
_LINE = re.compile(r"^(\d+)\s+(?:<\.\.\. (\w+) resumed>|(\w+)\().*<(\d+\.\d+)>\s*$")
COLUMNS = ["pid", "tid", "syscall", "kind", "calls", "total_ns", "median_ns", "p90_ns", "max_ns"]


def find() -> str | None:
    """strace's path, None when it is not installed."""
    return shutil.which("strace")


def command(strace: str, log: Path, argv: list[str]) -> list[str]:
    """The argv that runs a program under strace: every thread and child (-f), time in each
    call (-T), quiet about attach and exit (-qq), one log file."""
    return [strace, "-f", "-T", "-qq", "-o", str(log), "--", *argv]


def parse(lines: Iterable[str]) -> pd.DataFrame:
    """One row per (tid, syscall) with counts and the distribution of durations (ns)."""
    calls: dict[tuple[int, str], list[int]] = {}
    for line in lines:
        m = _LINE.match(line)
        if m:
            key = (int(m[1]), m[2] or m[3])
            calls.setdefault(key, []).append(round(float(m[4]) * 1e9))
    rows = []
    for (tid, name), durations in sorted(calls.items()):
        d = np.asarray(durations, dtype=np.int64)
        rows.append(
            {
                "tid": tid,
                "syscall": name,
                "kind": KINDS.get(name, "other"),
                "calls": d.size,
                "total_ns": int(d.sum()),
                "median_ns": float(np.median(d)),
                "p90_ns": float(np.percentile(d, 90)),
                "max_ns": int(d.max()),
            }
        )
    return pd.DataFrame(rows, columns=[c for c in COLUMNS if c != "pid"])


def read(log: Path) -> pd.DataFrame:
    """The per-thread syscall table of one strace -f log."""
    with open(log, errors="replace") as f:
        return parse(f)
