"""spawn.c: the batch format both spawners run, its run records, and the reply of the spawner."""

import errno
from collections.abc import Sequence
from dataclasses import dataclass, fields

import numpy as np

from perflab.core.bindings.convert import check, ptr
from perflab.core.constants import ffi, lib

RUN_STATUS: dict[int, str] = {
    lib.PERFLAB_RUN_OK: "ok",
    lib.PERFLAB_RUN_EXIT: "exit",
    lib.PERFLAB_RUN_CRASH: "crash",
    lib.PERFLAB_RUN_TIMEOUT: "timeout",
    lib.PERFLAB_RUN_BAD_PROBE: "bad_probe",
    lib.PERFLAB_RUN_EXEC_FAILED: "exec_failed",
    lib.PERFLAB_RUN_SETUP_FAILED: "setup_failed",
    lib.PERFLAB_RUN_SPAWN_FAILED: "spawn_failed",
}
RUN_OK: int = lib.PERFLAB_RUN_OK
RUN_EXIT: int = lib.PERFLAB_RUN_EXIT
RUN_BAD_PROBE: int = lib.PERFLAB_RUN_BAD_PROBE
RUN_HAS_PROBE: int = lib.PERFLAB_RUN_HAS_PROBE
RUN_HAS_COUNTERS: int = lib.PERFLAB_RUN_HAS_COUNTERS
RUN_MLOCKED: int = lib.PERFLAB_RUN_MLOCKED
RUN_STRAYS: int = lib.PERFLAB_RUN_STRAYS
RUN_PAGES_KEPT: int = lib.PERFLAB_RUN_PAGES_KEPT
SPAWN_NO_ASLR: int = lib.PERFLAB_SPAWN_NO_ASLR
SPAWN_ASLR: int = lib.PERFLAB_SPAWN_ASLR
SPAWN_RT: int = lib.PERFLAB_SPAWN_RT
SPAWN_MLOCK: int = lib.PERFLAB_SPAWN_MLOCK
SPAWN_DIRS: int = lib.PERFLAB_SPAWN_DIRS
SPAWN_RUNQ: int = lib.PERFLAB_SPAWN_RUNQ
SPAWN_RUNQ_PROC: int = lib.PERFLAB_SPAWN_RUNQ_PROC
SPAWN_SETTLE: int = lib.PERFLAB_SPAWN_SETTLE
RUNQ_SOURCES = {
    lib.PERFLAB_RUNQ_NONE: "none",
    lib.PERFLAB_RUNQ_TASKSTATS: "taskstats",
    lib.PERFLAB_RUNQ_PROC: "proc",
}
KEPT_HEAD: int = lib.PERFLAB_KEPT_HEAD
BATCH_REPLY_BYTES: int = ffi.sizeof("struct perflab_batch_reply")


def _run_dtype() -> np.dtype:
    """numpy's view of struct perflab_run, read from cffi so the layout is never retyped."""
    ctype = ffi.typeof("struct perflab_run")
    names, formats, offsets = [], [], []
    for name, f in ctype.fields:
        item, shape = (
            (f.type.item, f"({f.type.length},)") if f.type.kind == "array" else (f.type, "")
        )
        names.append(name)
        kind = "u" if item.cname.startswith("uint") else "i"
        formats.append(f"{shape}{kind}{ffi.sizeof(item)}")
        offsets.append(f.offset)
    return np.dtype(
        {"names": names, "formats": formats, "offsets": offsets, "itemsize": ffi.sizeof(ctype)}
    )


RUN_DTYPE = _run_dtype()


@dataclass(frozen=True)
class BatchHeader:
    """The fields of struct perflab_batch that vary (csrc/perflab.h), for both spawners."""

    flags: int
    rt_policy: int
    rt_priority: int
    ncpus: int
    timeout_ns: int
    nprogs: int
    nenv: int
    nruns: int
    strings_len: int
    iterations: int = 1


def batch_header(header: BatchHeader) -> bytes:
    """struct perflab_batch's bytes, magic and version filled in, children's stdio attached."""
    h = ffi.new("struct perflab_batch *")
    h.magic, h.version, h.stdio = lib.PERFLAB_BATCH_MAGIC, lib.PERFLAB_BATCH_VERSION, 1
    for f in fields(BatchHeader):
        setattr(h, f.name, getattr(header, f.name))
    return bytes(ffi.buffer(h))


def spawn_batch(request: bytes, stdio: Sequence[int], stop_fd: int, out: np.ndarray) -> int:
    """Run a packed batch in this process into out (RUN_DTYPE records): how many were run."""
    done = ffi.new("int64_t *")
    rc = lib.perflab_spawn_batch(
        request, len(request), list(stdio), stop_fd, ptr(out, "struct perflab_run[]"), done
    )
    check(rc, "spawn batch")
    return int(done[0])


def batch_reply(raw: bytes) -> tuple[int, int]:
    """The spawner's struct perflab_batch_reply as (runs done, its peak RSS in KiB or <= 0)."""
    reply = ffi.new("struct perflab_batch_reply *")
    ffi.buffer(reply)[:] = raw
    if reply.magic != lib.PERFLAB_BATCH_MAGIC:
        raise OSError(errno.EPROTO, "bad reply")
    check(reply.error, "spawn batch")
    return int(reply.done), int(reply.floor_kb)


# A batch flag of --jobs (csrc/spawn_lanes.c spawn_parallel): one child per listed CPU.
SPAWN_PARALLEL: int = lib.PERFLAB_SPAWN_PARALLEL


def run_has_probe(flags: int) -> bool:
    """Whether a child run's flags say its probe record arrived."""
    return bool(flags & lib.PERFLAB_RUN_HAS_PROBE)
