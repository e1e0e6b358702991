"""Run controls shared by the experiments that run child processes.

Ctrl-C and SIGTERM as a flag that stops the batch in flight between runs, perflab kept off
the measured CPUs, real-time refusal warned once (Rubini's Listing 2), the default CPU, and what
a journaled run row is.
"""

import contextlib
import os
import signal
import sys
import threading
from dataclasses import replace

import numpy as np
import pandas as pd

from perflab import machine, spawn
from perflab.errors import PerflabError, Stopped
from perflab.journal import Expect

# The C core counts a timeout in int64 nanoseconds, and 0 ns would mean none at all.
TIMEOUT_S = (1e-6, 1e6)

# What a recorded child run can hold: anything else in a journal was not written by perflab.
_COUNT = (0.0, float(2**63))
RUN_RANGES = {
    col: _COUNT
    for col in ("ticks", "outer_ticks", "wall_ns", "utime_ns", "stime_ns", "maxrss_kb",
                "minflt", "majflt", "nvcsw", "nivcsw", "cycles", "instructions")
}  # fmt: skip


class Interrupt:
    """Ctrl-C and SIGTERM as a flag that also stops the C batch in flight between runs.

    The batch sees the stop at once: the helper gets a stop byte, and an in-process batch
    polls the pipe that Python's own C-level handler writes to (signal.set_wakeup_fd).
    Finished runs are kept; the run cut short is not recorded.
    """

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self):
        self.hit = False
        self.signum = signal.SIGINT
        self._old: dict = {}
        self._old_wakeup = None

    def __enter__(self):
        spawn.clear_stop()
        if threading.current_thread() is threading.main_thread():
            self._old = {s: signal.signal(s, self._handler) for s in self.SIGNALS}
            self._old_wakeup = signal.set_wakeup_fd(
                spawn.stop_wakeup_fd(), warn_on_full_buffer=False
            )
        return self

    def _handler(self, signum, frame):
        self.hit = True
        self.signum = signum
        spawn.request_stop()

    def stopped(self) -> Stopped:
        """The exception that ends the sweep, naming the signal that stopped it."""
        return Stopped(self.signum)

    def __exit__(self, exc_type, exc, tb):
        if self._old_wakeup is not None:
            signal.set_wakeup_fd(self._old_wakeup)
        for s, old in self._old.items():
            signal.signal(s, old)
        spawn.clear_stop()
        if self.hit and exc_type is not None and issubclass(exc_type, KeyboardInterrupt):
            raise self.stopped() from None


def check_timeout(seconds: float) -> None:
    """Refuse a timeout the C core cannot honour (nan, inf, 0, or beyond its int64 ns)."""
    lo, hi = TIMEOUT_S
    if not lo <= seconds <= hi:  # also refuses nan
        raise PerflabError(f"--timeout must be {lo:g} to {hi:g} seconds, not {seconds}")


def warn_stderr(message: str) -> None:
    """Warnings go to stderr, one line each, so --json output stays clean."""
    print(f"perflab: warning: {message}", file=sys.stderr)


@contextlib.contextmanager
def away_from(cpus: tuple[int, ...]):
    """Keep perflab's own threads off the child's CPUs while it measures, when others exist."""
    before = os.sched_getaffinity(0)
    others = before - set(cpus)
    if cpus and others:
        os.sched_setaffinity(0, others)
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


def rt_refused_once(options, runs, extra, warn):
    """Real-time refused: say so once, record it, and stop asking (Rubini's Listing 2)."""
    refused = runs["rt_errno"][runs["rt_errno"] != 0]
    if not options.rt or refused.size == 0:
        return options
    why = spawn.describe_errno(int(refused[0]))
    warn(f"real-time priority refused: {why}; continuing at normal priority (--no-rt: do not ask)")
    extra["rt_granted"] = False
    extra["rt_refused"] = why
    return replace(options, rt=False)


def default_cpus() -> tuple[int, ...]:
    """The last usable CPU: away from CPU 0, where most interrupts land."""
    return (machine.usable_cpus()[-1],)


def run_expect(key: tuple[str, ...], planned: tuple[np.ndarray, ...], columns) -> Expect:
    """A journal's check for child-run rows: these columns, each planned key once, sane values."""
    frame = pd.DataFrame(dict(zip(key, planned, strict=True)))
    return Expect(
        columns=tuple(columns),
        planned=frame,
        unique=tuple(key),
        ranges=RUN_RANGES,
        categories={"status": tuple(spawn.STATUS_NAMES)},
    )
