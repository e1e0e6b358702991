"""setuptools needs setup() to see cffi_modules and the spawner helper; the rest is in pyproject."""

from pathlib import Path

from setuptools import setup
from setuptools.command.build_ext import build_ext
from setuptools.errors import LinkError

CSRC = Path("csrc")
# The helper is its own files, the core's child-run files (spawn.c and its spawn_*.c) and the
# taskstats client they query.
SPAWNER_SOURCES = [
    str(p)
    for p in sorted(CSRC.glob("spawner/*.c")) + sorted(CSRC.glob("spawn*.c")) + [CSRC / "taskstats.c"]
]


class BuildWithSpawner(build_ext):
    """The C core, then perflab/core/_spawner: the helper that spawns children from a small
    process."""

    def run(self):
        super().run()
        out = Path(self.get_ext_fullpath("perflab.core._core")).parent
        objs = self.compiler.compile(
            SPAWNER_SOURCES,
            output_dir=str(Path(self.build_temp) / "spawner"),
            include_dirs=[str(CSRC), "src/perflab/workloads"],
            extra_postargs=["-O2", "-Wall", "-Wextra", "-Werror", "-std=gnu11"],
        )
        try:  # static: the helper's own peak memory is the floor of every child's
            self.compiler.link_executable(objs, "_spawner", str(out), extra_postargs=["-static"])
        except LinkError:  # no static libc here: a dynamic helper, a higher floor
            self.compiler.link_executable(objs, "_spawner", str(out))


setup(cffi_modules=["csrc/build.py:ffibuilder"], cmdclass={"build_ext": BuildWithSpawner})
