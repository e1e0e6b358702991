"""The one exception type for user mistakes (faces print it as one line and exit non-zero) and
the one warning type for measurements that went on without something asked for."""

import contextlib
import warnings
from collections.abc import Callable, Iterator


class PerflabError(Exception):
    """A problem the user can fix (bad input, missing tool, unwritable path)."""


class NativeUnavailable(PerflabError):
    """The machine lacks what a measurement needs (a counter, a permission, a CPU)."""


class Stopped(KeyboardInterrupt):
    """Runs stopped by SIGINT or SIGTERM; the verbs exit 128 + signum, finished runs kept."""

    def __init__(self, signum: int = 2):
        super().__init__(f"stopped by signal {signum}")
        self.signum = signum


class PerflabWarning(UserWarning):
    """Something was not as asked (no permission for a priority, no mlock) but the run went on."""


_warned: set[str] = set()


def warn_once(message: str) -> None:
    """The one way a measurement warns: a PerflabWarning, once per distinct message."""
    if message not in _warned:
        _warned.add(message)
        warnings.warn(message, PerflabWarning, stacklevel=3)


@contextlib.contextmanager
def warnings_as_lines(echo: Callable[[str], None]) -> Iterator[None]:
    """Hand every PerflabWarning of the block to echo as one line (faces: 'perflab: warning:')."""
    with warnings.catch_warnings():
        warnings.simplefilter("always", PerflabWarning)
        shown = warnings.showwarning

        def show(message: Warning | str, category: type[Warning], *rest: object) -> None:
            if issubclass(category, PerflabWarning):
                echo(f"perflab: warning: {message}")
            else:
                shown(message, category, *rest)  # type: ignore[arg-type]

        warnings.showwarning = show  # type: ignore[assignment]
        try:
            yield
        finally:
            warnings.showwarning = shown


class RealTimeOverrun(PerflabError):
    """Real-time workers computed past RLIMIT_RTTIME: dropped to normal priority, results void."""
