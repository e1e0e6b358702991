"""A spawner that starts no process (running/spawn.py's Spawner): made-up, deterministic run
records for the logic that needs records and not timings (journal, resume, lanes, interrupt,
planning). The real spawners, the probe and the statistics' promises are tested on real runs
(test_spawn.py, test_columns.py, test_stop.py, ...), and every verb end to end.

    with spawn.chosen(FakeSpawner()) as fake:
        df = env_size.sweep(...)  # no child started; fake.batches holds what was asked

A stop is what a signal makes of it: `signal_after=(n, SIGINT)` raises the signal in this
process right after the n-th run made up for a sweep's pipeline (its recorded runs), and
perflab's own handler (running/interrupt.py) stops the batch there, as it stops a real one
between two runs.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

import perflab
from perflab.core import bindings
from perflab.core.constants import ffi, lib
from perflab.running import spawn

HEADER = ffi.sizeof("struct perflab_batch")
TSC_GHZ = 2.5  # ticks per ns of the made-up runs: outer_ticks and wall_ns agree


@dataclass(frozen=True)
class Batch:
    """A packed request read back (csrc/perflab.h: struct perflab_batch and what follows)."""

    flags: int
    cpus: tuple[int, ...]
    dirs: tuple[str, ...]  # each program's directory (SPAWN_DIRS), else ()
    programs: tuple[tuple[str, ...], ...]  # argv, argv[0] the resolved path
    prog: np.ndarray
    sizes: np.ndarray
    env: tuple[str, ...]
    var: str
    iterations: int
    timeout_ns: int

    @property
    def parallel(self) -> bool:
        return bool(self.flags & bindings.SPAWN_PARALLEL)


def unpack(request: bytes) -> Batch:
    """spawn.request()'s bytes as the batch they ask for."""
    h = ffi.cast("struct perflab_batch *", ffi.from_buffer(request))
    assert h.magic == lib.PERFLAB_BATCH_MAGIC and h.version == lib.PERFLAB_BATCH_VERSION
    at = HEADER
    cpus = np.frombuffer(request, np.int32, h.ncpus, at)
    at += 4 * h.ncpus
    argc = np.frombuffer(request, np.int32, h.nprogs, at)
    at += 4 * h.nprogs
    prog = np.frombuffer(request, np.int32, h.nruns, at).copy()
    at += 4 * h.nruns
    sizes = np.frombuffer(request, np.int64, h.nruns, at).copy()
    at += 8 * h.nruns
    strings = iter(os.fsdecode(s) for s in request[at : at + h.strings_len].split(b"\0")[:-1])
    with_dirs = bool(h.flags & bindings.SPAWN_DIRS)
    dirs, programs = [], []
    for n in argc:
        if with_dirs:
            dirs.append(next(strings))
        path = next(strings)
        programs.append((path, *[next(strings) for _ in range(n)][1:]))
    env = tuple(next(strings) for _ in range(h.nenv))
    return Batch(flags=int(h.flags), cpus=tuple(int(c) for c in cpus), dirs=tuple(dirs),
                 programs=tuple(programs), prog=prog, sizes=sizes, env=env, var=next(strings),
                 iterations=int(h.iterations), timeout_ns=int(h.timeout_ns))  # fmt: skip


def stack_twin(path: str) -> bool:
    """Whether a program is a built-in loop's stack twin (lab/env_size/windows.twin)."""
    return "_twin-" in os.path.basename(path)


Outcome = Callable[[tuple[str, ...], int], dict]  # (argv, env size) -> fields to set


class FakeSpawner:
    """Run records made up at once, one per planned run: status ok with a probe record, the
    program's ticks (ticks(argv), default 10 000) plus a small seeded spread, rusage that adds
    up (CPU time within the wall time, outer ticks around the probe's), the lane's CPU in a
    parallel batch. outcome(argv, env size) may set other fields for some runs (an exit code,
    a crash). Batches of programs that `real(path)` names run for real (spawn.direct()): by
    default the built-in loops' stack twins, whose report on stdout a sweep reads."""

    method = "made-up records (tests/fakespawner.py): no process started"
    floor_kb: int | None = None

    def __init__(
        self,
        ticks: Callable[[tuple[str, ...]], int] = lambda argv: 10_000,
        *,
        outcome: Outcome | None = None,
        real: Callable[[str], bool] = lambda path: stack_twin(path),
        signal_after: tuple[int, int] | None = None,
        seed: int = 0,
    ) -> None:
        self.ticks, self.outcome, self.real = ticks, outcome, real
        self.signal_after = signal_after
        self.rng = np.random.default_rng(seed)
        self.swept = 0  # runs made up for sweeps' pipelines so far
        self.batches: list[Batch] = []  # each made-up batch, as asked, in order
        self.stopping = False

    def batch(self, request: bytes, nruns: int, stdio: list[int]) -> np.ndarray:
        return self._batch(request, nruns, stdio, swept=False)

    def _batch(self, request: bytes, nruns: int, stdio: list[int], swept: bool) -> np.ndarray:
        """The records of one batch; `swept`: a sweep's pipeline asked (signal_after counts
        those runs alone, not a preflight's or a check's)."""
        b = unpack(request)
        assert b.prog.size == nruns and len(stdio) == 3
        if any(self.real(argv[0]) for argv in b.programs):
            return spawn.direct().batch(request, nruns, stdio)
        self.batches.append(b)
        out = np.zeros(nruns, dtype=spawn.RUN_DTYPE)
        for i in range(nruns):
            if self.stopping:
                return out[:i]
            self._make(out[i : i + 1], b, i)
            self.swept += swept
            if swept and self.signal_after is not None and self.swept == self.signal_after[0]:
                signal.raise_signal(self.signal_after[1])  # perflab's handler runs here
        return out

    def _make(self, run: np.ndarray, b: Batch, i: int) -> None:
        argv = b.programs[int(b.prog[i])]
        ticks = self.ticks(argv) + int(self.rng.integers(0, 100))
        wall = int(ticks / TSC_GHZ) + 30_000
        k = max(b.iterations, 1)
        run["env_size"] = b.sizes[i]
        run["prog"] = b.prog[i]
        run["cpu"] = b.cpus[i % len(b.cpus)] if b.parallel and b.cpus else 0
        run["status"] = bindings.RUN_OK
        run["flags"] = bindings.RUN_HAS_PROBE
        run["probe_ticks"] = ticks * k
        run["iterations"] = k
        run["iteration_ticks"][0, :k] = ticks
        run["outer_ticks"] = int(wall * TSC_GHZ)
        run["wall_ns"] = wall
        run["utime_ns"] = wall * 6 // 10
        run["stime_ns"] = wall * 3 // 10
        run["maxrss_kb"] = 1_024
        run["minflt"] = 100
        run["nvcsw"] = 1
        if b.flags & bindings.SPAWN_RUNQ:
            run["runq_source"] = 2 if b.flags & bindings.SPAWN_RUNQ_PROC else 1
            run["runq_ns"] = 1_000
            run["runq_cpu_ns"] = run["utime_ns"] + run["stime_ns"]
        for name, value in (self.outcome(argv, int(b.sizes[i])) if self.outcome else {}).items():
            run[name] = value

    @contextlib.contextmanager
    def pipeline(self) -> Iterator[spawn.Pipeline]:
        """Requests kept as sent; each made up when collected, as the helper runs them in turn."""
        queued: deque[tuple[bytes, int, list[int]]] = deque()
        yield spawn.Pipeline(lambda *r: queued.append(r),
                             lambda: self._batch(*queued.popleft(), swept=True))  # fmt: skip

    def request_stop(self) -> None:
        self.stopping = True

    def clear_stop(self) -> None:
        self.stopping = False


def exited(code: int) -> dict:
    """outcome fields of a run that exited with `code` and sent no probe record."""
    return {"status": bindings.RUN_EXIT, "exit_code": code, "flags": 0, "probe_ticks": 0,
            "iterations": 0}  # fmt: skip


# The CLI in a process of its own, its children made up (FakeSpawner(signal_after=...)) and
# each batch (of chunk_runs, if given) journaled as it ends: the chunks a kill -9 or a signal
# finds on the disk follow the runs, not the clock.
_CLI = """
import json, runpy, sys
sys.path.insert(0, sys.argv[1])
from fakespawner import FakeSpawner
from perflab.lab.compare import measure as compare
from perflab.lab.env_size import measure as env_size
from perflab.lab.link_order import measure as link_order
from perflab.running import spawn
after, chunk_runs = json.loads(sys.argv[2])
for verb in (compare, env_size, link_order):
    verb.FLUSH_S = 0
    verb.CHUNK_RUNS = chunk_runs or verb.CHUNK_RUNS
with spawn.chosen(FakeSpawner(signal_after=tuple(after) if after else None)):
    sys.argv = ["perflab", *sys.argv[3:]]
    runpy.run_module("perflab", run_name="__main__", alter_sys=True)
"""
_SRC = os.path.dirname(os.path.dirname(os.path.abspath(perflab.__file__)))


def cli(
    *args: str, signal_after: tuple[int, int] | None = None, chunk_runs: int | None = None
) -> list[str]:
    """The argv of `perflab ARGS` in a process of its own whose children are made up."""
    here = os.path.dirname(os.path.abspath(__file__))
    return [sys.executable, "-c", _CLI, here, json.dumps([signal_after, chunk_runs]), *args]


def cli_env() -> dict[str, str]:
    """The environment cli()'s process runs in: this perflab importable, as in a checkout."""
    return {**os.environ, "PYTHONPATH": _SRC}
