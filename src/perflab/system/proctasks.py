"""Per-thread kernel accounting read from /proc, without ptrace: what each task has used so far.

/proc/PID/task/TID/schedstat gives on-CPU time and run-queue wait in nanoseconds
(CONFIG_SCHED_INFO); stat gives the user/system split and the start time only in clock ticks
(USER_HZ, usually 10 ms); status gives the voluntary and involuntary context switches; syscall,
for a thread asleep, the system call it sleeps in (readable by the user who may ptrace it, without
attaching). A thread other than the leader vanishes from /proc the moment it exits: it is known as
of its last reading.
"""

import os
from dataclasses import dataclass

CLK_TCK = os.sysconf("SC_CLK_TCK")
TICK_NS = 1_000_000_000 // CLK_TCK
READ_SIZE = 16384
SWITCHES = ("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")


@dataclass(frozen=True)
class Reading:
    """One thread's counters at one instant (cumulative since the thread started)."""

    pid: int
    tid: int
    comm: str
    state: str
    pgrp: int
    start_ticks: int
    utime_ticks: int
    stime_ticks: int
    cpu_ns: int
    runq_ns: int
    timeslices: int
    vcsw: int
    ivcsw: int
    syscall: int | None = None  # asleep in this call (-1: outside one); None: running, unread


def read_small(path: str) -> str | None:
    """A small /proc file in one read where it fits: os.open and os.read, without a Python file
    object, cost a third as much, and perflab reads four files per thread per reading."""
    try:
        fd = os.open(path, os.O_RDONLY)
        try:
            chunks = [os.read(fd, READ_SIZE)]
            while len(chunks[-1]) == READ_SIZE:
                chunks.append(os.read(fd, READ_SIZE))
        finally:
            os.close(fd)
    except (FileNotFoundError, ProcessLookupError, NotADirectoryError, PermissionError):
        return None  # the task exited between listing and reading (or is not ours to read)
    return b"".join(chunks).decode(errors="replace")


def stat_fields(text: str) -> tuple[str, list[str]]:
    """comm and the fields after it: comm is in parentheses and may itself hold ') '."""
    close = text.rindex(")")
    return text[text.index("(") + 1 : close], text[close + 2 :].split()


def pgrp_of(pid: int) -> int | None:
    """The process group of a process, None when it is gone."""
    text = read_small(f"/proc/{pid}/stat")
    return int(stat_fields(text)[1][2]) if text else None


def read(pid: int, tid: int) -> Reading | None:
    """The counters of one thread now, None when it has exited."""
    base = f"/proc/{pid}/task/{tid}"
    stat, sched, status = (
        read_small(f"{base}/stat"),
        read_small(f"{base}/schedstat"),
        read_small(f"{base}/status"),
    )
    if not (stat and sched and status):
        return None
    comm, f = stat_fields(stat)
    cpu, runq, slices = (int(x) for x in sched.split()[:3])
    switches = {key: _field(status, key) for key in SWITCHES}
    return Reading(
        pid=pid,
        tid=tid,
        comm=comm,
        state=f[0],
        pgrp=int(f[2]),
        # stat(5) field numbers less 3: f[0] is field 3 (state)
        utime_ticks=int(f[11]),
        stime_ticks=int(f[12]),
        start_ticks=int(f[19]),
        cpu_ns=cpu,
        runq_ns=runq,
        timeslices=slices,
        vcsw=switches["voluntary_ctxt_switches"],
        ivcsw=switches["nonvoluntary_ctxt_switches"],
        syscall=_syscall(base) if f[0] in ("S", "D", "t") else None,
    )


def _field(status: str, key: str) -> int:
    """One number of /proc/.../status, 0 when absent (found, not parsed line by line: status
    has some sixty lines and this runs for every thread at every reading)."""
    at = status.find(f"\n{key}:")
    if at < 0:
        return 0
    end = status.find("\n", at + 1)
    return int(status[at + len(key) + 2 : end if end > 0 else None])


def _syscall(base: str) -> int | None:
    """The call a sleeping thread is in: "running" (it woke) or unreadable give None."""
    text = read_small(f"{base}/syscall")
    word = text.split(maxsplit=1)[0] if text else ""
    return int(word) if word.lstrip("-").isdigit() else None


def threads(pid: int) -> list[int]:
    """The thread ids of a process now (empty when it is gone)."""
    try:
        return [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except (FileNotFoundError, ProcessLookupError):
        return []


def pids() -> set[int]:
    """Every process id in /proc now."""
    return {int(name) for name in os.listdir("/proc") if name.isdigit()}


def group_members(pgid: int, skip: set[int]) -> list[int]:
    """Processes of a process group (the program and what it forked) among those not in skip,
    which grows with every process examined: its group cannot change to the program's unless
    it calls setpgid, so each process's stat is read once (there is no /proc/PID/children
    without CONFIG_PROC_CHILDREN)."""
    found = []
    for pid in pids() - skip:
        skip.add(pid)
        if pgrp_of(pid) == pgid:
            found.append(pid)
    return found
