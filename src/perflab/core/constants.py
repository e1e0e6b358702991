"""The cffi-built core loaded, and the names and constants of it that need no numpy: the
choices and defaults a verb's --help shows are read here, before bindings (which imports numpy
and re-exports them) is.
"""

try:
    from perflab.core._core import ffi as ffi
    from perflab.core._core import lib
except ImportError as exc:  # pragma: no cover - depends on how perflab was installed
    raise ImportError(
        "perflab's C core is not built; reinstall with `pip install .` (needs a C compiler)"
    ) from exc


EVENT_INDEX = {
    "cycles": lib.PERFLAB_EV_CYCLES,
    "instructions": lib.PERFLAB_EV_INSTRUCTIONS,
    "ref-cycles": lib.PERFLAB_EV_REF_CYCLES,
    "task-clock": lib.PERFLAB_EV_TASK_CLOCK,
    "context-switches": lib.PERFLAB_EV_CONTEXT_SWITCHES,
    "cpu-migrations": lib.PERFLAB_EV_CPU_MIGRATIONS,
    "page-faults": lib.PERFLAB_EV_PAGE_FAULTS,
}

THREAD_KERNELS = {
    "loop": lib.PERFLAB_KERNEL_LOOP,
    "stream": lib.PERFLAB_KERNEL_STREAM,
    "spin": lib.PERFLAB_KERNEL_SPIN,
}

LOOP_FACTOR: int = lib.PERFLAB_LOOP_FACTOR
MAX_ITERATIONS: int = lib.PERFLAB_MAX_ITERATIONS  # probe records a run may send

COPY_KERNELS = {
    "libc": lib.PERFLAB_COPY_LIBC,
    "rep-movsb": lib.PERFLAB_COPY_REP_MOVSB,
    "loop": lib.PERFLAB_COPY_LOOP,
}

SYSCALLS = {
    "getpid": lib.PERFLAB_SYS_GETPID,
    "open+close": lib.PERFLAB_SYS_OPEN_CLOSE,
    "read": lib.PERFLAB_SYS_READ,
    "write": lib.PERFLAB_SYS_WRITE,
    "stat": lib.PERFLAB_SYS_STAT,
    "fstat": lib.PERFLAB_SYS_FSTAT,
    "sched_yield": lib.PERFLAB_SYS_SCHED_YIELD,
    "mmap+munmap": lib.PERFLAB_SYS_MMAP_MUNMAP,
}

# perf record's default sampling rate. Not 1000: a sampler in lockstep with the 1 kHz tick (or
# with timer-driven work) would see the same instant of each period.
SAMPLE_HZ = 999
MAX_SAMPLE_HZ = 100_000

RUNQ_MODES = ("off", "auto", "proc")  # how a run's run-queue wait is read (spawn.runq_columns)
ASLR_MODES = ("off", "on", "system")
