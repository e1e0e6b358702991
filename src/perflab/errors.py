"""The one exception type for user mistakes: faces print it as one line and exit non-zero."""


class PerflabError(Exception):
    """A problem the user can fix (bad input, missing tool, unwritable path)."""


class NativeUnavailable(PerflabError):
    """The machine lacks what a measurement needs (a counter, a permission, a CPU)."""


class Stopped(KeyboardInterrupt):
    """Runs stopped by SIGINT or SIGTERM; the verbs exit 128 + signum, finished runs kept."""

    def __init__(self, signum: int = 2):
        super().__init__(f"stopped by signal {signum}")
        self.signum = signum
