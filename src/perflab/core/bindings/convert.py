"""Python values to and from the core's: -errno returns as errors, numpy arrays as C buffers."""

import errno
import os
from typing import Any

import numpy as np

from perflab.core.constants import ffi
from perflab.errors import PerflabError


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
