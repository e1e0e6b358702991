"""oscost.c: what system calls, libm calls and context switches cost."""

from collections.abc import Sequence

import numpy as np

from perflab.core.bindings.convert import check, ptr, u64_array
from perflab.core.constants import ffi, lib

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
