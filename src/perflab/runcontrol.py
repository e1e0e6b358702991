"""Run controls shared by the experiments that run child processes.

Ctrl-C as a flag checked between chunks, perflab kept off the measured CPUs, real-time
refusal warned once (Rubini's Listing 2), the default CPU, and what a journaled run row is.
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
from perflab.errors import PerflabError
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
    """Turns Ctrl-C into a flag checked between chunks, so the chunk in flight is kept."""

    def __init__(self):
        self.hit = False
        self._old = None

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            self._old = signal.signal(signal.SIGINT, self._handler)
        return self

    def _handler(self, signum, frame):
        self.hit = True

    def __exit__(self, *exc):
        if self._old is not None:
            signal.signal(signal.SIGINT, self._old)


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
