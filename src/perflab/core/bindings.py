"""The only module that touches the cffi-built core (with constants, its numpy-free part that
loads it): typed wrappers over csrc/perflab.h.

Public modules call the functions here with Python values and get Python or numpy values
back; cffi types, -errno returns and C constants stay on this side (as PyNaCl's bindings).
"""

import errno
import functools
import importlib.util
import os
from collections.abc import Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np

from perflab.core.constants import COPY_KERNELS as COPY_KERNELS
from perflab.core.constants import EVENT_INDEX as EVENT_INDEX
from perflab.core.constants import LOOP_FACTOR as LOOP_FACTOR
from perflab.core.constants import SYSCALLS as SYSCALLS
from perflab.core.constants import THREAD_KERNELS as THREAD_KERNELS
from perflab.core.constants import ffi, lib
from perflab.errors import PerflabError, RealTimeOverrun

_CSRC = Path(__file__).resolve().parents[3] / "csrc"


def _check_fresh() -> None:
    """Refuse a core built from other sources than the checkout beside it (editable installs)."""
    digest_py = _CSRC / "digest.py"
    if not digest_py.exists():
        return
    spec = importlib.util.spec_from_file_location("_perflab_digest", digest_py)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if module.source_digest(_CSRC) != core_digest():
        raise ImportError(
            "perflab's C core is stale (csrc/ changed since it was built); "
            "rebuild with `pip install -e .` or `python setup.py build_ext --inplace`"
        )


# ---- errors, buffers ---------------------------------------------------------------------


def core_digest() -> str:
    """Digest of the C sources this core was compiled from."""
    return str(ffi.string(lib.perflab_core_digest()).decode())


def errno_name(code: int) -> str:
    """'EPERM' for 1 (either sign): the short name a status column holds."""
    code = abs(code)
    return errno.errorcode.get(code, str(code))


def errno_text(code: int) -> str:
    """The one way perflab words an errno (either sign): 'Operation not permitted (EPERM)'."""
    return f"{os.strerror(abs(code))} ({errno_name(code)})"


def check(rc: int, what: str) -> int:
    """Turn a -errno return of the core into a PerflabError naming the operation."""
    if rc < 0:
        raise PerflabError(f"{what}: {errno_text(rc)}")
    return rc


def u64_array(n: int) -> np.ndarray:
    """A uint64 array the core can fill in place."""
    return np.zeros(n, dtype=np.uint64)


def ptr(arr: np.ndarray, ctype: str) -> Any:
    """A C pointer onto a numpy array's buffer, without a copy."""
    return ffi.from_buffer(ctype, arr)


# ---- machine and timer ---------------------------------------------------------------------

HZ_SOURCES = {
    lib.PERFLAB_HZ_CPUID_15: "cpuid leaf 0x15",
    lib.PERFLAB_HZ_CPUID_16: "cpuid leaf 0x16 (base frequency)",
    lib.PERFLAB_HZ_CALIBRATED: "calibrated against CLOCK_MONOTONIC_RAW",
    lib.PERFLAB_HZ_CNTFRQ: "cntfrq_el0",
}
HZ_CALIBRATED = HZ_SOURCES[lib.PERFLAB_HZ_CALIBRATED]


@functools.cache
def timer_overhead_ticks() -> int:
    """Ticks a begin/end pair of the cycle counter costs with nothing between (the minimum of
    10 000 pairs), read once a process so every subtraction in it uses the same figure."""
    return int(lib.perflab_timer_overhead())


def tsc_hz(calibrate_ns: int = 200_000_000) -> tuple[float, str]:
    """Cycle-counter frequency in Hz and how the core obtained it."""
    hz, how = ffi.new("double *"), ffi.new("int *")
    check(lib.perflab_tsc_hz(calibrate_ns, hz, how), "determine the counter frequency")
    return float(hz[0]), HZ_SOURCES.get(how[0], "unknown")


def cpuid(leaf: int, subleaf: int = 0) -> tuple[int, int, int, int] | None:
    """(eax, ebx, ecx, edx) of a CPUID leaf, None where there is no CPUID."""
    regs = ffi.new("uint32_t[4]")
    if lib.perflab_cpuid(leaf, subleaf, regs) != 0:
        return None
    return int(regs[0]), int(regs[1]), int(regs[2]), int(regs[3])


def perf_probe(kind: int = 0, config: int = 0) -> int:
    """0 when perf_event can count (type, config) here, else -errno."""
    return int(lib.perflab_perf_probe(kind, config))


# ---- counters.c ----------------------------------------------------------------------------

EVENTS_ALL: int = lib.PERFLAB_EV_ALL


class CounterSet:
    """One perf_event counter set; counts are a count each, or -errno for an event that did not
    count."""

    def __init__(self) -> None:
        self._set = ffi.new("struct perflab_counter_set *")
        self._counts = ffi.new("int64_t[7]")

    def open(self, pid: int, cpu: int, bits: int, inherit: bool) -> int:
        """Events that count, or -errno when none does."""
        return int(lib.perflab_counters_open(self._set, pid, cpu, bits, int(inherit)))

    def enable(self) -> None:
        lib.perflab_counters_enable(self._set)

    def stop(self) -> list[int]:
        """Disable, read and close: the seven counts (or -errno each)."""
        lib.perflab_counters_disable(self._set)
        lib.perflab_counters_read(self._set, self._counts)
        lib.perflab_counters_close(self._set)
        return [int(c) for c in self._counts]


# ---- threads.c -----------------------------------------------------------------------------

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


# ---- memory.c ------------------------------------------------------------------------------

TOUCH_CONDITIONS = {
    "first touch": lib.PERFLAB_TOUCH_FIRST,
    "touch again": lib.PERFLAB_TOUCH_AGAIN,
    "mlocked": lib.PERFLAB_TOUCH_LOCKED,
}


def copy_available(kernel: int) -> bool:
    """Whether this CPU has the copy kernel (rep movsb needs x86)."""
    return bool(lib.perflab_copy_available(kernel))


def copy_once(kernel: int, dst: np.ndarray, src: np.ndarray, what: str) -> None:
    """Copy src's bytes into dst with one kernel, untimed."""
    rc = lib.perflab_copy_once(kernel, ptr(dst, "char[]"), ptr(src, "char[]"), src.nbytes)
    check(rc, what)


def lock_memory(on: bool) -> int:
    """mlockall (on) or munlockall: 0 or -errno."""
    return int(lib.perflab_lock_memory(int(on)))


class CopyBuffers:
    """Two pre-faulted page-aligned buffers of nbytes, released by free()."""

    def __init__(self, nbytes: int):
        self.nbytes = nbytes
        self._src, self._dst = ffi.new("void **"), ffi.new("void **")
        check(lib.perflab_buffers_alloc(nbytes, self._src, self._dst), "allocate buffers")

    def sweep(
        self,
        kernel: int,
        src_skew: int,
        dst_skew: int,
        sizes: np.ndarray,
        trials: int,
        min_sample: int,
        what: str,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Per size, src/dst this far past the start: the copies per sample that make the
        shortest of `trials` samples last min_sample ticks, and that sample's ticks."""
        src = ffi.cast("char *", self._src[0]) + src_skew
        dst = ffi.cast("char *", self._dst[0]) + dst_skew
        copies, ticks = u64_array(sizes.size), np.zeros(sizes.size, dtype=np.int64)
        rc = lib.perflab_copy_sweep(
            kernel, dst, src, ptr(sizes, "uint64_t[]"), sizes.size, trials, min_sample,
            ptr(copies, "uint64_t[]"), ptr(ticks, "int64_t[]"),
        )  # fmt: skip
        check(rc, what)
        return copies, ticks

    def free(self) -> None:
        lib.perflab_buffers_free(self._src[0], self._dst[0], self.nbytes)


def touch_pages(pages: int, min_sample: int, what: str) -> tuple[list[int], list[int]]:
    """Per condition (fresh, touched-again and mlocked pages): the ticks to write one byte into
    each of `pages` pages, passes times over (one pass over fresh pages; over mapped ones,
    enough to last min_sample ticks), and the passes."""
    out, passes = ffi.new("int64_t[3]"), ffi.new("uint64_t[3]")
    check(lib.perflab_touch_pages(pages, min_sample, out, passes), what)
    return [int(t) for t in out], [int(k) for k in passes]


# ---- oscost.c ------------------------------------------------------------------------------

SYS_IO_BYTES: int = lib.PERFLAB_SYS_IO_BYTES


def syscall_time(call: int, path: str, calls: int, n: int, what: str) -> np.ndarray:
    """n samples of `calls` back-to-back system calls in ticks, the timer's cost subtracted."""
    out = np.zeros(n, dtype=np.int64)
    check(lib.perflab_syscall_time(call, path.encode(), calls, ptr(out, "int64_t[]"), n), what)
    return out


def libm_exists(name: str) -> bool:
    """Whether the C math library has a function of this name."""
    return lib.perflab_libm_lookup(name.encode()) == 0


class LibmCalls:
    """A sequence of libm calls (name, argument) as C arrays, kept alive together."""

    def __init__(self, calls: Sequence[tuple[str, float]]):
        self.n = len(calls)
        self._keep = [ffi.new("char[]", name.encode()) for name, _ in calls]
        self._names = ffi.new("const char *[]", self._keep)
        self._args = ffi.new("double[]", [a for _, a in calls])

    def warm(self, repeat: int, calls: Sequence[int]) -> np.ndarray:
        """Ticks of a sample of calls[j] back-to-back calls of each function, the sequence
        `repeat` times in this process: (repeat, n)."""
        out = np.zeros(repeat * self.n, dtype=np.int64)
        per = u64_array(self.n)
        per[:] = calls
        rc = lib.perflab_libm_warm(self._names, self._args, ptr(per, "uint64_t[]"), self.n,
                                   repeat, ptr(out, "int64_t[]"))  # fmt: skip
        check(rc, "time libm calls")
        return out.reshape(repeat, self.n)

    def cold(self) -> np.ndarray:
        """Ticks of each call, the sequence once in a freshly forked child."""
        out = np.zeros(self.n, dtype=np.int64)
        check(lib.perflab_libm_cold(self._names, self._args, self.n, ptr(out, "int64_t[]")), "fork")
        return out


_CSWITCH_FIELDS = (
    "alone_ns",
    "pingpong_ns",
    "parent_nvcsw",
    "parent_nivcsw",
    "child_nvcsw",
    "child_nivcsw",
    "child_pid",
    "rt_applied",
)


def cswitch(
    n: int, cpu_parent: int, cpu_child: int, rt_prio: int, rttime_us: int, what: str
) -> dict[str, int]:
    """Rubini's cswitch once: the fields of struct perflab_cswitch by name."""
    out = ffi.new("struct perflab_cswitch *")
    check(lib.perflab_cswitch(n, cpu_parent, cpu_child, rt_prio, rttime_us, out), what)
    return {k: int(getattr(out, k)) for k in _CSWITCH_FIELDS}


# ---- alias.c -------------------------------------------------------------------------------

ALIAS_KERNELS = {"store-load": lib.PERFLAB_ALIAS_STORE_LOAD, "loop": lib.PERFLAB_ALIAS_LOOP}


def alias_time(
    kernel: str, aliased: int, distinct: int, n: int, trials: int
) -> tuple[np.ndarray, np.ndarray]:
    """Ticks of `trials` interleaved runs of n iterations, load aliased vs distinct."""
    a, d = u64_array(trials), u64_array(trials)
    rc = lib.perflab_alias_time(
        ALIAS_KERNELS[kernel], aliased, distinct, n, trials, ptr(a, "uint64_t[]"),
        ptr(d, "uint64_t[]"),
    )  # fmt: skip
    check(rc, f"alias check ({kernel}, {aliased} and {distinct} bytes apart)")
    return a, d


# ---- clock.c: clock sources ----------------------------------------------------------------

# Display names in the article's order (clocks.c, then ClockBench's TSC methods).
CLOCK_SOURCES: dict[str, int] = {
    "gettimeofday": lib.PERFLAB_GETTIMEOFDAY,
    "CLOCK_REALTIME": lib.PERFLAB_CLOCK_REALTIME,
    "CLOCK_REALTIME_COARSE": lib.PERFLAB_CLOCK_REALTIME_COARSE,
    "CLOCK_MONOTONIC": lib.PERFLAB_CLOCK_MONOTONIC,
    "CLOCK_MONOTONIC_RAW": lib.PERFLAB_CLOCK_MONOTONIC_RAW,
    "CLOCK_MONOTONIC_COARSE": lib.PERFLAB_CLOCK_MONOTONIC_COARSE,
    "CLOCK_BOOTTIME": lib.PERFLAB_CLOCK_BOOTTIME,
    "CLOCK_PROCESS_CPUTIME_ID": lib.PERFLAB_CLOCK_PROCESS_CPUTIME_ID,
    "CLOCK_THREAD_CPUTIME_ID": lib.PERFLAB_CLOCK_THREAD_CPUTIME_ID,
    "rdtsc": lib.PERFLAB_TSC_RDTSC,
    "lfence+rdtsc": lib.PERFLAB_TSC_LFENCE_RDTSC,
    "rdtscp": lib.PERFLAB_TSC_RDTSCP,
    "cpuid+rdtsc": lib.PERFLAB_TSC_CPUID_RDTSC,
}


def source_available(source: int) -> bool:
    """Whether this CPU and kernel can read the clock source."""
    return bool(lib.perflab_source_available(source))


def clock_getres(source: int, what: str) -> int:
    """clock_getres of a clock source in ns."""
    res = ffi.new("int64_t *")
    check(lib.perflab_getres(source, res), what)
    return int(res[0])


def clock_read(source: int, what: str) -> tuple[int, int]:
    """A clock source's current value as (seconds, nanoseconds)."""
    sec, nsec = ffi.new("int64_t *"), ffi.new("int64_t *")
    check(lib.perflab_read(source, sec, nsec), what)
    return int(sec[0]), int(nsec[0])


def clock_sample(source: int, n: int, what: str) -> np.ndarray:
    """n back-to-back reads of one source, taken in C (ns for clocks, ticks for counters)."""
    out = u64_array(n)
    check(lib.perflab_sample(source, ptr(out, "uint64_t[]"), n), what)
    return out


def clock_batch_ticks(source: int, n: int, what: str) -> int:
    """TSC ticks n reads of one source cost together."""
    ticks = ffi.new("uint64_t *")
    check(lib.perflab_batch_ticks(source, n, ticks), what)
    return int(ticks[0])


# ---- spawn.c -------------------------------------------------------------------------------

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
SPAWN_RUNQ: int = lib.PERFLAB_SPAWN_RUNQ
SPAWN_RUNQ_PROC: int = lib.PERFLAB_SPAWN_RUNQ_PROC
SPAWN_SETTLE: int = lib.PERFLAB_SPAWN_SETTLE
RUNQ_SOURCES = {
    lib.PERFLAB_RUNQ_NONE: "none",
    lib.PERFLAB_RUNQ_TASKSTATS: "taskstats",
    lib.PERFLAB_RUNQ_PROC: "proc",
}
STOP_BYTE: int = lib.PERFLAB_STOP_BYTE
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
    """The fields of struct perflab_batch that vary (csrc/perflab.h): one format, two engines."""

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


# ---- spawner/supervise.c: the supervisor's requests and replies (system/supervisor.py) ------

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


# ---- timing.c: the perf assertions' calls (timing.py) -------------------------------------


def time_empty(n: int) -> np.ndarray:
    """Ticks between the timing layer's begin and end reads, n empty regions, timer cost
    already subtracted by the core (add timer_overhead_ticks() back for the raw reads)."""
    out = np.zeros(n, dtype=np.int64)
    lib.perflab_time_empty(ptr(out, "int64_t[]"), n)
    return out


def is_c_pointer(obj: object) -> bool:
    """Whether obj is a cffi value (from any FFI), the only thing c_call accepts."""
    return isinstance(obj, ffi.CData)


def c_pointer_kind(obj: Any) -> tuple[bool, str]:
    """(is a function pointer, its C type name) of a cffi value."""
    kind = ffi.typeof(obj)
    return kind.kind == "function", str(kind.cname)


def address(obj: Any) -> int:
    """A cffi pointer's address: two targets are the same code only if these are equal."""
    return int(ffi.cast("uintptr_t", obj))


@dataclass(eq=False)
class PyEntry:
    """What the shared C-to-Python entry runs: fn, and where its first exception goes."""

    fn: Any
    errors: list[BaseException]


@ffi.callback("void(void *)")
def _enter(handle: Any) -> None:
    """The one C-to-Python entry of every Python target: the callable arrives as a handle,
    so two targets differ only in what they run, not in a per-target trampoline."""
    entry = ffi.from_handle(handle)
    try:
        entry.fn()
    except BaseException as exc:
        if not entry.errors:
            entry.errors.append(exc)


class Call:
    """One struct perflab_call: a function the core calls `calls` times per sample."""

    def __init__(self, fn: Any = None, fn_arg: Any = None, arg: Any = None, keep: Any = None):
        self._c = ffi.new("struct perflab_call *")
        self._c.fn = fn if fn is not None else ffi.NULL
        self._c.fn_arg = fn_arg if fn_arg is not None else ffi.NULL
        self._c.arg = arg if arg is not None else ffi.NULL
        self._c.calls = 1
        self._keep = keep

    @property
    def calls(self) -> int:
        return int(self._c.calls)

    @calls.setter
    def calls(self, n: int) -> None:
        self._c.calls = n

    def time(self, n: int) -> np.ndarray:
        """n samples: raw ticks of `calls` back-to-back calls each."""
        out = u64_array(n)
        check(lib.perflab_time_calls(self._c, ptr(out, "uint64_t[]"), n), "time calls")
        return out


def python_call(entry: PyEntry) -> Call:
    """A Call of a Python callable through the shared entry."""
    handle = ffi.new_handle(entry)
    return Call(fn_arg=_enter, arg=handle, keep=(handle, entry))


def c_call(fnptr: Any, arg: Any = None) -> Call:
    """A Call of a `void (*)(void)` pointer, or of a `void (*)(void *)` with arg."""
    if arg is None:
        return Call(fn=ffi.cast("void(*)(void)", fnptr), keep=fnptr)
    return Call(
        fn_arg=ffi.cast("void(*)(void *)", fnptr), arg=ffi.cast("void *", arg), keep=(fnptr, arg)
    )


def empty_call(with_arg: bool) -> Call:
    """The core's no-op through the same pointer type: what calling costs by itself."""
    return Call(fn_arg=lib.perflab_noop_arg) if with_arg else Call(fn=lib.perflab_noop)


def spin_call(iterations: int) -> tuple[Any, Any]:
    """(pointer to perflab_spin, its iterations argument) for c_call."""
    return ffi.addressof(lib, "perflab_spin"), ffi.new("uint64_t *", iterations)


def time_pair(a: Call, b: Call, n: int) -> tuple[np.ndarray, np.ndarray]:
    """n samples of a and of b interleaved a b, b a, ...: raw ticks of each."""
    ra, rb = u64_array(n), u64_array(n)
    rc = lib.perflab_time_pair(a._c, b._c, ptr(ra, "uint64_t[]"), ptr(rb, "uint64_t[]"), n)
    check(rc, "time pair")
    return ra, rb


def run_has_probe(flags: int) -> bool:
    """Whether a child run's flags say its probe record arrived."""
    return bool(flags & lib.PERFLAB_RUN_HAS_PROBE)


if os.environ.get("PERFLAB_SKIP_FRESHNESS") != "1":
    _check_fresh()

# A batch flag of the --jobs engine (csrc/spawn_lanes.c spawn_parallel): one child per listed CPU.
SPAWN_PARALLEL: int = lib.PERFLAB_SPAWN_PARALLEL

# ---- counters.c: events of exec'd children -------------------------------------------------

PERF_TYPE_HARDWARE: int = lib.PERFLAB_PERF_TYPE_HARDWARE
PERF_TYPE_RAW: int = lib.PERFLAB_PERF_TYPE_RAW


class ExecCounters:
    """Events that count the children this thread starts while run() runs (perf stat's way)."""

    def __init__(self, events: Sequence[tuple[int, int]]):
        self.n = len(events)
        self._fds = ffi.new("int32_t[]", max(self.n, 1))
        self._counts = ffi.new("int64_t[]", max(self.n, 1))
        types = ffi.new("uint32_t[]", [t for t, _ in events] or [0])
        configs = ffi.new("uint64_t[]", [c for _, c in events] or [0])
        lib.perflab_exec_counters_open(self.n, types, configs, self._fds)

    def status(self) -> list[int]:
        """0 for each event that opened, -errno for one that cannot count here."""
        return [min(int(self._fds[i]), 0) for i in range(self.n)]

    def read(self) -> list[int]:
        """The counts so far of the exited children, -errno where an event does not count."""
        check(lib.perflab_exec_counters_read(self.n, self._fds, self._counts), "read counters")
        return [int(self._counts[i]) for i in range(self.n)]

    def run(self, request: bytes, stdio: Sequence[int], out: np.ndarray) -> tuple[int, list[int]]:
        """A packed batch run in this thread with the events on: (runs done, counts so far)."""
        done = ffi.new("int64_t *")
        rc = lib.perflab_exec_counters_run(
            self.n, self._fds, request, len(request), list(stdio), -1,
            ptr(out, "struct perflab_run[]"), done, self._counts,
        )  # fmt: skip
        check(rc, "counted spawn batch")
        return int(done[0]), [int(self._counts[i]) for i in range(self.n)]

    def close(self) -> None:
        lib.perflab_exec_counters_close(self.n, self._fds)
