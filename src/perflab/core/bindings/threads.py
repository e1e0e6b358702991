"""threads.c: workers released together by a barrier, and the hogs that disturb them."""

import errno
from collections.abc import Sequence
from dataclasses import dataclass, fields

from perflab.core.bindings.convert import check
from perflab.core.constants import ffi, lib
from perflab.errors import RealTimeOverrun

HOG_KINDS = {"cpu": lib.PERFLAB_HOG_CPU, "cache": lib.PERFLAB_HOG_CACHE, "rt": lib.PERFLAB_HOG_RT}


@dataclass(frozen=True)
class ThreadSpec:
    """What one worker does and where (cpu -1: the scheduler's choice)."""

    kernel: int
    cpu: int
    loops: int
    bytes: int
    nice: int
    rt_priority: int
    event_mask: int


@dataclass(frozen=True)
class ThreadResult:
    """What one worker measured of itself (csrc/perflab.h, struct perflab_thread_result)."""

    cpu_start: int
    cpu_end: int
    sched_status: int
    error: int
    cpu_ns: int
    wall_ns: int
    ticks: int
    release_ns: int
    start_ns: int
    end_ns: int
    retries: int
    checksum: int
    counts: tuple[int, ...]


def run_threads(specs: Sequence[ThreadSpec]) -> list[ThreadResult]:
    """Run the workers together, released at once by a barrier; one result each."""
    n = len(specs)
    cspecs = ffi.new("struct perflab_thread_spec[]", n)
    for c, s in zip(cspecs, specs, strict=True):
        for f in fields(ThreadSpec):
            setattr(c, f.name, getattr(s, f.name))
    out = ffi.new("struct perflab_thread_result[]", n)
    rc = lib.perflab_run_threads(cspecs, n, out)
    if rc == -errno.ETIME:
        raise RealTimeOverrun("real-time workers computed past RLIMIT_RTTIME")
    check(rc, "run threads")
    names = [f.name for f in fields(ThreadResult) if f.name != "counts"]
    return [
        ThreadResult(**{k: int(getattr(r, k)) for k in names}, counts=tuple(r.counts)) for r in out
    ]


def hog_start(
    kind: int, cpu: int, nbytes: int, max_ns: int, rt_priority: int, what: str
) -> tuple[int, int]:
    """Fork a pinned hog: (its pid, 0 or -errno of its real-time request)."""
    pid, sched = ffi.new("int32_t *"), ffi.new("int32_t *")
    check(lib.perflab_hog_start(kind, cpu, nbytes, max_ns, rt_priority, pid, sched), what)
    return int(pid[0]), int(sched[0])
