"""Where a measured program's stdout and stderr go, so its bytes never mix with perflab's.

As hyperfine's --output: "null" (/dev/null), "inherit" (perflab's own stdout and stderr), or a
file's name (both streams, in the order the program writes them). Every verb that runs a
program takes the same choice (cli.options.program_output_option) and opens it here: profile
and counters hand the fd to their one run; the sweeps' child runs (childruns.quiet_options)
take it from directed(), whose block is the sweep, and /dev/null outside one.
"""

import contextlib
import contextvars
import os
from collections.abc import Iterator
from pathlib import Path

NULL, INHERIT = "null", "inherit"
# The fd child runs send their streams to inside directed(): an fd, None for perflab's own.
_DIRECTED: contextvars.ContextVar[tuple[int | None] | None] = contextvars.ContextVar(
    "program_output", default=None
)


@contextlib.contextmanager
def opened(where: str) -> Iterator[int | None]:
    """The fd the program's stdout and stderr go to (None: perflab's own) while the block
    runs; a file is written privately beside its name and takes the name when the block ends
    without an error."""
    from perflab.core import files

    if where == INHERIT:
        yield None
    elif where == NULL:
        fd = os.open(os.devnull, os.O_WRONLY | os.O_CLOEXEC)
        try:
            yield fd
        finally:
            os.close(fd)
    else:
        with files.replacing(Path(where)) as fd:
            yield fd


@contextlib.contextmanager
def directed(where: str) -> Iterator[None]:
    """Child runs started inside the block send their stdout and stderr to `where`."""
    with opened(where) as fd:
        token = _DIRECTED.set((fd,))
        try:
            yield
        finally:
            _DIRECTED.reset(token)


def child_fd(devnull: int) -> int | None:
    """Where a child run's streams go: directed()'s choice inside one, else devnull."""
    chosen = _DIRECTED.get()
    return devnull if chosen is None else chosen[0]
