"""The one exception type for user mistakes (faces print it as one line and exit non-zero) and
the one warning type for measurements that went on without something asked for."""

import contextlib
import warnings
from collections.abc import Callable, Iterator
from typing import Any


class PerflabError(Exception):
    """A problem the user can fix (bad input, missing tool, unwritable path)."""


class WrongType(PerflabError, TypeError):
    """An argument of the wrong type (the Python API's max_size='128'): one line as the CLI says
    it, and a TypeError to code that catches one."""


class TimedOut(PerflabError):
    """A build, link or tool killed past its time limit: no verdict on what it builds, so
    nothing about it is kept as failed."""


class Lost(PerflabError):
    """A helper perflab waited on ended under it (a program it ran may have killed it); the
    runs finished before are kept, and the faces say where and how to resume."""


class NativeUnavailable(PerflabError):
    """The machine lacks what a measurement needs (a counter, a permission, a CPU)."""


class Stopped(KeyboardInterrupt):
    """Runs stopped by SIGINT or SIGTERM; the verbs exit 128 + signum, finished runs kept."""

    def __init__(self, signum: int = 2):
        super().__init__(f"stopped by signal {signum}")
        self.signum = signum


class Interrupted(Stopped):
    """A run stopped by SIGINT or SIGTERM that still built its frame (what it measured up to
    then): a verb prints it, then `kept` (what became of the run), and exits 128 + signum."""

    def __init__(self, frame: Any, signum: int, kept: str):
        super().__init__(signum)
        self.frame, self.kept = frame, kept


class OtherExperiment(PerflabError):
    """A resume given another experiment's file: the faces name both by the verb that makes it."""

    def __init__(self, path: object, recorded: str, asked: str):
        self.path, self.recorded, self.asked = path, recorded, asked
        super().__init__(self.said(str))

    def said(self, describe: Callable[[str], str]) -> str:
        """The one line, each experiment named by describe(name)."""
        return f"{self.path} holds a {describe(self.recorded)} result, not {describe(self.asked)}"


class PerflabWarning(UserWarning):
    """Something was not as asked (no permission for a priority, no mlock) but the run went on."""


class PerflabNote(UserWarning):
    """What perflab chose where nothing was asked (the CPU it measures on) and why: said once,
    not a warning (a test that turns PerflabWarning into errors is not failed by a busy CPU)."""


# Every warning perflab gives: what went otherwise than asked, and the option or step that
# fixes or silences it (tests/test_cli_foundation.py checks each names one).
WARNINGS = {
    "rt_refused": "real-time priority refused: {why}; continuing at normal priority "
    "(--no-rt: do not ask)",
    "rt_throttled": "runs of up to {longest} ms are longer than the kernel lets real-time tasks "
    "run ({runtime} ms of each {period} ms on a CPU), so it pauses each for the rest of its "
    "period inside the run; --no-rt runs them at normal priority, or raise "
    "/proc/sys/kernel/sched_rt_runtime_us",
    "pages_kept": "{programs}: pages stayed in memory at a layout's start (a running process "
    "maps the program, or its filesystem keeps them, as tmpfs does), so where they sit in "
    "physical memory is the same in every layout and identical copies can differ by it; end "
    "what runs it, or keep it on a disk filesystem (beside --output, say)",
    "chunk_dropped": "dropped {chunk}: {problem}; its runs are measured again "
    "(--discard-bad: drop a damaged earlier result instead of refusing it)",
    "mlock_refused": "{error}; page faults may show in the curve (run as root or raise "
    "`ulimit -l`; --no-mlock silences this)",
    "hog_rt_refused": "the {hog} hog could not get real-time priority ({why}); it runs as a "
    "normal CPU hog (--perturb rt needs root, CAP_SYS_NICE or RLIMIT_RTPRIO)",
    "priority_refused": "could not set {what} priority ({why}); running at normal priority "
    "(needs root, CAP_SYS_NICE or an RLIMIT_RTPRIO/RLIMIT_NICE allowance; or drop --nice/--rt)",
    "points_differ": "{before} and {after} differ in {names}, which define what a point "
    "measures ({detail}): compared anyway as --force asked, but a ratio is not a change",
    "rows_duplicated": "{path}: {rows} rows repeat a ({key}) already in the file, so its counts "
    "and medians weigh those runs twice (changed after perflab wrote it; measure again with "
    "--output FILE)",
    "rows_missing": "{path}: {missing} of its {planned} planned runs are missing although it "
    "says complete (changed after perflab wrote it); --resume {path} measures them",
    "rows_unplanned": "{path}: {what}: rows its plan never made (changed after perflab wrote "
    "it; measure again with --output FILE)",
    "newer_perflab": "{path}: written by perflab {theirs}, newer than this perflab {ours}: what "
    "it added is not read (pip install --upgrade perflab)",
    "cpu_busy_rt": "{what} over {window} ms, a real-time task: runs pinned there wait for it; "
    "choose another CPU with --cpu{quieter}, or stop that task",
    "sidecar_unchecked": "{path}: its sidecar {sidecar} records no checksum, so a change to the "
    "CSV since it was saved cannot be seen (measure again with --output FILE, or save it again "
    "with perflab.results.save)",
}
_warned: set[str] = set()
_noted: set[str] = set()
_notes_shown = False  # inside warnings_as_lines: a face prints notes; a notebook reads metadata


def warning(name: str, **fields: object) -> str:
    """The catalogue's text of warning `name`, filled in."""
    return WARNINGS[name].format(**fields)


def warn(message: str) -> None:
    """The one way a measurement warns: a PerflabWarning (the CLI prints it as one line)."""
    warnings.warn(message, PerflabWarning, stacklevel=3)


def note_once(message: str) -> None:
    """Say what perflab chose and why, once per distinct message in this process (compare's
    rounds measure one plan again and again): a PerflabNote, printed as 'perflab: ...' where a
    face shows lines (warnings_as_lines); the API keeps it in the result's metadata alone."""
    if _notes_shown and message not in _noted:
        _noted.add(message)
        warnings.warn(message, PerflabNote, stacklevel=3)


def warn_once(message: str) -> None:
    """warn, once per distinct message in this process."""
    if message not in _warned:
        _warned.add(message)
        warnings.warn(message, PerflabWarning, stacklevel=3)


@contextlib.contextmanager
def warnings_as_lines(echo: Callable[[str], None]) -> Iterator[None]:
    """Hand every PerflabWarning of the block to echo as one line (faces: 'perflab: warning:')."""
    with warnings.catch_warnings():
        warnings.simplefilter("always", PerflabWarning)
        warnings.simplefilter("always", PerflabNote)
        shown = warnings.showwarning

        def show(message: Warning | str, category: type[Warning], *rest: object) -> None:
            if issubclass(category, PerflabNote):
                echo(f"perflab: {message}")
            elif issubclass(category, PerflabWarning):
                echo(f"perflab: warning: {message}")
            else:
                shown(message, category, *rest)  # type: ignore[arg-type]

        global _notes_shown, _noted
        warnings.showwarning = show  # type: ignore[assignment]
        # each face's command says its notes once: a second command in one process (a test's
        # CliRunner, a notebook's) says its own again
        showing, _notes_shown = _notes_shown, True
        noted, _noted = _noted, set()
        try:
            yield
        finally:
            warnings.showwarning = shown
            _notes_shown, _noted = showing, noted


class RealTimeOverrun(PerflabError):
    """Real-time workers computed past RLIMIT_RTTIME: dropped to normal priority, results void."""
