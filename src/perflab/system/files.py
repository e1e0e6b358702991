"""Files written whole or not at all: a reader never sees a torn result, cache or journal chunk."""

import contextlib
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path


def atomic(path: Path, write: Callable[[Path], object], exclusive: bool = False) -> None:
    """Write through a temporary file in the same directory, then rename: never a torn file.

    exclusive: fail rather than replace an existing file (a journal chunk is never rewritten).
    """
    tmp = _temporary(path)
    try:
        write(tmp)
        _publish(tmp, path, exclusive)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _temporary(path: Path) -> Path:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent or ".")
    os.close(fd)
    return Path(tmp)


def _publish(tmp: Path, path: Path, exclusive: bool = False) -> None:
    os.chmod(tmp, 0o666 & ~_umask())  # mkstemp's 0600 would outlive the rename
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
        _publish(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    finally:
        if fd >= 0:
            os.close(fd)
