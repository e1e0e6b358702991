"""perf_event counters: which events count here, and counting a region, a callable or a command.

An event that cannot be opened is reported with its errno ("not supported here"), never as a
zero: in most virtual machines the hardware events (cycles, instructions) do not exist while the
software ones (task-clock, page faults) do.
"""

import errno
import os
import subprocess
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
import pandas as pd

from perflab import machine
from perflab._native import ffi, lib
from perflab.errors import PerflabError

# Event name -> (index in the C counter set, kind, column name with its unit).
EVENTS = {
    "cycles": (lib.PERFLAB_EV_CYCLES, "hardware", "cycles"),
    "instructions": (lib.PERFLAB_EV_INSTRUCTIONS, "hardware", "instructions"),
    "ref-cycles": (lib.PERFLAB_EV_REF_CYCLES, "hardware", "ref_cycles"),
    "task-clock": (lib.PERFLAB_EV_TASK_CLOCK, "software", "task_clock_ns"),
    "context-switches": (lib.PERFLAB_EV_CONTEXT_SWITCHES, "software", "context_switches"),
    "cpu-migrations": (lib.PERFLAB_EV_CPU_MIGRATIONS, "software", "cpu_migrations"),
    "page-faults": (lib.PERFLAB_EV_PAGE_FAULTS, "software", "page_faults"),
}
COLUMNS = [col for _, _, col in EVENTS.values()]
ALL = lib.PERFLAB_EV_ALL

_WHY = {
    errno.ENOENT: "the CPU or hypervisor exposes no such event (no PMU passed to this VM)",
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
    name = errno.errorcode.get(code, str(code))
    if code in (errno.EACCES, errno.EPERM):
        why = (
            f"perf_event_paranoid={machine.perf_paranoid()} forbids it; run as root or lower "
            "/proc/sys/kernel/perf_event_paranoid"
        )
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


def frame(counts, bits: int = ALL) -> pd.DataFrame:
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


def columns(counts, bits: int = ALL) -> dict[str, float]:
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
        self._set = ffi.new("struct perflab_counter_set *")
        self._counts = ffi.new("int64_t[7]")

    def __enter__(self) -> "Counters":
        rc = lib.perflab_counters_open(self._set, self.pid, -1, self.bits, int(self.inherit))
        if rc == -errno.ESRCH:
            raise PerflabError(f"no process {self.pid} to count")
        lib.perflab_counters_enable(self._set)
        return self

    def __exit__(self, *exc: Any) -> None:
        lib.perflab_counters_disable(self._set)
        lib.perflab_counters_read(self._set, self._counts)
        lib.perflab_counters_close(self._set)

    def frame(self) -> pd.DataFrame:
        """The counts of the region just left, one row per event."""
        return frame(self._counts, self.bits)

    def columns(self) -> dict[str, float]:
        """The counts as {column: value}, NaN where an event did not count."""
        return columns(self._counts, self.bits)


def count(func: Callable[..., Any], *args, events=None, **kwargs) -> tuple[Any, pd.DataFrame]:
    """Call func(*args, **kwargs) on this thread under counters: (its result, the counts)."""
    with Counters(events) as c:
        value = func(*args, **kwargs)
    return value, c.frame()


def count_command(argv: list[str], events=None) -> pd.DataFrame:
    """Count a command and every thread and child it starts (inherited counters, read at exit)."""
    if not argv:
        raise PerflabError("no command to count")
    with Counters(events, inherit=True) as c:
        try:
            rc = subprocess.run(argv, check=False).returncode  # argv list: no shell
        except FileNotFoundError:
            raise PerflabError(f"{argv[0]}: command not found") from None
    out = c.frame()
    out.attrs["returncode"] = rc
    return out


def available() -> pd.DataFrame:
    """Which events count on this machine and why the others do not, with a sample count."""
    with Counters() as c:
        sum(i * i for i in range(100_000))
        bytearray(4 << 20)  # fresh pages: page faults to count
    out = c.frame()
    out["supported"] = out["status"] == "counts"
    return out[["event", "kind", "supported", "count", "status"]]
