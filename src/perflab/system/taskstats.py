"""Exact per-thread figures at exit from the kernel's taskstats (generic netlink), no ptrace.

A listener registered for every CPU receives one record per exiting thread, sent before the
thread is gone: CPU time, elapsed time and context switches as of its exit, so a thread that
lives a few microseconds is still counted. Registering needs CAP_NET_ADMIN; without it (or on a
kernel without CONFIG_TASKSTATS) `Listener.open` says why and profile falls back on readings.
A record's utime/stime are tick-sampled (a thread that runs between two ticks shows 0); its
on-CPU ns (sum_exec_runtime) and run-queue delay come from the delay-accounting part, which
some kernels leave at zero unless kernel.task_delayacct is on (this one fills it regardless).
"""

import contextlib
import os
import socket
import struct
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

NETLINK_GENERIC = 16
GENL_ID_CTRL = 0x10
CTRL_CMD_GETFAMILY, CTRL_ATTR_FAMILY_ID, CTRL_ATTR_FAMILY_NAME = 3, 1, 2
NLMSG_ERROR, NLM_F_REQUEST, NLM_F_ACK = 2, 1, 4
CMD_GET = 1
ATTR_REGISTER_CPUMASK = 3
TYPE_STATS, TYPE_AGGR_PID = 3, 4  # a thread's record; a process's summary (5) is not used
# Offsets in struct taskstats (include/uapi/linux/taskstats.h, a stable ABI: fields are only
# appended, each version bump); ac_tgid arrived in version 11.
MIN_VERSION = 11
_FIELDS = {
    "version": (0, "H"),
    "cpu_delay_ns": (24, "Q"),
    "cpu_ns": (72, "Q"),  # cpu_run_virtual_total: sum_exec_runtime, exact (0 on some kernels)
    "comm": (80, "32s"),
    "tid": (128, "I"),
    "ppid": (132, "I"),
    "etime_us": (144, "Q"),
    "utime_us": (152, "Q"),
    "stime_us": (160, "Q"),
    "vcsw": (272, "Q"),
    "ivcsw": (280, "Q"),
    "tgid": (368, "I"),
}
_SIZE = 372


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


def _attrs(data: bytes) -> Iterator[tuple[int, bytes]]:
    """(type, payload) of each netlink attribute in data."""
    at = 0
    while at + 4 <= len(data):
        length, kind = struct.unpack_from("HH", data, at)
        if length < 4:
            return
        yield kind & 0x3FFF, data[at + 4 : at + length]
        at += (length + 3) & ~3


def _attr(kind: int, payload: bytes) -> bytes:
    raw = struct.pack("HH", 4 + len(payload), kind) + payload
    return raw + b"\0" * (-len(raw) % 4)


def parse_stats(raw: bytes, exit_ns: int) -> Record | None:
    """A struct taskstats as a Record, None when the kernel's version lacks a needed field."""
    if len(raw) < _SIZE:
        return None
    v = {name: struct.unpack_from(fmt, raw, off)[0] for name, (off, fmt) in _FIELDS.items()}
    if v.pop("version") < MIN_VERSION:
        return None
    v["comm"] = v["comm"].split(b"\0", 1)[0].decode(errors="replace")
    return Record(**v, exit_ns=exit_ns)


def possible_cpus() -> str:
    """The CPU list a listener registers for: every CPU that could ever run a task."""
    with open("/sys/devices/system/cpu/possible") as f:
        return f.read().strip()


class Listener:
    """Exit records of every thread on the machine, read as they come."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_GENERIC)
        self.seq = 0
        self._raw: list[tuple[bytes, int]] = []
        self.lost = False

    def _request(self, family: int, cmd: int, payload: bytes) -> None:
        self.seq += 1
        genl = struct.pack("BBH", cmd, 1, 0) + payload
        head = struct.pack("IHHII", 16 + len(genl), family, NLM_F_REQUEST | NLM_F_ACK, self.seq, 0)
        self.sock.send(head + genl)

    def _replies(self) -> Iterator[tuple[int, bytes]]:
        """(type, payload) of each message in one datagram, raising an error reply's errno."""
        data = self.sock.recv(65536)
        at = 0
        while at + 16 <= len(data):
            length, kind = struct.unpack_from("IH", data, at)
            if kind == NLMSG_ERROR:
                code = -struct.unpack_from("i", data, at + 16)[0]
                if code:
                    raise OSError(code, os.strerror(code))
            else:
                yield kind, data[at + 20 : at + length]
            at += (length + 3) & ~3

    def open(self) -> str | None:
        """Register for exit records; None when registered, else why not (one phrase)."""
        try:
            self.sock.bind((0, 0))
            with contextlib.suppress(OSError):  # without CAP_NET_ADMIN the default buffer has to do
                self.sock.setsockopt(socket.SOL_SOCKET, 33, 16 << 20)  # SO_RCVBUFFORCE
            self._request(
                GENL_ID_CTRL, CTRL_CMD_GETFAMILY, _attr(CTRL_ATTR_FAMILY_NAME, b"TASKSTATS\0")
            )
            family = None
            for _, body in self._replies():
                for kind, value in _attrs(body):
                    if kind == CTRL_ATTR_FAMILY_ID:
                        family = struct.unpack("H", value[:2])[0]
            if family is None:
                return "the kernel has no taskstats (CONFIG_TASKSTATS)"
            cpus = possible_cpus().encode() + b"\0"
            self._request(family, CMD_GET, _attr(ATTR_REGISTER_CPUMASK, cpus))
            list(self._replies())  # the ack, or EPERM without CAP_NET_ADMIN
        except OSError as exc:
            self.close()
            if exc.errno in (1, 13):
                return "registering a taskstats listener needs CAP_NET_ADMIN"
            return f"taskstats refused: {exc.strerror or exc}"
        self.sock.setblocking(False)
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
            if any(r.tid == probe.native_id for r in self.records()):
                return True
            time.sleep(0.005)
        return False

    def fileno(self) -> int:
        return self.sock.fileno()

    def drain(self, most: int | None = None) -> None:
        """Keep the datagrams queued now (at most `most`): on a busy machine every exit on it
        comes here, so parsing waits for records() and a reading is never held up for long."""
        while most is None or most > 0:
            try:
                data = self.sock.recv(65536)
            except BlockingIOError:
                return
            except OSError as exc:
                if exc.errno == 105:  # ENOBUFS: the kernel dropped records, the socket goes on
                    self.lost = True
                    continue
                raise
            self._raw.append((data, time.monotonic_ns()))
            most = None if most is None else most - 1

    def records(self) -> list[Record]:
        """Every record received, stamped with when it was read (monotonic ns, an upper bound on
        the exit: netlink gives no kernel time stamp)."""
        return [rec for data, stamp in self._raw for rec in _parse(data, stamp)]

    def close(self) -> None:
        self.sock.close()


def _parse(data: bytes, stamp: int) -> list[Record]:
    """The per-thread records (TYPE_AGGR_PID) of one datagram; a process's summary is left out."""
    out, at = [], 0
    while at + 16 <= len(data):
        length = struct.unpack_from("I", data, at)[0]
        body = data[at + 20 : at + length]  # nlmsghdr (16) + genlmsghdr (4)
        for kind, nested in _attrs(body):
            if kind == TYPE_AGGR_PID:
                for inner, value in _attrs(nested):
                    if inner == TYPE_STATS and (rec := parse_stats(value, stamp)):
                        out.append(rec)
        at += max((length + 3) & ~3, 16)
    return out


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
