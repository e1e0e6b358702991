"""memory.c: copy kernels and their sweep over sizes, page touches, and locked memory."""

import numpy as np

from perflab.core.bindings.convert import check, ptr, u64_array
from perflab.core.constants import ffi, lib

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
