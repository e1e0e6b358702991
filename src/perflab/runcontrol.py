"""Run controls shared by the experiments that run child processes.

Ctrl-C as a flag checked between chunks, perflab kept off the measured CPUs, real-time
refusal warned once (Rubini's Listing 2), and the default CPU.
"""

import contextlib
import os
import signal
import sys
import threading
from dataclasses import replace

from perflab import machine, spawn


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
