"""counters.c: perf_event counter sets of the core's own threads, and of exec'd children."""

from collections.abc import Sequence

import numpy as np

from perflab.core.bindings.convert import check, ptr
from perflab.core.constants import ffi, lib


def perf_probe(kind: int = 0, config: int = 0) -> int:
    """0 when perf_event can count (type, config) here, else -errno."""
    return int(lib.perflab_perf_probe(kind, config))


EVENTS_ALL: int = lib.PERFLAB_EV_ALL


class CounterSet:
    """One perf_event counter set; counts are a count each, or -errno for an event that did not
    count."""

    def __init__(self) -> None:
        self._set = ffi.new("struct perflab_counter_set *")
        self._counts = ffi.new("int64_t[7]")

    def open(self, pid: int, cpu: int, bits: int, inherit: bool) -> int:
        """Events that count, or -errno when none does."""
        return int(lib.perflab_counters_open(self._set, pid, cpu, bits, int(inherit)))

    def enable(self) -> None:
        lib.perflab_counters_enable(self._set)

    def stop(self) -> list[int]:
        """Disable, read and close: the seven counts (or -errno each)."""
        lib.perflab_counters_disable(self._set)
        lib.perflab_counters_read(self._set, self._counts)
        lib.perflab_counters_close(self._set)
        return [int(c) for c in self._counts]


PERF_TYPE_HARDWARE: int = lib.PERFLAB_PERF_TYPE_HARDWARE
PERF_TYPE_RAW: int = lib.PERFLAB_PERF_TYPE_RAW


class ExecCounters:
    """Events that count the children this thread starts while run() runs (perf stat's way)."""

    def __init__(self, events: Sequence[tuple[int, int]]):
        self.n = len(events)
        self._fds = ffi.new("int32_t[]", max(self.n, 1))
        self._counts = ffi.new("int64_t[]", max(self.n, 1))
        types = ffi.new("uint32_t[]", [t for t, _ in events] or [0])
        configs = ffi.new("uint64_t[]", [c for _, c in events] or [0])
        lib.perflab_exec_counters_open(self.n, types, configs, self._fds)

    def status(self) -> list[int]:
        """0 for each event that opened, -errno for one that cannot count here."""
        return [min(int(self._fds[i]), 0) for i in range(self.n)]

    def read(self) -> list[int]:
        """The counts so far of the exited children, -errno where an event does not count."""
        check(lib.perflab_exec_counters_read(self.n, self._fds, self._counts), "read counters")
        return [int(self._counts[i]) for i in range(self.n)]

    def run(self, request: bytes, stdio: Sequence[int], out: np.ndarray) -> tuple[int, list[int]]:
        """A packed batch run in this thread with the events on: (runs done, counts so far)."""
        done = ffi.new("int64_t *")
        rc = lib.perflab_exec_counters_run(
            self.n, self._fds, request, len(request), list(stdio), -1,
            ptr(out, "struct perflab_run[]"), done, self._counts,
        )  # fmt: skip
        check(rc, "counted spawn batch")
        return int(done[0]), [int(self._counts[i]) for i in range(self.n)]

    def close(self) -> None:
        lib.perflab_exec_counters_close(self.n, self._fds)
