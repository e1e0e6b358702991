"""One writer per result file: an flock on PATH.lock, held for the whole run, naming its holder.

flock belongs to the open file, so the kernel drops it when the holder dies however it dies:
a lock file left by a dead process is stale by construction and simply taken over.
"""

import contextlib
import errno
import fcntl
import os
import threading
from collections.abc import Iterator
from pathlib import Path

from perflab.errors import PerflabError

_held: dict[Path, list] = {}  # lock path -> [fd, depth]: re-entrant within this process
_guard = threading.Lock()


def lock_path(path: str | os.PathLike) -> Path:
    """The lock file beside a result file."""
    p = Path(path).absolute()
    return p.with_name(p.name + ".lock")


def _holder(fd: int) -> str:
    os.lseek(fd, 0, os.SEEK_SET)
    text = os.read(fd, 64).decode(errors="replace").strip()
    return f"pid {text}" if text.isdigit() else "another process"


def _refuse(path: Path, who: str) -> PerflabError:
    return PerflabError(
        f"{path}: another perflab run ({who}) is writing it; wait for it to end or stop it "
        f"(kill {who.removeprefix('pid ')}), or choose another -o FILE"
        if who.startswith("pid")
        else f"{path}: another process holds {lock_path(path)}; wait for it or choose another -o"
    )


def acquire(path: str | os.PathLike) -> None:
    """Take the lock of `path` for this process, or refuse with the pid holding it."""
    lp = lock_path(path)
    with _guard:
        if lp in _held:
            _held[lp][1] += 1
            return
        while True:
            fd = os.open(lp, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                if exc.errno not in (errno.EWOULDBLOCK, errno.EACCES):
                    os.close(fd)
                    raise
                err = _refuse(Path(path), _holder(fd))
                os.close(fd)
                raise err from None
            # The previous holder may have unlinked the file between our open and our flock:
            # then we locked an orphan inode, and must lock the file now at that path.
            try:
                same = os.stat(lp).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)
        with contextlib.suppress(OSError):  # a full disk: still locked, just anonymously
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        _held[lp] = [fd, 1]


def release(path: str | os.PathLike) -> None:
    """Drop one hold on the lock; the last one removes the lock file, then unlocks."""
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
            os.unlink(lp)
        os.close(entry[0])


def writer(path: str | os.PathLike) -> str | None:
    """Who is writing a result file now ("pid N"), if another process is; None if nobody."""
    lp = lock_path(path)
    if lp in _held or not lp.exists():
        return None
    try:
        fd = os.open(lp, os.O_RDONLY | os.O_CLOEXEC)
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
        raise _refuse(Path(path), who)


@contextlib.contextmanager
def held(path: str | os.PathLike) -> Iterator[None]:
    """The lock of `path` for the duration of a with block."""
    acquire(path)
    try:
        yield
    finally:
        release(path)
