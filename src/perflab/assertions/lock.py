"""The measuring lock: one of this user's perf measurements at a time (pytest-xdist workers,
other sessions), in a directory no other user can write."""

from __future__ import annotations

import contextlib
import fcntl
import math
import os
import stat
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from perflab.errors import PerflabError

LOCK_NAME = "perflab-measure.lock"
_held = threading.local()  # how deep this thread is inside measuring_lock (a target's assertion)


def lock_dir() -> Path:
    """A directory only this user can write, for the measuring lock: $XDG_RUNTIME_DIR when it
    is this user's and private, else $TMPDIR/perflab-UID, created 0700 and checked. In a
    shared directory another user could plant the lock as a link, or hold it to block every
    assertion."""
    uid = os.geteuid()
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and os.path.isabs(runtime) and _private(Path(runtime), uid):
        return Path(runtime)
    made = Path(tempfile.gettempdir()) / f"perflab-{uid}"
    with contextlib.suppress(FileExistsError):
        os.mkdir(made, 0o700)
    if not _private(made, uid):
        raise PerflabError(
            f"{made}: not a directory private to this user (uid {uid}), so perflab will not "
            "keep its measuring lock there; remove it, or set XDG_RUNTIME_DIR to one"
        )
    return made


def _private(directory: Path, uid: int) -> bool:
    """A real directory (not a link), owned by uid, that no one else may enter or write."""
    try:
        st = os.lstat(directory)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == uid and not st.st_mode & 0o077


def lock_holder(fd: int) -> str:
    """Who holds the flock on this open file, as /proc/locks says: 'pid N (command)'."""
    st = os.fstat(fd)
    file = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"  # as the kernel
    try:
        lines = Path("/proc/locks").read_text().splitlines()
    except OSError:
        return "another process"
    for line in lines:
        words = line.split()
        if len(words) > 5 and words[1] == "FLOCK" and words[5] == file:
            pid = words[4]
            if pid == str(os.getpid()):
                return f"this process (pid {pid}: another thread's measurement)"
            try:
                argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
                name = " ".join(b" ".join(argv).decode(errors="replace").split())[:80]
            except OSError:
                name = ""
            return f"pid {pid}" + (f" ({name})" if name else "")
    return "another process"


@contextlib.contextmanager
def measuring_lock(path: Path | None = None, wait_s: float = math.inf) -> Iterator[float]:
    """Hold the lock that keeps this user's perf measurements (pytest-xdist workers, other
    sessions) from running at the same time; yields the seconds spent waiting for it.

    The lock lives in lock_dir() and is opened without following a link. Waiting ends after
    wait_s seconds with one line naming who holds it. Inside a measurement already holding
    it (a target that itself asserts) it is held already: entered at once, not waited for."""
    if getattr(_held, "depth", 0):
        _held.depth += 1
        try:
            yield 0.0
        finally:
            _held.depth -= 1
        return
    where = path if path is not None else lock_dir() / LOCK_NAME
    t0 = time.monotonic()
    try:
        fd = os.open(where, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        raise PerflabError(f"{where}: cannot open the measuring lock ({exc.strerror})") from None
    try:
        pause = 0.001
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                waited = time.monotonic() - t0
                if waited >= wait_s:
                    raise PerflabError(
                        f"{where}: the measuring lock is held by {lock_holder(fd)}; waited "
                        f"{waited:.1f} s, the budget's {wait_s:g} s, for it to be free"
                    ) from None
                time.sleep(min(pause, max(wait_s - waited, 0.0)))
                pause = min(pause * 2, 0.05)
        _held.depth = 1
        try:
            yield time.monotonic() - t0
        finally:
            _held.depth = 0
    finally:
        os.close(fd)
