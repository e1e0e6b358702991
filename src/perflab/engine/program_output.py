"""Where a measured program's stdout and stderr go, so its bytes never mix with perflab's.

As hyperfine's --output: "null" (/dev/null), "inherit" (perflab's own stdout and stderr), or a
file's name (both streams, in the order the program writes them). Every verb that runs a
program takes the same choice (cli.common.program_output_option) and opens it here.
"""

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

NULL, INHERIT = "null", "inherit"


@contextlib.contextmanager
def opened(where: str) -> Iterator[int | None]:
    """The fd the program's stdout and stderr go to (None: perflab's own) while the block
    runs; a file is written privately beside its name and takes the name when the block ends
    without an error."""
    from perflab.system import files

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
