"""spawner/supervise.c: the supervisor's requests and replies (system/supervisor.py)."""

import errno
from collections.abc import Sequence
from dataclasses import dataclass, fields

import numpy as np

from perflab.core.constants import ffi, lib

SUP_REPLY_BYTES: int = ffi.sizeof("struct perflab_sup_reply")
SUP_MAX_FDS: int = lib.PERFLAB_SUP_MAX_FDS
SUP_EXEC: int = lib.PERFLAB_SUP_EXEC


@dataclass(frozen=True)
class SupReply:
    """struct perflab_sup_reply as Python values (csrc/perflab.h says what each holds)."""

    error: int
    stage: int
    pid: int
    status: int
    cgroup_error: int
    text_len: int
    utime_ns: int
    stime_ns: int
    maxrss_kb: int
    minflt: int
    majflt: int
    nvcsw: int
    nivcsw: int


def sup_start(
    path: bytes,
    argv: Sequence[bytes],
    env: Sequence[bytes],
    nfds: int,
    cpus: Sequence[int],
    group: int,
    sigdef: bool,
    no_aslr: bool = False,
) -> bytes:
    """A START request: execute path with argv and env, nfds fds attached as its 0..nfds-1,
    on cpus (none: the supervisor's), in process group `group` (0: its own), with ASLR off
    for it alone when no_aslr."""
    strings = b"".join(s + b"\0" for s in (path, *argv, *env))
    h = ffi.new("struct perflab_sup_request *")
    h.magic, h.op, h.pid = lib.PERFLAB_SUP_MAGIC, lib.PERFLAB_SUP_START, group
    h.flags = lib.PERFLAB_SUP_SIGDEF if sigdef else 0
    h.flags |= lib.PERFLAB_SUP_NO_ASLR if no_aslr else 0
    h.nfds, h.ncpus, h.argc, h.envc = nfds, len(cpus), len(argv), len(env)
    h.strings_len = len(strings)
    return bytes(ffi.buffer(h)) + np.asarray(cpus, dtype=np.int32).tobytes() + strings


def sup_reap(pid: int) -> bytes:
    """A REAP request: the wait status and rusage of an exited child, which it reaps."""
    h = ffi.new("struct perflab_sup_request *")
    h.magic, h.op, h.pid = lib.PERFLAB_SUP_MAGIC, lib.PERFLAB_SUP_REAP, pid
    return bytes(ffi.buffer(h))


def sup_reply(raw: bytes) -> SupReply:
    """The supervisor's reply, checked for its magic."""
    reply = ffi.new("struct perflab_sup_reply *")
    ffi.buffer(reply)[:] = raw
    if reply.magic != lib.PERFLAB_SUP_MAGIC:
        raise OSError(errno.EPROTO, "bad reply from the supervisor")
    return SupReply(**{f.name: int(getattr(reply, f.name)) for f in fields(SupReply)})
