"""Workloads perflab compiles itself: system C compiler, -Wall -Werror, cached by content hash."""

import functools
import hashlib
import os
import shlex
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from perflab.errors import PerflabError

WORKLOADS = Path(__file__).resolve().parent / "workloads"
OPT_LEVELS = ("0", "1", "2", "3", "s", "g", "fast")
# The post shows no flags for this program; its other listings compile with a
# bare `gcc x.c -o x`, i.e. gcc's default -O0.  -O1 and above also reduce the
# loop to a closed form (i += inc << 16), leaving nothing to measure.
DEFAULT_OPT = "0"


@dataclass(frozen=True)
class Workload:
    """A compiled workload: where it is and everything that decided its bytes."""

    path: Path
    source: str
    digest: str
    compiler: str
    flags: tuple[str, ...]
    static: bool

    def meta(self) -> dict:
        """What a result records about the binary it measured."""
        return {
            "workload": self.source,
            "workload_digest": self.digest,
            "compiler": self.compiler,
            "cflags": " ".join(self.flags),
            "static": self.static,
        }


def cache_dir() -> Path:
    """$XDG_CACHE_HOME/perflab, else ~/.cache/perflab."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "perflab"


def compiler() -> list[str]:
    """$CC or cc, as an argv prefix; a missing compiler is one line saying what to install."""
    cc = shlex.split(os.environ.get("CC") or "cc")
    if not cc or shutil.which(cc[0]) is None:
        raise PerflabError(
            f"no C compiler ({cc[0] if cc else 'CC is empty'} not found): "
            "install one (`apt install gcc`) or set CC"
        )
    return cc


@functools.cache
def compiler_version(cc: tuple[str, ...]) -> str:
    """First line of `cc --version`: part of the cache key, since it decides the code."""
    done = subprocess.run([*cc, "--version"], capture_output=True, text=True, check=False)
    return (done.stdout or done.stderr).splitlines()[0].strip() if done.returncode == 0 else ""


def _key(source: Path, flags: list[str], version: str) -> str:
    """sha256 of the source, every header it may include, the flags and the compiler."""
    h = hashlib.sha256()
    for p in [source, *sorted(WORKLOADS.glob("*.h"))]:
        h.update(p.name.encode() + b"\0" + p.read_bytes())
    h.update("\0".join(flags).encode() + b"\0" + version.encode())
    return h.hexdigest()


def _compile(cc: list[str], flags: list[str], source: Path, out: Path) -> str:
    """Run the compiler into a temporary name, then rename: a cache entry is never torn."""
    fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", dir=out.parent)
    os.close(fd)
    cmd = [*cc, *flags, "-I", str(WORKLOADS), str(source), "-o", tmp]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        Path(tmp).unlink(missing_ok=True)
        return done.stderr.strip() or f"{shlex.join(cmd)} failed"
    os.replace(tmp, out)
    return ""


def build(source: str | os.PathLike, opt: str = DEFAULT_OPT, static: bool = True) -> Workload:
    """Compile one C workload (cached); static when the libc allows it, since exec is faster."""
    if opt not in OPT_LEVELS:
        raise PerflabError(f"-O{opt}: unknown level; use one of {', '.join(OPT_LEVELS)}")
    source = Path(source)
    cc = compiler()
    version = compiler_version(tuple(cc))
    cache = cache_dir()
    try:
        cache.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise PerflabError(f"{cache}: cannot create the build cache ({exc.strerror})") from None
    errors = []
    for link in (["-static"], []) if static else ([],):
        flags = [f"-O{opt}", "-Wall", "-Werror", *link]
        digest = _key(source, flags, version)
        out = cache / f"{source.stem}-{digest[:16]}"
        if out.exists() or not (err := _compile(cc, flags, source, out)):
            return Workload(out, source.name, digest, version, tuple(flags), bool(link))
        errors.append(err)
    raise PerflabError(f"{source.name}: compilation failed: {errors[-1].splitlines()[0]}")


def mytkowicz(opt: str = DEFAULT_OPT) -> Workload:
    """The paper's loop with the probe, built at -O<opt>."""
    return build(WORKLOADS / "mytkowicz.c", opt)
