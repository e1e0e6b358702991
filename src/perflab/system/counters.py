"""perf_event counters: which events count here, and counting a region, a callable or a command.

An event that cannot be opened is reported with its errno ("not supported here"), never as a
zero: in most virtual machines the hardware events (cycles, instructions) do not exist while the
software ones (task-clock, page faults) do.
"""

from __future__ import annotations

import errno
import os
import signal
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from perflab.core import bindings
from perflab.core.lazy import pd
from perflab.errors import PerflabError, warn
from perflab.system import pmu, supervisor

# Event name -> (index in the C counter set, kind, column name with its unit).
_KINDS = {
    "cycles": ("hardware", "cycles"),
    "instructions": ("hardware", "instructions"),
    "ref-cycles": ("hardware", "ref_cycles"),
    "task-clock": ("software", "task_clock_ns"),
    "context-switches": ("software", "context_switches"),
    "cpu-migrations": ("software", "cpu_migrations"),
    "page-faults": ("software", "page_faults"),
}
EVENTS: dict[str, tuple[int, str, str]] = {
    name: (bindings.EVENT_INDEX[name], kind, column) for name, (kind, column) in _KINDS.items()
}
COLUMNS = [col for _, _, col in EVENTS.values()]
ALL = bindings.EVENTS_ALL

_WHY = {
    errno.ENOENT: "the PMU has no such event",
    errno.EOPNOTSUPP: "the PMU cannot count this event here",
    errno.ENODEV: "no PMU for this event",
    errno.ENOSYS: "the kernel was built without perf_event",
    errno.EINVAL: "the kernel rejects this event's settings",
    errno.ENODATA: "opened but never scheduled on the PMU (multiplexed out)",
}


def reason(status: int) -> str:
    """One phrase for an event's status: 'counts', or 'not supported here (ERRNO: why)'."""
    if status >= 0:
        return "counts"
    code = -status
    name = bindings.errno_name(code)
    if code in (errno.EACCES, errno.EPERM):
        why = pmu.perf_refusal(code)
    elif code in (errno.ENOENT, errno.ENODEV, errno.EOPNOTSUPP) and not pmu.core_pmu():
        why = pmu.NO_PMU
    else:
        why = _WHY.get(code, os.strerror(code))
    return f"not supported here ({name}: {why})"


def mask(names: Iterable[str] | None = None) -> int:
    """Bit mask of the C counter set for event names (default: all seven)."""
    if names is None:
        return ALL
    bits = 0
    for name in names:
        if name not in EVENTS:
            raise PerflabError(f"unknown event {name!r}; known: {', '.join(EVENTS)}")
        bits |= 1 << EVENTS[name][0]
    return bits


def frame(counts: Sequence[int], bits: int = ALL) -> pd.DataFrame:
    """One row per requested event: its count (NaN when it did not count) and its status."""
    rows = []
    for name, (idx, kind, column) in EVENTS.items():
        if not bits & (1 << idx):
            continue
        value = int(counts[idx])
        rows.append(
            {
                "event": name,
                "kind": kind,
                "column": column,
                "count": float(value) if value >= 0 else np.nan,
                "status": reason(value),
            }
        )
    return pd.DataFrame(rows)


def columns(counts: Sequence[int], bits: int = ALL) -> dict[str, float]:
    """Counts keyed by column name (units in the name), NaN for events that did not count."""
    return {
        column: float(counts[idx]) if counts[idx] >= 0 else np.nan
        for idx, _, column in EVENTS.values()
        if bits & (1 << idx)
    }


class Counters:
    """Count a region: `with Counters() as c: ...; c.frame()`; pid 0 is the calling thread."""

    def __init__(self, events: Iterable[str] | None = None, pid: int = 0, inherit: bool = False):
        self.bits = mask(events)
        self.pid = pid
        self.inherit = inherit
        self._set = bindings.CounterSet()
        self._counts: list[int] = [-errno.ENODATA] * len(EVENTS)

    def __enter__(self) -> Counters:
        if self._set.open(self.pid, -1, self.bits, self.inherit) == -errno.ESRCH:
            raise PerflabError(f"no process {self.pid} to count")
        self._set.enable()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._counts = self._set.stop()

    def frame(self) -> pd.DataFrame:
        """The counts of the region just left, one row per event."""
        return frame(self._counts, self.bits)

    def columns(self) -> dict[str, float]:
        """The counts as {column: value}, NaN where an event did not count."""
        return columns(self._counts, self.bits)


def count(
    func: Callable[..., Any], *args: Any, events: Iterable[str] | None = None, **kwargs: Any
) -> tuple[Any, pd.DataFrame]:
    """Call func(*args, **kwargs) on this thread under counters: (its result, the counts)."""
    with Counters(events) as c:
        value = func(*args, **kwargs)
    return value, c.frame()


def exit_status(returncode: int) -> int:
    """The exit status a shell and perf stat give: the code, or 128+N when signal N killed it."""
    return 128 - returncode if returncode < 0 else returncode


def count_command(
    argv: list[str],
    events: Iterable[str] | None = None,
    stdout: int | None = None,
    stderr: int | None = None,
    timeout: float | None = None,
) -> pd.DataFrame:
    """Count a command and every thread and child it starts (inherited counters, read at exit).

    The command runs under a supervisor (system/supervisor.py), on whose process the counters
    are opened before it starts it: they count the command and what it starts, and the
    supervisor's own few instructions between, never perflab's; in perflab's process group,
    as a shell would run it, and it ends with perflab however perflab ends.
    stdout, stderr: fds for the command's streams (None: perflab's own); timeout: seconds
    after which it is killed (None: none), its counts then up to its end.
    attrs: returncode (as a shell reports it), elapsed_ns, cpu_ns (its and its waited
    children's user+system time, from rusage), cpus_utilised = cpu_ns / elapsed_ns and
    timed_out."""
    if not argv:
        raise PerflabError("no command to count")
    fds = (0, 1 if stdout is None else stdout, 2 if stderr is None else stderr)
    with supervisor.Supervisor() as under:
        with Counters(events, pid=under.pid, inherit=True) as c:
            t0 = time.monotonic_ns()
            try:
                child = under.start(argv, fds=fds, group=os.getpgrp())
            except FileNotFoundError:
                raise PerflabError(f"{argv[0]}: command not found") from None
            except PermissionError:
                raise PerflabError(f"{argv[0]}: not an executable file") from None
            timed_out = not child.ended(timeout)
            if timed_out:  # itself only: its group is perflab's; what it started, at close
                child.kill()
            child.ended()  # its counts are in at its exit: the reap is not counted
            elapsed = time.monotonic_ns() - t0
        status, usage = child.outcome()
    if child.resumed:  # nothing resumes a stopped command here but perflab (Child.ended)
        warn(
            f"{argv[0]} was found stopped {child.resumed} time(s) (SIGSTOP, by itself or "
            "another process) and resumed by perflab: its elapsed time holds the stops"
        )
    if timed_out:
        warn(f"{argv[0]} ran past --timeout {timeout:g} s and was killed: its counts end there")
    rc = os.waitstatus_to_exitcode(status)
    cpu = round((usage.ru_utime + usage.ru_stime) * 1e9)
    out = c.frame()
    out.attrs.update(
        returncode=exit_status(rc),
        signal=signal.Signals(-rc).name if rc < 0 else None,
        elapsed_ns=elapsed,
        cpu_ns=cpu,
        cpus_utilised=cpu / elapsed if elapsed else float("nan"),
        timed_out=timed_out,
    )
    return out


def available() -> pd.DataFrame:
    """Which events count on this machine and why the others do not, with a sample count."""
    with Counters() as c:
        sum(i * i for i in range(100_000))
        bytearray(4 << 20)  # fresh pages: page faults to count
    out = c.frame()
    out["supported"] = out["status"] == "counts"
    return out[["event", "kind", "supported", "count", "status"]]
