"""Which C sources the core was built from, and the refusal of a core built from others."""

import importlib.util
from pathlib import Path

from perflab.core.constants import ffi, lib

_CSRC = Path(__file__).resolve().parents[4] / "csrc"


def core_digest() -> str:
    """Digest of the C sources this core was compiled from."""
    return str(ffi.string(lib.perflab_core_digest()).decode())


def check_fresh() -> None:
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
