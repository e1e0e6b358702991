"""Files written whole, and never through another user's path: a reader never sees a torn
result, cache or journal chunk, and a link, FIFO or device planted where perflab writes, reads
or keeps what it executes redirects or blocks nothing.

Every layer writes through here (figures are drawn in analysis/, results saved by the engine),
so it sits beside the C core's bindings, below all of them.
"""

import contextlib
import hashlib
import os
import stat
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO

from perflab.errors import PerflabError

_KINDS = {
    stat.S_IFDIR: "a directory",
    stat.S_IFIFO: "a FIFO",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
    stat.S_IFLNK: "a symbolic link",
    stat.S_IFREG: "a regular file",
}
MAX_LINKS = 40  # what the kernel follows in one path before ELOOP


def kind(mode: int) -> str:
    """What kind of file a mode says, in words."""
    return _KINDS.get(stat.S_IFMT(mode), "not a regular file")


def check_target(path: str | os.PathLike) -> None:
    """Refuse, before any work, an output that exists and is not a regular file: a FIFO would
    block the write, a device take it. A link is fine: the rename replaces the link itself."""
    with contextlib.suppress(FileNotFoundError, NotADirectoryError):
        mode = os.stat(path).st_mode
        if not stat.S_ISREG(mode):
            raise PerflabError(f"{path}: is {kind(mode)}, not a file perflab can write")


def check_new(path: str | os.PathLike, formats: tuple[str, ...], what: str) -> Path:
    """Refuse, before any work, a path that perflab could not write: no file's name, a format
    not in `formats` (`what` names the kind), a missing or unwritable directory, a FIFO or
    device in its place. Writability is a file made and removed beside it: os.access says yes
    to root even on /proc."""
    if isinstance(path, str) and (not path or path.endswith("/")):
        raise PerflabError(f"{path!r}: not a file's name (empty, or ending with /)")
    p = Path(path)
    if p.suffix not in formats:
        raise PerflabError(
            f"{p}: unknown {what} format {p.suffix!r}; use one of {', '.join(formats)}"
        )
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise PerflabError(f"{p}: directory {parent} does not exist")
    check_target(p)
    if p.exists() and not os.access(p, os.W_OK):
        raise PerflabError(f"{p}: not writable")
    try:
        fd, probe = tempfile.mkstemp(prefix=f".{p.name}.", dir=parent)
    except OSError as exc:
        raise PerflabError(f"{p}: not writable ({exc.strerror})") from None
    os.close(fd)
    os.unlink(probe)
    return p


def open_read(path: str | os.PathLike) -> BinaryIO:
    """A file to read, refused in one line when it is a FIFO (whose open would wait for a
    writer forever), a device or a directory; a link to a regular file is read."""
    mode = os.stat(path).st_mode  # not opened at all: a device's open may act
    if not stat.S_ISREG(mode):
        raise PerflabError(f"{path}: is {kind(mode)}, not a file perflab can read")
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)  # swapped since: no wait
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise PerflabError(f"{path}: is {kind(mode)}, not a file perflab can read")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read(path: str | os.PathLike) -> bytes:
    """A regular file's bytes (open_read's refusals)."""
    with open_read(path) as f:
        return f.read()


def digest(path: str | os.PathLike) -> str:
    """The sha256 of a regular file's bytes, read in blocks."""
    h = hashlib.sha256()
    with open_read(path) as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def read_private(path: str | os.PathLike) -> bytes:
    """A file perflab itself wrote into a private directory (a cache entry, a calibration):
    not a link, a regular file of this user's; else PerflabError."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
            raise PerflabError(f"{path}: not a regular file of this user's")
        os.set_blocking(fd, True)
        with os.fdopen(fd, "rb", closefd=False) as f:
            return f.read()
    finally:
        os.close(fd)


def atomic(
    path: Path, write: Callable[[Path], object], exclusive: bool = False, mode: int = 0o666
) -> None:
    """Write through a new temporary file in the same directory, then rename: never a torn
    file, and never written through what is at `path` (a planted link is replaced, not followed).

    exclusive: fail rather than replace an existing file (a journal chunk is never rewritten).
    mode: its permissions before the umask (0o755 for a program a compiler or linker wrote).
    """
    tmp = temporary_beside(path)
    try:
        write(tmp)
        publish(tmp, path, exclusive, mode)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Bytes written whole to `path` (atomic)."""
    atomic(Path(path), lambda tmp: tmp.write_bytes(data))


def temporary_beside(path: Path) -> Path:
    # mkstemp creates with O_EXCL, which follows no link: the name is new, and ours (0600)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent or ".")
    except OSError as exc:  # said of the file asked for, not of a name it never saw
        raise OSError(exc.errno, exc.strerror, str(path)) from None
    os.close(fd)
    return Path(tmp)


def publish(tmp: Path, path: Path, exclusive: bool = False, mode: int = 0o666) -> None:
    os.chmod(tmp, mode & ~_umask())  # mkstemp's 0600 would outlive the rename
    if exclusive:
        os.link(tmp, path)
        tmp.unlink()
    else:
        os.replace(tmp, path)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def replacing(path: Path) -> Iterator[int]:
    """An fd on a private new file beside path (mkstemp: never a planted name or link),
    renamed to path when the block ends without an error: a stream written while a program
    runs, which a reader never sees half-made and no other user can redirect."""
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent or ".")
    tmp = Path(name)
    try:
        yield fd
        os.close(fd)
        fd = -1
        publish(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    finally:
        if fd >= 0:
            os.close(fd)


def private_dir(path: str | os.PathLike, parents: bool = False) -> Path:
    """A directory for what perflab will execute or trust later (compiled workloads,
    calibrations): created 0700 (its missing parents too when `parents`), owned by this user,
    writable by no one else, and reached only through directories and links of this user or
    root that no one else can change. Returns its real path; anything else is refused."""
    real = _walk(Path(os.path.abspath(path)), parents)
    st = os.lstat(real)
    if st.st_uid != os.geteuid():
        raise PerflabError(f"{real} belongs to another user (uid {st.st_uid})")
    if st.st_mode & 0o077:  # ours: no one else needs in
        os.chmod(real, 0o700)
    return real


def _walk(path: Path, create: bool) -> Path:
    """path resolved one name at a time, as the kernel does, each step checked (and the last
    directory made when missing, every missing one when `create`)."""
    trusted = {0, os.geteuid()}
    todo = list(path.parts[1:])
    here, links = Path("/"), 0
    while todo:
        name = todo.pop(0)
        if name in ("", "."):
            continue
        if name == "..":
            here = here.parent
            continue
        step = here / name
        try:
            st = os.lstat(step)
        except FileNotFoundError:
            if todo and not create:
                raise PerflabError(f"{path}: {step} does not exist") from None
            with contextlib.suppress(FileExistsError):  # another perflab made it meanwhile
                os.mkdir(step, 0o700)
            st = os.lstat(step)
        if stat.S_ISLNK(st.st_mode):
            if st.st_uid not in trusted:
                raise PerflabError(f"{path}: reached through {step}, a link another user owns")
            links += 1
            if links > MAX_LINKS:
                raise PerflabError(f"{path}: too many levels of symbolic links")
            target = Path(os.readlink(step))
            if target.is_absolute():
                here, todo = Path("/"), [*target.parts[1:], *todo]
            else:
                todo = [*target.parts, *todo]
            continue
        if not stat.S_ISDIR(st.st_mode):
            raise PerflabError(f"{path}: {step} is {kind(st.st_mode)}, not a directory")
        if st.st_uid not in trusted or _others_may_rename(st):
            raise PerflabError(
                f"{path}: reached through {step}, which another user can change "
                f"(owner uid {st.st_uid}, mode {stat.S_IMODE(st.st_mode):o})"
            )
        here = step
    return here


def _others_may_rename(st: os.stat_result) -> bool:
    """Whether someone else may rename what this directory holds: it is writable by others,
    or by a group not this user's own, and not sticky (as /tmp is)."""
    if st.st_mode & stat.S_ISVTX:
        return False
    return bool(st.st_mode & 0o002 or (st.st_mode & 0o020 and st.st_gid != os.getegid()))
