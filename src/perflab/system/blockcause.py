"""Why a thread was blocked, without ptrace: the system call /proc/PID/task/TID/syscall shows it
sleeping in at each reading, and how each interval's blocked ns is shared among those causes.

The blocked ns of an interval between two readings is exact (its length less the schedstat CPU
and run-queue ns); its cause is seen only at the readings. An interval whose two readings found
the thread asleep in the same call with no voluntary switch between them was one unbroken sleep
in that call: its cause is exact. Any other interval is shared between the causes seen at its
ends (half each when they differ); an interval whose two readings both found the thread awake
holds sleeps no reading saw, shared in proportion to the causes of the thread's readings.
"""

import os
from collections.abc import Mapping, Sequence
from typing import NamedTuple

import numpy as np

CAUSES = ("futex", "io", "poll", "sleep", "wait", "other", "unseen")
COLUMNS = [f"blocked_{c}_ns" for c in CAUSES]
ASLEEP = ("S", "D", "t")  # stat states in which a thread is neither on a CPU nor runnable
OUTSIDE = -1  # /proc/.../syscall's "-1 sp pc": asleep outside a system call (a page fault...)

# name: (x86_64 number, asm-generic number as on aarch64, riscv64, loongarch64; None if absent)
_CALLS: dict[str, dict[str, tuple[int, int | None]]] = {
    "futex": {"futex": (202, 98), "futex_waitv": (449, 449), "futex_wake": (454, 454),
              "futex_wait": (455, 455), "futex_requeue": (456, 456)},
    "io": {"read": (0, 63), "readv": (19, 65), "pread64": (17, 67), "preadv": (295, 69),
           "preadv2": (327, 286), "recvfrom": (45, 207), "recvmsg": (47, 212),
           "recvmmsg": (299, 243), "write": (1, 64), "writev": (20, 66), "pwrite64": (18, 68),
           "pwritev": (296, 70), "pwritev2": (328, 287), "sendto": (44, 206),
           "sendmsg": (46, 211), "sendmmsg": (307, 269), "accept": (43, 202),
           "accept4": (288, 242), "connect": (42, 203), "sendfile": (40, 71),
           "splice": (275, 76), "fsync": (74, 82), "fdatasync": (75, 83),
           "io_getevents": (208, 4), "io_pgetevents": (333, 292), "io_uring_enter": (426, 426)},
    "poll": {"poll": (7, None), "ppoll": (271, 73), "select": (23, None),
             "pselect6": (270, 72), "epoll_wait": (232, None), "epoll_pwait": (281, 22),
             "epoll_pwait2": (441, 441)},
    "sleep": {"nanosleep": (35, 101), "clock_nanosleep": (230, 115)},
    "wait": {"wait4": (61, 260), "waitid": (247, 95)},
}  # fmt: skip
_ARCH = {"x86_64": 0, "aarch64": 1, "riscv64": 1, "loongarch64": 1}


def table(machine: str | None = None) -> dict[int, str] | None:
    """System-call number -> cause on this architecture; None where perflab lacks its numbers."""
    column = _ARCH.get(machine or os.uname().machine)
    if column is None:
        return None
    found = {
        (numbers[column], cause) for cause, calls in _CALLS.items() for numbers in calls.values()
    }
    return {number: cause for number, cause in found if number is not None}


NUMBERS = table()


def numbers(name: str, machine: str | None = None) -> int | None:
    """The number of one call perflab classifies (for tests against the C headers)."""
    column = _ARCH.get(machine or os.uname().machine)
    for calls in _CALLS.values():
        if name in calls and column is not None:
            return calls[name][column]
    return None


def classify(state: str, syscall: int | None) -> str | None:
    """The cause of a thread asleep at a reading (S or D state), None when it was not asleep,
    "unseen" when its call could not be read (it woke between the two files, or ptrace rules
    hide it). A tracing stop (t: strace holding the thread at a call's entry or exit) counts as
    in that call, as strace's -T counts it."""
    if state not in ASLEEP:
        return None
    if syscall is None:
        return "unseen"
    if syscall == OUTSIDE:
        return "other"
    return "other" if NUMBERS is None else NUMBERS.get(syscall, "other")


def share(
    blocked: Sequence[float] | np.ndarray,
    ends: Sequence[tuple[str | None, str | None]],
    unbroken: Sequence[bool],
) -> tuple[np.ndarray, np.ndarray]:
    """Per interval, its blocked ns shared among CAUSES (rows: intervals, columns: CAUSES), and
    which intervals' cause is exact (one unbroken sleep in one call)."""
    out = np.zeros((len(blocked), len(CAUSES)))
    exact = np.zeros(len(blocked), dtype=bool)
    index = {c: i for i, c in enumerate(CAUSES)}
    for i, (ns, (a, b), whole) in enumerate(zip(blocked, ends, unbroken, strict=True)):
        # None (NaN in a frame): awake; "unseen": asleep in a call that could not be read
        seen = [c for c in (a, b) if isinstance(c, str) and c != "unseen"]
        if not seen:
            out[i, index["unseen"]] = ns
            continue
        for c in seen:
            out[i, index[c]] += ns / len(seen)
        exact[i] = whole and len(seen) == 2 and a == b
    return out, exact


def scale(
    shares: np.ndarray, exact: np.ndarray, total_ns: float, counts: Mapping[str, int]
) -> tuple[np.ndarray, float, float]:
    """One thread's blocked ns by cause, adding up to its blocked total (a row's exact figure,
    which may run past its last reading); the exact part; and the part no reading caught
    asleep, shared in proportion to the causes of the readings that did (counts): a sampling
    profiler's estimate. "unseen" keeps it only for a thread no reading ever found asleep."""
    summed = shares.sum(axis=0) if len(shares) else np.zeros(len(CAUSES))
    unseen = CAUSES.index("unseen")
    seen = np.array([counts.get(c, 0) for c in CAUSES], dtype=float)
    shared = summed[unseen] if seen.sum() else 0.0
    if shared:
        summed = summed + shared * seen / seen.sum()
        summed[unseen] = 0
    weight = summed.sum()
    if weight <= 0:
        out = np.zeros(len(CAUSES))
        out[unseen] = total_ns
        return out, 0.0, 0.0
    exact_ns = float(shares[exact].sum()) if len(shares) else 0.0
    factor = total_ns / weight
    return summed * factor, min(exact_ns, total_ns), shared * factor


class Intervals(NamedTuple):
    """A thread's life cut at its readings: bounds (ns from the spawn) and, per interval, its
    CPU, run-queue and blocked ns, the causes seen at its two ends, whether no voluntary
    switch fell inside it, and its pending CPU ns (below)."""

    bounds: np.ndarray
    cpu: np.ndarray
    runq: np.ndarray
    blocked: np.ndarray
    ends: list[tuple[str | None, str | None]]
    unbroken: list[bool]
    pending: np.ndarray


def intervals(
    points: Sequence[tuple[int, int, int, int, str | None]],
    start_ns: int,
    end: tuple[int, int, int, int | None] | None,
) -> Intervals:
    """From a thread's start through its readings (t, cpu, runq, vcsw, cause) to its end
    (t, cpu, runq, vcsw or None) when that is known past the last reading (an exit record, the
    wall time).

    A thread blocks only through a voluntary switch, so an interval that starts with it awake
    and holds no such switch has no blocked ns: what its CPU and run-queue figures leave of it
    is pending CPU, the slice the thread was
    running when read, which the kernel adds to its CPU figure only at the next tick or switch
    (at an exit, never: a spinner's last few ms would otherwise look blocked).
    """
    bounds, cpu, runq = [start_ns], [], []
    ends: list[tuple[str | None, str | None]] = []
    unbroken: list[bool] = []
    prev: tuple[int, int, int, int, str | None] = (start_ns, 0, 0, 0, None)
    rest = [(*end, None)] if end and (not points or end[0] > points[-1][0]) else []
    for point in [*points, *rest]:
        t, c, q, vcsw, cause = point
        cpu.append(c - prev[1])
        runq.append(q - prev[2])
        ends.append((prev[4], cause))
        unbroken.append(vcsw is not None and vcsw == prev[3])
        bounds.append(t)
        prev = (t, c, q, prev[3] if vcsw is None else vcsw, cause)
    b, on_cpu = np.asarray(bounds, dtype=float), np.asarray(cpu, dtype=float)
    queued = np.asarray(runq, dtype=float)
    # Cumulative blocked ns at each bound. A runnable thread's pending run delay reaches
    # schedstat only when it next runs, so a reading can overstate it until a later one: the
    # minimum over all later bounds is the figure no later reading contradicts.
    total = (b - b[0]) - np.concatenate([[0], np.cumsum(on_cpu + queued)])
    settled = np.maximum(np.minimum.accumulate(total[::-1])[::-1], 0)
    blocked = np.diff(settled)
    awake = [u and not isinstance(a, str) for u, (a, _) in zip(unbroken, ends, strict=True)]
    pending = np.where(awake, blocked, 0.0) if len(blocked) else blocked
    return Intervals(b, on_cpu, queued, blocked - pending, ends, unbroken, pending)
