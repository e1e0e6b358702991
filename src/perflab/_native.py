"""The only module that touches the cffi-built core: typed wrappers over csrc/perflab.h."""

import errno
import importlib.util
import os
from pathlib import Path

import numpy as np

from perflab.errors import PerflabError

try:
    from perflab._core import ffi, lib
except ImportError as exc:  # pragma: no cover - depends on how perflab was installed
    raise ImportError(
        "perflab's C core is not built; reinstall with `pip install .` (needs a C compiler)"
    ) from exc

_CSRC = Path(__file__).resolve().parents[2] / "csrc"


def _check_fresh() -> None:
    """Refuse a core built from other sources than the checkout beside it (editable installs)."""
    digest_py = _CSRC / "digest.py"
    if not digest_py.exists():
        return
    spec = importlib.util.spec_from_file_location("_perflab_digest", digest_py)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if module.source_digest(_CSRC) != core_digest():
        raise ImportError(
            "perflab's C core is stale (csrc/ changed since it was built); "
            "rebuild with `pip install -e .` or `python setup.py build_ext --inplace`"
        )


def core_digest() -> str:
    """Digest of the C sources this core was compiled from."""
    return ffi.string(lib.perflab_core_digest()).decode()


def check(rc: int, what: str) -> int:
    """Turn a -errno return of the core into a PerflabError naming the operation."""
    if rc < 0:
        name = errno.errorcode.get(-rc, str(-rc))
        raise PerflabError(f"{what}: {os.strerror(-rc)} ({name})")
    return rc


def u64_array(n: int) -> np.ndarray:
    """A uint64 array the core can fill in place."""
    return np.zeros(n, dtype=np.uint64)


def ptr(arr: np.ndarray, ctype: str):
    """A C pointer onto a numpy array's buffer, without a copy."""
    return ffi.from_buffer(ctype, arr)


if os.environ.get("PERFLAB_SKIP_FRESHNESS") != "1":
    _check_fresh()
