"""Exact per-thread figures at exit from the kernel's taskstats (generic netlink), no ptrace.

A listener registered for every CPU receives one record per exiting thread, sent before the
thread is gone: CPU time, elapsed time and context switches as of its exit, so a thread that
lives a few microseconds is still counted. Registering needs CAP_NET_ADMIN; without it (or on a
kernel without CONFIG_TASKSTATS) `Listener.open` says why and profile falls back on readings.
A record's utime/stime are tick-sampled (a thread that runs between two ticks shows 0); its
on-CPU ns (sum_exec_runtime) and run-queue delay come from the delay-accounting part, which
some kernels leave at zero unless kernel.task_delayacct is on (this one fills it regardless).
"""

import errno
import os
import threading
import time
from dataclasses import dataclass

from perflab.core import bindings

READ_MOST = 4096  # records taken from the socket per call into the core


@dataclass(frozen=True)
class Record:
    """One thread's figures at its exit; exit_ns is when perflab read it (CLOCK_MONOTONIC)."""

    tgid: int
    tid: int
    ppid: int
    comm: str
    etime_us: int
    utime_us: int
    stime_us: int
    vcsw: int
    ivcsw: int
    cpu_delay_ns: int
    cpu_ns: int
    exit_ns: int


def possible_cpus() -> str:
    """The CPU list a listener registers for: every CPU that could ever run a task."""
    with open("/sys/devices/system/cpu/possible") as f:
        return f.read().strip()


class Listener:
    """Exit records of every thread on the machine, read as they come (the core's taskstats
    client, csrc/taskstats.c, the one the spawner queries)."""

    def __init__(self) -> None:
        self.fd = -1
        self._records: list[Record] = []
        self.lost = False

    def open(self) -> str | None:
        """Register for exit records; None when registered, else why not (one phrase)."""
        rc = bindings.taskstats_listen(possible_cpus())
        if rc in (-errno.EPERM, -errno.EACCES):
            return "registering a taskstats listener needs CAP_NET_ADMIN"
        if rc == -errno.ENOENT:
            return "the kernel has no taskstats (CONFIG_TASKSTATS)"
        if rc < 0:
            return f"taskstats refused: {os.strerror(-rc)}"
        self.fd = rc
        if not self._delivers():
            self.close()
            return "taskstats took the listener but sent no exit record (no CAP_NET_ADMIN)"
        return None

    def _delivers(self, wait_s: float = 0.5) -> bool:
        """Some kernels accept an unprivileged listener and then send it nothing: a thread of
        our own that exits at once must be seen, or exit records are not to be had here."""
        probe = threading.Thread(target=lambda: None, name="perflab-taskstats")
        probe.start()
        probe.join()
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            self.drain()
            if any(r.tid == probe.native_id for r in self._records):
                return True
            time.sleep(0.005)
        return False

    def fileno(self) -> int:
        return self.fd

    def drain(self, most: int | None = None) -> None:
        """Keep the records queued now (at most about `most`): on a busy machine every exit on
        it comes here, so a reading is never held up for long."""
        while most is None or most > 0:
            asked = min(most or READ_MOST, READ_MOST)
            got, lost, rc = bindings.taskstats_read(self.fd, asked)
            self.lost |= lost
            if rc < 0:
                raise OSError(-rc, os.strerror(-rc))
            self._records += [Record(exit_ns=r.pop("read_ns"), **r) for r in got]
            if len(got) < asked:
                return
            most = None if most is None else most - len(got)

    def records(self) -> list[Record]:
        """Every record received, stamped with when it was read (monotonic ns, an upper bound on
        the exit: netlink gives no kernel time stamp)."""
        return list(self._records)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
        self.fd = -1


def unavailable() -> str | None:
    """Why exit records cannot be had here, None when they can."""
    listener = Listener()
    why = listener.open()
    listener.close()
    return why


def ours(records: list[Record], root: int) -> list[Record]:
    """The records of root's process and of every process it (or they) started."""
    pids = {root}
    grew = True
    while grew:
        grew = False
        for r in records:
            if r.tgid not in pids and (r.ppid in pids):
                pids.add(r.tgid)
                grew = True
    return [r for r in records if r.tgid in pids]
