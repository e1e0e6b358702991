"""alias.c: a store and a load 4 KiB apart (aliased) timed against distinct addresses."""

import numpy as np

from perflab.core.bindings.convert import check, ptr, u64_array
from perflab.core.constants import lib

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
