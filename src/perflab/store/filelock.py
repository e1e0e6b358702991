"""One writer per result file: an flock on PATH.lock, held for the whole run, naming its holder.

flock belongs to the open file, so the kernel drops it when the holder dies however it dies:
a lock file left by a dead process is stale by construction and simply taken over.

The lock sits beside the result, often in a directory others can write (/tmp): it is opened
without following a link, and used only when it is a regular file of this user's with one
name, so nobody can plant it to have perflab write its pid into their choice of file.
"""

import contextlib
import errno
import fcntl
import os
import stat
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from perflab.core import files
from perflab.errors import PerflabError

_held: dict[Path, list] = {}  # lock path -> [fd, depth, thread]: re-entrant in its thread
_guard = threading.Lock()
WAIT_STEP_S = 0.05  # how often a waiting acquire tries again


def lock_path(path: str | os.PathLike) -> Path:
    """The lock file beside a result file."""
    p = Path(path).absolute()
    return p.with_name(p.name + ".lock")


def _holder(fd: int) -> str:
    os.lseek(fd, 0, os.SEEK_SET)
    text = os.read(fd, 64).decode(errors="replace").strip()
    return f"pid {text}" if text.isdigit() else "another process"


def _refuse(path: Path, who: str, instead: str) -> PerflabError:
    if who.startswith("pid"):
        return PerflabError(
            f"{path}: another perflab run ({who}) is writing it; wait for it to end or stop it "
            f"(kill {who.removeprefix('pid ')}), or {instead}"
        )
    return PerflabError(f"{path}: {who} holds {lock_path(path)}; wait for it, or {instead}")


def _planted(lp: Path, st: os.stat_result, writing: bool) -> PerflabError | None:
    """Why a lock file is not one perflab may use, if it is not: a link, a FIFO or device, a
    file with other names (a hard link), or, to write, another user's (theirs may be read: it
    says who holds it). A file with no name is no plant: its holder let go and removed it
    between our open and this look (the caller opens the path again)."""
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISREG(st.st_mode):
        what = files.kind(st.st_mode)
    elif st.st_nlink > 1:
        what = f"a file with {st.st_nlink} names (a hard link)"
    elif writing and st.st_uid != os.geteuid():
        what = f"a file of another user (uid {st.st_uid})"
    else:
        return None
    return PerflabError(
        f"{lp}: is {what}, not a lock perflab made; refusing to use it (remove it, or choose "
        "another -o in a directory only you can write)"
    )


def _open(lp: Path, flags: int) -> int:
    """The lock file opened without following a link nor waiting on a FIFO, checked."""
    with contextlib.suppress(FileNotFoundError):
        err = _planted(lp, os.lstat(lp), flags != os.O_RDONLY)  # a device: never opened
        if err is not None:
            raise err
    try:
        fd = os.open(lp, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # a link planted since the lstat
            raise PerflabError(f"{lp}: is a symbolic link, not a lock perflab made") from None
        raise
    err = _planted(lp, os.fstat(fd), flags != os.O_RDONLY)
    if err is not None:
        os.close(fd)
        raise err
    return fd


OTHER_OUTPUT = "choose another -o FILE"


def acquire(path: str | os.PathLike, wait_s: float = 0.0, instead: str = OTHER_OUTPUT) -> None:
    """Take the lock of `path` for this thread (again, if it holds it: the holds nest),
    waiting up to wait_s seconds for another holder, another process or another thread of
    this one, to let go, or refuse, naming the holder and what the user may do `instead`."""
    lp = lock_path(path)
    deadline = time.monotonic() + wait_s
    while (holder := _try(lp)) is not None:
        if time.monotonic() >= deadline:
            raise _refuse(Path(path), holder, instead)
        time.sleep(WAIT_STEP_S)


def _try(lp: Path) -> str | None:
    """Take the lock file once: None when this thread holds it now, else who holds it."""
    with _guard:
        if lp in _held:
            thread = _held[lp][2]
            if thread is not threading.current_thread() and thread.is_alive():
                return f"another thread of this process ({thread.name})"
            _held[lp][1] += 1
            _held[lp][2] = threading.current_thread()
            return None
        while True:
            fd = _open(lp, os.O_RDWR | os.O_CREAT)
            if os.fstat(fd).st_nlink == 0:  # removed by its holder as it let go: open anew
                os.close(fd)
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                if exc.errno not in (errno.EWOULDBLOCK, errno.EACCES):
                    os.close(fd)
                    raise
                holder = _holder(fd)
                os.close(fd)
                return holder
            # The previous holder may have unlinked the file between our open and our flock:
            # then we locked an orphan inode, and must lock the file now at that path.
            try:
                same = _same(os.lstat(lp), os.fstat(fd))
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)
        with contextlib.suppress(OSError):  # a full disk: still locked, just anonymously
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        _held[lp] = [fd, 1, threading.current_thread()]
        return None


def release(path: str | os.PathLike) -> None:
    """Drop one hold on the lock (from any thread: a journal may be finished by another than
    the one that opened it); the last one removes the lock file, then unlocks."""
    lp = lock_path(path)
    with _guard:
        entry = _held.get(lp)
        if entry is None:
            return
        entry[1] -= 1
        if entry[1]:
            return
        del _held[lp]
        with contextlib.suppress(FileNotFoundError):
            if _same(os.lstat(lp), os.fstat(entry[0])):  # never what was put at its name since
                os.unlink(lp)
        os.close(entry[0])


def _same(a: os.stat_result, b: os.stat_result) -> bool:
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def writer(path: str | os.PathLike) -> str | None:
    """Who is writing a result file now ("pid N", or another thread of this process), if
    anyone but this thread is; None if nobody."""
    lp = lock_path(path)
    with _guard:
        mine = _held.get(lp)
        if mine is not None:
            thread = mine[2]
            if thread is threading.current_thread() or not thread.is_alive():
                return None
            return f"another thread of this process ({thread.name})"
    if not os.path.lexists(lp):
        return None
    try:
        fd = _open(lp, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return _holder(fd)
    finally:
        os.close(fd)
    return None


def check_free(path: str | os.PathLike) -> None:
    """Refuse up front a result file another process is writing, before anything is measured."""
    who = writer(path)
    if who is not None:
        raise _refuse(Path(path), who, OTHER_OUTPUT)


@contextlib.contextmanager
def held(
    path: str | os.PathLike, wait_s: float = 0.0, instead: str = OTHER_OUTPUT
) -> Iterator[None]:
    """The lock of `path` for the duration of a with block (see acquire)."""
    acquire(path, wait_s, instead)
    try:
        yield
    finally:
        release(path)
