"""Workloads perflab compiles itself: system C compiler, -Wall -Werror, cached by content hash."""

import contextlib
import functools
import hashlib
import hmac
import os
import re
import resource
import shlex
import shutil
import stat
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from perflab.core import files
from perflab.errors import PerflabError

if TYPE_CHECKING:
    from perflab.system import supervisor

OPT_LEVELS = ("0", "1", "2", "3", "s", "g", "fast")
# The post shows no flags for this program; its other listings compile with a
# bare `gcc x.c -o x`, i.e. gcc's default -O0.  At -O1 gcc keeps g, inc, i, j, k in
# registers (no stack access left to alias), from -O2 on it folds the loop into
# i += inc << 16: 8 ticks, nothing to measure.
DEFAULT_OPT = "0"
WORKLOADS = Path(__file__).resolve().parents[1] / "workloads"
PROGRAM = 0o755  # what a build in the cache is given (before the umask): run by its owner


@dataclass(frozen=True)
class Workload:
    """A compiled workload: where it is and everything that decided its bytes."""

    path: Path
    source: str
    digest: str
    compiler: str
    flags: tuple[str, ...]
    static: bool
    source_digest: str = ""  # source_digest(): the text, whatever compiler built it

    def meta(self) -> dict:
        """What a result records about the binary it measured."""
        return {
            "workload": self.source,
            "workload_digest": self.digest,
            "workload_source_digest": self.source_digest,
            "compiler": self.compiler,
            "cflags": " ".join(self.flags),
            "static": self.static,
        }


def cache_dir() -> Path:
    """$XDG_CACHE_HOME/perflab, else ~/.cache/perflab; a per-user temporary directory where
    neither can be made (a read-only or missing HOME, as for service accounts) or the home one
    is another user's to change (root under a sudo that keeps HOME). perflab executes what it
    finds here, so each is a private directory (core/files.private_dir) or refused."""
    xdg = os.environ.get("XDG_CACHE_HOME")
    if xdg:  # a cache the user named is made whole, and refused rather than replaced
        return _private(Path(xdg) / "perflab", parents=True)
    home = Path(os.path.expanduser("~"))
    try:  # ~/.cache may be made, a missing HOME is not ours to create
        return files.private_dir(home / ".cache" / "perflab", parents=home.is_dir())
    except (OSError, PerflabError):
        return _private(Path(tempfile.gettempdir()) / f"perflab-cache-{os.geteuid()}")


def _private(path: Path, parents: bool = False) -> Path:
    """files.private_dir, its refusal one line naming the way out."""
    try:
        return files.private_dir(path, parents)
    except PerflabError as exc:
        raise PerflabError(f"cache directory: {exc}: set XDG_CACHE_HOME") from None
    except OSError as exc:
        raise PerflabError(f"cache directory {path}: {exc.strerror}: set XDG_CACHE_HOME") from None


def _seal(out: Path) -> None:
    """Record the sha256 of a build perflab just made, beside it in the private cache."""
    files.write_bytes(_record(out), files.digest(out).encode())


def _record(out: Path) -> Path:
    return out.with_name(f".{out.name}.sha256")


def cached(out: Path) -> bool:
    """Whether a cache entry is one perflab built, byte for byte: its name is computable by
    anyone, so it is trusted by its content (the sha256 recorded when it was built), never
    by its name; anything else is built again."""
    try:
        recorded = files.read_private(_record(out))
        found = hashlib.sha256(files.read_private(out)).hexdigest().encode()
    except (OSError, PerflabError):
        return False
    return hmac.compare_digest(recorded, found)


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
    try:  # a link command's tool is the user's: bounded, and it may print nothing
        done = bounded([*cc, "--version"])
    except OSError:
        return ""
    lines = (done.stdout or done.stderr).splitlines()
    return lines[0].strip() if done.returncode == 0 and lines else ""


def _sources(source: Path) -> "hashlib._Hash":
    """sha256 of the source and every header it may include (its own directory's first, as
    `#include "..."` finds them, then perflab's)."""
    h = hashlib.sha256()
    own = sorted(source.parent.glob("*.h")) if source.parent != WORKLOADS else []
    for p in [source, *own, *sorted(WORKLOADS.glob("*.h"))]:
        h.update(p.name.encode() + b"\0" + p.read_bytes())
    return h


def source_digest(source: str | os.PathLike) -> str:
    """What a workload's text is, whatever compiler builds it: the digest a document's sample
    names, so that a test can tell a figure of a loop perflab no longer builds."""
    return _sources(Path(source)).hexdigest()


def _key(source: Path, flags: list[str], version: str) -> str:
    """The cache key: the sources' sha256 (_sources), then the flags and the compiler."""
    h = _sources(source)
    h.update("\0".join(flags).encode() + b"\0" + version.encode())
    return h.hexdigest()


def bounded(argv: Sequence[str], env: dict[str, str] | None = None) -> "supervisor.Finished":
    """supervisor.run_bounded, imported when a build runs: the supervisor loads the C core and
    numpy, which the limits checked at every verb's door (system/limits.py) must come before."""
    from perflab.system import supervisor

    return supervisor.run_bounded(argv, env)


class _Failed(Exception):
    """A compiler's complaint, carried out of the write it failed."""


def _compile(cc: list[str], flags: list[str], source: Path, out: Path) -> str:
    """Run the compiler into a temporary name, then rename: a cache entry is never torn."""

    def run(tmp: Path) -> None:
        cmd = [*cc, *flags, "-I", str(WORKLOADS), str(source), "-o", str(tmp)]
        done = bounded(cmd)
        if done.returncode != 0:
            raise _Failed(done.stderr.strip() or f"{shlex.join(cmd)} failed")

    try:
        files.atomic(out, run, mode=PROGRAM)
    except _Failed as exc:
        return str(exc)
    _seal(out)
    return ""


def build(
    source: str | os.PathLike,
    opt: str = DEFAULT_OPT,
    static: bool = True,
    extra: Sequence[str] = (),
) -> Workload:
    """Compile one C workload (cached); static when the libc allows it, since exec is faster;
    extra flags last (-pthread: a glibc older than 2.34 keeps threads in libpthread)."""
    if opt not in OPT_LEVELS:
        raise PerflabError(f"-O{opt}: unknown level; use one of {', '.join(OPT_LEVELS)}")
    source = Path(source)
    cc = compiler()
    version = compiler_version(tuple(cc))
    cache = cache_dir()
    errors = []
    for link in (["-static"], []) if static else ([],):
        flags = [f"-O{opt}", "-Wall", "-Werror", *link, *extra]
        digest = _key(source, flags, version)
        out = cache / f"{source.stem}-{digest[:16]}"
        if cached(out) or not (err := _compile(cc, flags, source, out)):
            return Workload(out, source.name, digest, version, tuple(flags), bool(link),
                            source_digest(source))  # fmt: skip
        errors.append(err)
    raise _failed(source, errors[-1])


# How many times the compiler and the linker really ran in this process: a cached build
# runs neither (the tests and benchmarks/link_order.py count on it).
BUILDS = {"compile": 0, "link": 0}
LINKORDER_SOURCES = tuple(WORKLOADS / f"linkorder_{n}.c" for n in ("main", "a", "b", "c"))
LINKORDER_CFLAGS = ("-O2",)


@dataclass(frozen=True)
class Object:
    """An object file and the sha256 of its bytes: what a link's cache key is made of."""

    path: Path
    digest: str

    @classmethod
    def of(cls, path: str | os.PathLike) -> "Object":
        """A user's object, refused before anything is built if it is not there."""
        p = Path(path)
        if not p.is_file():
            raise PerflabError(f"{p}: no such object file")
        return cls(p.resolve(), hashlib.sha256(p.read_bytes()).hexdigest())

    @property
    def label(self) -> str:
        """The object's name on a link order: linkorder_a.o -> a, foo.o -> foo."""
        return re.sub(r"-[0-9a-f]{16}$", "", self.path.stem).removeprefix("linkorder_")


def compile_object(
    source: str | os.PathLike[str],
    cflags: tuple[str, ...] = LINKORDER_CFLAGS,
    cc: Sequence[str] | None = None,
) -> Object:
    """One translation unit to a cached .o (key: source, headers, flags, compiler)."""
    source = Path(source)
    cc = list(cc or compiler())
    flags = [*cflags, "-Wall", "-Werror", "-c"]
    digest = _key(source, flags, compiler_version(tuple(cc)))
    out = cache_dir() / f"{source.stem}-{digest[:16]}.o"
    if not cached(out):
        BUILDS["compile"] += 1
        if err := _compile(cc, flags, source, out):
            raise _failed(source, err)
    return Object.of(out)


def linkorder_objects(
    cflags: tuple[str, ...] = LINKORDER_CFLAGS, cc: Sequence[str] | None = None
) -> list[Object]:
    """The built-in link-order workload's objects (main, a, b, c), each compiled once."""
    return [compile_object(s, cflags, cc) for s in LINKORDER_SOURCES]


def padding_object(size: int, cc: Sequence[str] | None = None) -> Object:
    """An object whose .text is `size` unused bytes (workloads/code_offset.c), compiled once
    per size: linked first, it moves every function linked after it."""
    return compile_object(WORKLOADS / "code_offset.c", (f"-DPERFLAB_CODE_OFFSET={size}",), cc)


def heap_shim() -> Workload:
    """The library compare preloads to move the heap (workloads/heap_offset.c), compiled once."""
    return build(WORKLOADS / "heap_offset.c", "2", static=False, extra=("-shared", "-fPIC"))


def check_compiler(cc: str | None) -> list[str]:
    """--cc as an argv prefix (default $CC or cc), refused in one line when not installed."""
    if cc is None:
        return compiler()
    argv = shlex.split(cc)
    if not argv or shutil.which(argv[0]) is None:
        raise PerflabError(f"no C compiler ({cc!r} not found): install one or fix --cc")
    return argv


def link_template(template: str) -> list[str]:
    """A link command as argv tokens, refused unless it has {objects} (one token) and {output}."""
    try:
        tokens = shlex.split(template)
    except ValueError as exc:
        raise PerflabError(f"link command {template!r}: {exc}") from None
    if "{objects}" not in tokens:
        raise PerflabError(
            f"link command {template!r} has no {{objects}} placeholder (as a word of its own)"
        )
    if not any("{output}" in t for t in tokens):
        raise PerflabError(f"link command {template!r} has no {{output}} placeholder")
    if shutil.which(tokens[0]) is None:
        raise PerflabError(f"link command: {tokens[0]}: command not found")
    return tokens


@dataclass(frozen=True)
class Linker:
    """How a link order becomes a program: cc + ldflags, or a user's command template."""

    cc: tuple[str, ...] = ()
    ldflags: tuple[str, ...] = ()
    template: tuple[str, ...] = ()
    static: bool = False

    def argv(self, objects: list[Object], output: str) -> list[str]:
        """The link command for these objects in this order, never through a shell."""
        paths = [str(o.path) for o in objects]
        if self.template:
            out = []
            for t in self.template:
                out += paths if t == "{objects}" else [t.replace("{output}", output)]
            return out
        static = ["-static"] if self.static else []
        return [*self.cc, *paths, *self.ldflags, *static, "-o", output]

    def key(self) -> str:
        """What besides the objects decides the program's bytes."""
        tool = self.template[:1] or self.cc
        return "\0".join([*self.cc, *self.ldflags, *self.template, str(self.static)]) + (
            "\0" + compiler_version(tuple(tool)) if tool else ""
        )


def builtin_linker(cc: Sequence[str] | None = None) -> Linker:
    """Static when the libc allows it (exec is faster and libc does not move), else dynamic."""
    cc = tuple(cc or compiler())
    tag = hashlib.sha256(compiler_version(cc).encode()).hexdigest()[:12]
    probe = cache_dir() / f".static-ok-{tag}"
    try:
        found = files.read_private(probe)
    except (OSError, PerflabError):
        found = b""
    if found not in (b"0", b"1"):
        fd, tmp = tempfile.mkstemp(suffix=".c", dir=probe.parent)
        with os.fdopen(fd, "w") as f:
            f.write("int main(void) { return 0; }\n")
        ok = not _compile(list(cc), ["-static"], Path(tmp), Path(tmp + ".out"))
        Path(tmp).unlink()
        Path(tmp + ".out").unlink(missing_ok=True)
        _record(Path(tmp + ".out")).unlink(missing_ok=True)
        found = b"1" if ok else b"0"
        files.write_bytes(probe, found)
    return Linker(cc=cc, static=found == b"1")


def _first_error(stderr: str) -> str:
    """The linker's line that says what is wrong, not its 'in function main:' preamble."""
    lines = [x.strip() for x in stderr.splitlines() if x.strip()]
    pattern = re.compile(r"error|undefined|multiple definition|cannot find|not found", re.I)
    return next((x for x in lines if pattern.search(x)), lines[0] if lines else "")


@dataclass(frozen=True)
class Program:
    """A linked program: its path (same length for every order) and the order it was linked in."""

    path: Path
    order: tuple[str, ...]
    digest: str


def link(objects: list[Object], linker: Linker) -> Program:
    """Link objects in exactly this order, once: the cache key is their digests, order, linker."""
    h = hashlib.sha256()
    for o in objects:
        h.update(o.digest.encode() + b"\0")
    h.update(linker.key().encode())
    digest = h.hexdigest()
    out = cache_dir() / f"linked-{digest[:16]}"
    order = tuple(o.label for o in objects)
    if cached(out):
        return Program(out, order, digest)
    BUILDS["link"] += 1

    def run(tmp: Path) -> None:
        cmd = linker.argv(objects, str(tmp))
        try:
            done = bounded(cmd)
        except OSError as exc:
            raise PerflabError(f"link failed: {cmd[0]}: {exc.strerror}") from None
        if done.returncode != 0 or not tmp.stat().st_size:
            why = _first_error(done.stderr) or f"{shlex.join(cmd)} exited {done.returncode}"
            raise PerflabError(f"link of {','.join(order)} failed: {why}")

    files.atomic(out, run, mode=PROGRAM)
    _seal(out)
    return Program(out, order, digest)


# The drivers a user's build command finds wrapped first on PATH (as ldrand does): a build that
# names its compiler otherwise (an absolute path, gcc-12) links without perflab.
WRAPPED_DRIVERS = ("cc", "gcc", "clang", "c++", "g++", "clang++")


def link_wrappers() -> Path:
    """A directory holding the link wrapper (workloads/link_wrapper.c) under each driver's
    name, to put first on PATH; made once per build of the wrapper."""
    wrapper = build(WORKLOADS / "link_wrapper.c", "2")
    out = wrapper.path.with_name(f"link-wrappers-{wrapper.digest[:16]}")
    if not out.is_dir():
        tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
        for name in WRAPPED_DRIVERS:
            (tmp / name).symlink_to(wrapper.path)
        try:
            os.rename(tmp, out)
        except OSError:  # another perflab made it meanwhile
            shutil.rmtree(tmp)
    return out


def wrapped_env(compile_flags: Sequence[str] = ()) -> dict[str, str]:
    """This process's environment with the link wrappers first on PATH, every compile they
    see given compile_flags (one argument a line in PERFLAB_COMPILE_FLAGS)."""
    wrappers = link_wrappers()
    return {
        **os.environ,
        "PATH": os.pathsep.join([str(wrappers), os.environ.get("PATH", "")]),
        "PERFLAB_LINK_WRAPPERS": str(wrappers),
        "PERFLAB_COMPILE_FLAGS": "\n".join(compile_flags),
    }


def relink(
    command: Sequence[str],
    target: Path,
    order: Sequence[str] = (),
    pad: Object | None = None,
    flags: Sequence[str] = (),
) -> tuple[Program, list[Object]]:
    """Run a build command of the user's (no shell) with the link wrappers first on PATH, once
    target is set aside so that it links it again: its objects in `order` (their labels; all
    as given when empty), `pad` before them, `flags` after its own arguments. Returns the
    program, copied into the cache under its content's name, and the objects the link took, in
    order. A command that fails, or is killed, leaves target as it found it."""
    kept = restore_kept(target)
    if target.is_file():  # set aside, not removed: put back unless the command links it anew
        os.replace(target, kept)
    try:
        return _relink(command, target, order, pad, flags)
    finally:
        if not target.is_file() and os.path.lexists(kept):
            os.replace(kept, target)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(kept)


def restore_kept(target: Path) -> Path:
    """Where relink sets a program aside while its build command links it again; one a
    perflab killed meanwhile (kill -9) left there is put back first. Returns that place."""
    kept = target.with_name(f".{target.name}.perflab-kept")
    with contextlib.suppress(FileNotFoundError):
        st = os.lstat(kept)  # one this user set aside: not a file another user put there
        ours = stat.S_ISREG(st.st_mode) and st.st_uid == os.geteuid() and st.st_nlink == 1
        if ours and not target.exists():
            os.replace(kept, target)
    return kept


def _relink(
    command: Sequence[str],
    target: Path,
    order: Sequence[str],
    pad: Object | None,
    flags: Sequence[str],
) -> tuple[Program, list[Object]]:
    """relink's run of the command, the target set aside."""
    fd, log = tempfile.mkstemp(prefix=".link-log.", dir=cache_dir())
    os.close(fd)
    env = {
        **wrapped_env(),
        "PERFLAB_LINK_TARGET": str(target),
        "PERFLAB_LINK_LOG": log,
        "PERFLAB_LINK_ORDER": ",".join(order),
        "PERFLAB_LINK_PAD": str(pad.path) if pad else "",
        "PERFLAB_LINK_FLAGS": "\n".join(flags),
    }
    shown = shlex.join(command)
    try:
        BUILDS["link"] += 1
        done = bounded(list(command), env)
        linked = Path(log).read_text().splitlines()
    except OSError as exc:
        raise PerflabError(f"{shown}: {exc.strerror}") from None
    finally:
        Path(log).unlink(missing_ok=True)
    if done.returncode != 0:
        why = _first_error(done.stderr + done.stdout) or "no message"
        raise PerflabError(f"{shown} exited {done.returncode}: {why}")
    if not linked or not target.is_file():
        raise PerflabError(
            f"{shown} did not link {target} through a compiler driver on PATH "
            f"({', '.join(WRAPPED_DRIVERS)}): perflab cannot pad or reorder its link"
        )
    if len(linked) == 1:
        raise PerflabError(
            f"{shown} links {target} from no object file of its own (compiles and links in one "
            "call?): perflab pads and reorders .o files; compile them first with -c"
        )
    objects = [Object.of(p) for p in linked[1:]]
    data = target.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    out = cache_dir() / f"linked-{digest[:16]}"
    if not cached(out):
        files.atomic(out, lambda tmp: tmp.write_bytes(data), mode=PROGRAM)
        _seal(out)
    return Program(out, tuple(o.label for o in objects), digest), objects


def _failed(source: Path, err: str) -> PerflabError:
    """The compiler's first line; where it ran out of memory, the limit it met (a compiler
    under `ulimit -d` fails before perflab's own check of the limits can name it)."""
    first = err.splitlines()[0] if err else "no output"
    if "out of memory" in first.lower():
        for limit, flag in ((resource.RLIMIT_AS, "ulimit -v"), (resource.RLIMIT_DATA, "ulimit -d")):
            soft = resource.getrlimit(limit)[0]
            if soft != resource.RLIM_INFINITY:
                first += f" ({flag} allows {soft // 2**20} MiB; raise it)"
                break
    return PerflabError(f"{source.name}: compilation failed: {first}")
