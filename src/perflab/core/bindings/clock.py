"""clock.c: the cycle counter's cost and rate, CPUID, and the clock sources and their reads."""

import functools

import numpy as np

from perflab.core.bindings.convert import check, ptr, u64_array
from perflab.core.constants import ffi, lib

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


def time_empty(n: int) -> np.ndarray:
    """Ticks between the timing layer's begin and end reads, n empty regions, timer cost
    already subtracted by the core (add timer_overhead_ticks() back for the raw reads)."""
    out = np.zeros(n, dtype=np.int64)
    lib.perflab_time_empty(ptr(out, "int64_t[]"), n)
    return out
