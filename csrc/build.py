"""cffi out-of-line build of perflab.core._core: the cdef is csrc/perflab.h, read, never retyped."""

import shutil
import sys
import sysconfig
from pathlib import Path

from cffi import FFI

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
PROBE_DIR = ROOT / "src" / "perflab" / "workloads"


def _require_compiler() -> None:
    """Stop the install with one line when there is no C compiler to build the core."""
    cc = (sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(cc) is None and shutil.which("cc") is None:
        sys.exit(
            f"perflab: no C compiler found ({cc!r} is not on PATH); install one, "
            "e.g. `apt install gcc` or `dnf install gcc`, then retry"
        )


_require_compiler()
sys.path.insert(0, str(HERE))
from digest import source_digest, source_files  # noqa: E402 - lives beside this script

_sources = sorted(HERE.glob("*.c"))

ffibuilder = FFI()
ffibuilder.cdef((HERE / "perflab.h").read_text())
ffibuilder.set_source(
    "perflab.core._core",
    '#include <stdint.h>\n#include <stddef.h>\n#include "perflab.h"\n',
    sources=[str(p.relative_to(ROOT)) for p in _sources],
    include_dirs=[str(HERE.relative_to(ROOT)), str(PROBE_DIR.relative_to(ROOT))],
    depends=[str(p.relative_to(ROOT)) for p in source_files(HERE) if p.suffix == ".h"],
    define_macros=[("PERFLAB_CORE_DIGEST", f'"{source_digest(HERE)}"')],
    extra_compile_args=["-O2", "-Wall", "-Wextra", "-Werror", "-std=gnu11"],
    libraries=["m", "pthread"],
)
