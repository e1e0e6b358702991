"""timing.c: the perf assertions' calls (running/timing.py), C or Python, timed alone or paired."""

from dataclasses import dataclass
from typing import Any

import numpy as np

from perflab.core.bindings.convert import check, ptr, u64_array
from perflab.core.constants import ffi, lib


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
