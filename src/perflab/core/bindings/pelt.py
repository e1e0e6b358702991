"""pelt.c: change points in mean and variance, R changepoint's PELT."""

import numpy as np

from perflab.core.bindings.convert import check, ptr
from perflab.core.constants import lib


def pelt_meanvar(y: np.ndarray, penalty: float, floor: float, min_segment: int) -> list[int]:
    """Each segment's end (exclusive; the last is y's length) of the optimal segmentation."""
    y = np.ascontiguousarray(y, dtype=np.float64)
    ends = np.zeros(y.size // max(min_segment, 1) + 1, dtype=np.uintp)
    rc = lib.perflab_pelt_meanvar(
        ptr(y, "double[]"), y.size, penalty, floor, min_segment, ptr(ends, "size_t[]")
    )
    check(rc, f"change points of {y.size} values")
    return [int(e) for e in ends[:rc]]
