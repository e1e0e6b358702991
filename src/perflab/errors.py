"""The one exception type for user mistakes: faces print it as one line and exit non-zero."""


class PerflabError(Exception):
    """A problem the user can fix (bad input, missing tool, unwritable path)."""


class NativeUnavailable(PerflabError):
    """The machine lacks what a measurement needs (a counter, a permission, a CPU)."""
