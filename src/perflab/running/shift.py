"""The shift engine: a built-in loop run at every planned point by one child per CPU, with the
loop's frame placed where an exec'd child's would be, instead of one exec per run.

With ASLR off the only thing an environment size changes for a built-in loop is where its
stack starts, and so where main's frame lands (lab/env_size/windows.py computes it for every
size). The loop's own object, linked with a driver (workloads/stack_shift.c) that takes no
address the loop's binary uses, is exec'd once per CPU with ASLR off; for each point the driver
moves the stack pointer so that main's frame is exactly the frame an exec'd child of that size
has, puts the loop's statics back to their starting values, calls main, and returns what main's
probe reported, the call's ticks, wall time and rusage. Nine tenths of an exec'd run is the exec:
here a point costs the loop and a few system calls.

The rows are the exec engine's columns: ticks from the same probe record, outer_ticks and
wall_ns around the call (stack switch included), utime/stime, faults and context switches over
the call (getrusage before and after); maxrss_kb is empty (<NA>): one process ran every point,
its peak is not a point's. Runs go in the plan's order, in chunks journaled as the exec
engine's are, with its stop, resume and --jobs (one child per lane, the reference slice one
child at a time), every child under perflab's supervisor.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import re
import socket
import struct
import tempfile
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from perflab import errors
from perflab.core import bindings
from perflab.core.lazy import pd
from perflab.errors import PerflabError
from perflab.plan.controls import Controls
from perflab.running import childruns, lanes, spawn
from perflab.running.interrupt import Interrupt
from perflab.store.identity import Executes
from perflab.store.recording import FLUSH_S, Recorder, Recording, Warn
from perflab.system import binlayout, compiler, supervisor

# The driver's section: below the loop's binary, so that no address of the binary moves, nor the
# heap, which starts after the highest segment (the TLS block lives there).
ADDRESS = 0x200000
DRIVER = compiler.WORKLOADS / "stack_shift.c"
# No unwind tables, no stack protector, no builtins, no PIC: nothing of the driver's but its
# section (any other would move the binary's own), and no call into the C library.
DRIVER_CFLAGS = ("-O1", "-fno-pie", "-fno-asynchronous-unwind-tables", "-fno-stack-protector",
                 "-fno-builtin")  # fmt: skip
LINK = ("-Wl,--wrap=main", f"-Wl,--section-start=perflab_shift={ADDRESS:#x}")

# The protocol of stack_shift.c, on the child's fd 3.
MAGIC = 0x54464853
VERSION = 1
SETUP_MLOCK = 1
MAX_RANGES = 16
MAX_SAVED = 4096
SETUP = struct.Struct(f"<4I{2 * MAX_RANGES}Q")
HELLO = struct.Struct("<4IQ")
BATCH = struct.Struct("<2I")
PROBE_OK, PROBE_BAD = 1, 2
RECORD_COUNTERS, RECORD_MLOCKED = 1, 2
RECORD = np.dtype([
    ("magic", "<u4"), ("exit_code", "<i4"), ("probe", "<i4"), ("probe_flags", "<u4"),
    ("probe_ticks", "<u8"), ("cycles", "<u8"), ("instructions", "<u8"), ("outer_ticks", "<u8"),
    ("wall_ns", "<i8"), ("utime_ns", "<i8"), ("stime_ns", "<i8"), ("minflt", "<i8"),
    ("majflt", "<i8"), ("nvcsw", "<i8"), ("nivcsw", "<i8"), ("frame", "<u8"),
])  # fmt: skip

CHUNK_POINTS = 4096  # points per journaled chunk: about 0.3 s of the built-in loop
AHEAD = 2  # chunks queued in a lone child: it starts the next the moment one ends
# The child's records are read this often, never waited on: a reader blocked on the socket
# would be woken by every record, and each wake-up costs the child's CPU an interrupt.
POLL_S = 0.005
SEND_BUFFER = 8 << 20  # records wait in the socket while perflab journals earlier ones
MAXRSS_METHOD = (
    "not measured: one child runs every point of the shift engine, its peak is not a point's"
)
USAGE = "over the call (getrusage before and after it in the child)"


def build(source: str | os.PathLike, opt: str, flags: Sequence[str] = ()) -> compiler.Workload:
    """A built-in loop's source linked with the driver: the loop's object is compiled from the
    same bytes with the same flags (its layout's among them) as its exec'd binary's (the file
    is named apart)."""
    source = Path(source)
    driver = compiler.compile_object(DRIVER, DRIVER_CFLAGS)
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / f"{source.stem}_shift.c"
        copy.write_bytes(source.read_bytes())
        return compiler.build(copy, opt, extra=(*flags, str(driver.path), *LINK))


def _symbols(path: str | os.PathLike) -> dict[str, set[int]]:
    out: dict[str, set[int]] = {}
    for f in binlayout.nm_fields(path, "--defined-only"):
        if len(f) == 3:
            out.setdefault(f[2], set()).add(int(f[0], 16))
    return out


_INSN = re.compile(r"^\s*[0-9a-f]+:\t")


def _code(path: str | os.PathLike, start: int, end: int) -> list[str]:
    """objdump's lines of [start, end) of a binary: addresses, bytes and instructions."""
    code = binlayout.disassembly(path, start, end, raw=True)
    return [line for line in code.splitlines() if _INSN.match(line)]


def check_layout(exec_binary: str | os.PathLike, shift_binary: str | os.PathLike) -> None:
    """Refuse a shift binary in which the loop's binary does not keep its every address from its
    first code on, or main its bytes; only the ELF header's page may differ (one more segment)."""
    ours, theirs = _symbols(exec_binary), _symbols(shift_binary)
    code = [a for name, at in ours.items() for a in at if name in ("_init", "main")]
    first = min(code) if code else 0
    moved = sorted(n for n, at in ours.items() if min(at) >= first and theirs.get(n) != at)
    if moved:
        shown = ", ".join(moved[:3]) + (f" and {len(moved) - 3} more" if len(moved) > 3 else "")
        raise PerflabError(
            f"--engine shift: linking the driver moved {shown} of {Path(exec_binary).name}, so "
            "the loop would not run at its exec'd addresses; use --engine exec"
        )
    size = {f[3]: int(f[1], 16) for f in binlayout.nm_fields(exec_binary, "-S", "--defined-only")
            if len(f) == 4 and f[3] == "main"}  # fmt: skip
    main = min(ours["main"])
    end = main + size.get("main", 0)
    if _code(exec_binary, main, end) != _code(shift_binary, main, end):
        raise PerflabError(
            f"--engine shift: main's code differs from {Path(exec_binary).name}'s; use "
            "--engine exec"
        )


@dataclass(frozen=True)
class ShiftedFrames:
    """Where every planned run's loop frame goes, and what places it: the shift binary, the
    frame of each planned run (run order), and the loop's statics (address, bytes) put back to
    their starting values before each point."""

    binary: str
    frames: np.ndarray
    statics: tuple[tuple[int, int], ...]


class ShiftChild:
    """One shift child on its CPUs under a supervisor: submit frames, collect their records."""

    def __init__(self, sup: supervisor.Supervisor, placement: ShiftedFrames, cpus: Sequence[int],
                 mlock: bool, timeout: float):  # fmt: skip
        if len(placement.statics) > MAX_RANGES or sum(n for _, n in placement.statics) > MAX_SAVED:
            raise PerflabError("--engine shift: the loop has more statics than the driver keeps")
        self.cpus, self.timeout = tuple(cpus), timeout
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        with theirs:
            theirs.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SEND_BUFFER)
            try:
                self.proc = sup.start([placement.binary], env={}, cpus=self.cpus, no_aslr=True,
                                      fds=(None, None, None, theirs.fileno()))  # fmt: skip
            except OSError as exc:
                ours.close()
                raise PerflabError(f"cannot run {placement.binary}: {exc.strerror}") from None
        self.sock = ours
        ranges = [v for r in placement.statics for v in r]
        ranges += [0] * (2 * MAX_RANGES - len(ranges))
        flags = SETUP_MLOCK if mlock else 0
        self.sock.sendall(SETUP.pack(MAGIC, VERSION, flags, len(placement.statics), *ranges))
        magic, version, record_bytes, error, entry = HELLO.unpack(self._read(HELLO.size))
        if magic != MAGIC or version != VERSION or record_bytes != RECORD.itemsize or error:
            raise PerflabError(
                f"--engine shift: {placement.binary} answered another protocol than perflab's "
                "(a stale build? remove it from the cache)"
            )
        self.entry_frame = entry
        self.queued: deque[int] = deque()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def submit(self, frames: np.ndarray) -> None:
        """Queue points: the child starts them when those before are done."""
        frames = np.ascontiguousarray(frames, dtype="<u8")
        self.sock.sendall(BATCH.pack(MAGIC, frames.size) + frames.tobytes())
        self.queued.append(frames.size)

    def collect(self) -> np.ndarray:
        """The records of the oldest batch queued, read as they come, polled: a child that
        gives none for `timeout` seconds is killed and the sweep stops (its rows are kept)."""
        n = self.queued.popleft()
        return np.frombuffer(self._read(n * RECORD.itemsize), dtype=RECORD)

    def _read(self, size: int) -> bytes:
        buf = bytearray(size)
        view, got, last = memoryview(buf), 0, time.monotonic()
        while got < size:
            try:
                k = self.sock.recv_into(view[got:], size - got, socket.MSG_DONTWAIT)
            except BlockingIOError:
                k = -1
            if k == 0:
                raise PerflabError(f"--engine shift: its child ended unexpectedly ({self._end()})")
            if k > 0:
                got, last = got + k, time.monotonic()
            elif time.monotonic() - last > self.timeout:
                self.proc.kill()
                raise PerflabError(
                    f"--engine shift: its child gave no result for {self.timeout:g} s (--timeout) "
                    f"on CPU {','.join(map(str, self.cpus))}: killed"
                )
            else:
                time.sleep(POLL_S)
        return bytes(buf)

    def _end(self) -> str:
        code = self.proc.wait(1.0)
        if code is None:
            return "still running"
        return f"signal {-code}" if code < 0 else f"exit {code}"

    def close(self) -> None:
        """Its socket closed: the child sees the end and exits (its supervisor reaps it)."""
        self.sock.close()


def records(got: np.ndarray, sizes: np.ndarray, cpu: int = 0, rt_errno: int = 0) -> np.ndarray:
    """The children's records as the exec engine's run records (spawn.RUN_DTYPE): status and
    flags as the spawner sets them from the probe's record and main's return value."""
    out = np.zeros(len(got), dtype=spawn.RUN_DTYPE)
    out["env_size"] = sizes
    out["cpu"] = cpu
    ok = got["probe"] == PROBE_OK
    flags = np.where(ok, bindings.RUN_HAS_PROBE, 0)
    counters = ok & ((got["probe_flags"] & RECORD_COUNTERS) != 0)
    flags |= np.where(counters, bindings.RUN_HAS_COUNTERS, 0)
    flags |= np.where((got["probe_flags"] & RECORD_MLOCKED) != 0, bindings.RUN_MLOCKED, 0)
    out["flags"] = flags
    failed = [got["exit_code"] != 0, got["probe"] == PROBE_BAD]
    out["status"] = np.select(failed, [bindings.RUN_EXIT, bindings.RUN_BAD_PROBE], bindings.RUN_OK)
    out["rt_errno"] = rt_errno
    for name in ("exit_code", "probe_ticks", "cycles", "instructions", "outer_ticks", "wall_ns",
                 "utime_ns", "stime_ns", "minflt", "majflt", "nvcsw", "nivcsw"):  # fmt: skip
        out[name] = got[name]
    out["maxrss_kb"] = -1
    return out


def check_placed(got: np.ndarray, frames: np.ndarray) -> None:
    """Refuse records whose main did not set its frame where the driver placed it."""
    bad = np.flatnonzero(got["frame"] != np.asarray(frames, dtype=np.uint64))
    if bad.size:
        raise PerflabError(
            f"--engine shift: main's frame was not at {int(frames[bad[0]]):#x}, where the "
            "child placed it (its prologue saved no frame pointer there); use --engine exec"
        )


def _set_rt(child: ShiftChild) -> int:
    """SCHED_FIFO 1 for the child, as the exec engine asks for each run: 0 or the errno.

    No RLIMIT_RTTIME: it counts the time between two blocking calls, a whole queue of points;
    a child silent for --timeout is ended by perflab instead."""
    try:
        os.sched_setscheduler(child.pid, os.SCHED_FIFO, os.sched_param(1))
    except OSError as exc:
        return exc.errno or 0
    return 0


@contextlib.contextmanager
def started(placement: ShiftedFrames, cpus: Sequence[int], timeout: float = 10.0,
            mlock: bool = False, rt: bool = False) -> Iterator[ShiftChild]:  # fmt: skip
    """One shift child for checks before a sweep, under its own supervisor, ended after."""
    with supervisor.Supervisor() as sup:
        child = ShiftChild(sup, placement, cpus, mlock=mlock, timeout=timeout)
        try:
            if rt:
                _set_rt(child)
            yield child
        finally:
            child.close()


def run_frames(child: ShiftChild, frames: np.ndarray) -> np.ndarray:
    """One call of the loop at each of these frames, in order: their records (RECORD)."""
    child.submit(frames)
    return child.collect()


def placed_frames(
    placement: ShiftedFrames, cpus: Sequence[int], timeout: float = 10.0
) -> tuple[int, np.ndarray]:
    """Run the placement's points once in a shift child: where its own main would have been
    exec'd (its entry frame), and each point's frame as main's prologue saw it (0: not there)."""
    with started(placement, cpus, timeout) as child:
        got = run_frames(child, placement.frames)
    return child.entry_frame, got["frame"].astype(np.int64)


Add = Callable[[int, np.ndarray, np.ndarray, bool], None]


def _sequential(child: ShiftChild, chunks: list[np.ndarray], frames: np.ndarray, add: Add,
                stop: Interrupt) -> None:  # fmt: skip
    """One child, chunks queued AHEAD: it starts the next the moment one ends."""
    queued: deque[np.ndarray] = deque()
    following = iter(chunks)
    for at in itertools.islice(following, AHEAD):
        child.submit(frames[at])
        queued.append(at)
    while queued:
        at = queued.popleft()
        got = child.collect()
        stopping = stop.hit  # read once: every chunk queued is collected
        if not stopping and (after := next(following, None)) is not None:
            child.submit(frames[after])
            queued.append(after)
        add(0, at, got, False)
        if stopping:
            while queued:
                add(0, queued[0], child.collect(), False)
                queued.popleft()
            raise KeyboardInterrupt


def _lanes(children: list[ShiftChild], chunks: list[np.ndarray], ref: np.ndarray,
           frames: np.ndarray, add: Add, stop: Interrupt) -> None:  # fmt: skip
    """Per chunk: its parallel points shared among the children, all running at once, then
    each child's share of the reference points alone, one child after the other."""
    n = len(children)
    for at in chunks:
        parallel, alone = at[~ref[at]], at[ref[at]]
        shares = [(k, parallel[k::n]) for k in range(n) if parallel[k::n].size]
        for k, part in shares:
            children[k].submit(frames[part])
        for k, part in shares:
            add(k, part, children[k].collect(), True)
        for k in range(n):
            if (part := alone[k::n]).size:
                children[k].submit(frames[part])
                add(k, part, children[k].collect(), False)
        if stop.hit:
            raise KeyboardInterrupt


def measure(
    runs: childruns.Runs,
    controls: Controls,
    meta: dict,
    placement: ShiftedFrames,
    recording: Recording | None = None,
    *,
    chunk_points: int = CHUNK_POINTS,
    flush_s: float = FLUSH_S,
    on_start: Callable[[int, int], None] | None = None,
    progress: Callable[[int], None] | None = None,
    warn: Warn = errors.warn,
) -> pd.DataFrame:
    """Run every planned point not yet recorded in shift children (one, or one per lane with
    --jobs and its sequential reference slice), journaled as the exec engine's runs are.

    One unrecorded point per child first brings its pages in. A KeyboardInterrupt leaves the
    journal complete up to the last chunk collected and marked incomplete."""
    lanes_run = controls.jobs > 1
    on_start = lanes.saying(controls.cpu_choice, on_start)
    if lanes_run:
        runs = lanes.LaneRuns(**vars(runs))
    ref = lanes.reference_mask(runs.prog.size, lanes.reference_share(controls), controls.seed)
    sizes = np.asarray(runs.sizes, dtype=np.int64)
    executes = Executes([*runs.programs, (placement.binary,)], runs.env, runs.var)
    overhead = spawn.timer_overhead()
    recorder = Recorder(recording or Recording(), runs.key, runs.expect(),
                        controls.params(), meta, warn, flush_s,
                        executes=executes)  # fmt: skip
    todo = childruns.runs_to_do(runs, recorder.done_keys())
    extra: dict[str, Any] = {
        "timer_overhead_ticks": overhead,
        "rt_granted": controls.rt,
        "maxrss_method": MAXRSS_METHOD,
        "maxrss_floor_kb": None,
        "usage_method": USAGE,
        **(lanes.lane_meta(controls) if lanes_run else {}),
    }
    per_child: list[tuple[int, ...]] = (
        [(c,) for c in controls.cpus] if lanes_run else [tuple(controls.cpus)]
    )
    step = max(chunk_points, 1) * len(per_child)
    chunks = [todo[i : i + step] for i in range(0, todo.size, step)]
    complete = False
    with supervisor.Supervisor() as sup, Interrupt() as stop, \
            childruns.away_from(controls.cpus):  # fmt: skip
        children: list[ShiftChild] = []
        try:
            children = [ShiftChild(sup, placement, cpus, controls.mlock, controls.timeout)
                        for cpus in per_child]  # fmt: skip
            rt_errno = [_set_rt(c) if controls.rt else 0 for c in children]
            if refused := [e for e in rt_errno if e]:
                why = spawn.describe_errno(refused[0])
                warn(errors.warning("rt_refused", why=why))
                extra.update(rt_granted=False, rt_refused=why)
            for child in children if todo.size else ():
                child.submit(placement.frames[todo[:1]])
                check_placed(child.collect(), placement.frames[todo[:1]])
            # after the children's start, as the exec engine's after its preflight
            on_start(int(todo.size), runs.prog.size - int(todo.size))

            def add(k: int, at: np.ndarray, got: np.ndarray, parallel: bool) -> None:
                check_placed(got, placement.frames[at])
                batch = records(got, sizes[at], children[k].cpus[0] if lanes_run else 0,
                                rt_errno[k])  # fmt: skip
                rows = (runs.lane_rows(batch, at, overhead, parallel)  # type: ignore[attr-defined]
                        if lanes_run else runs.rows(batch, at, overhead))  # fmt: skip
                recorder.add(rows)
                if progress:
                    progress(len(at))

            if lanes_run:
                _lanes(children, chunks, ref, placement.frames, add, stop)
            else:
                _sequential(children[0], chunks, placement.frames, add, stop)
            complete = True
        finally:
            for child in children:
                child.close()
            df = recorder.finish(complete, extra, annotate=lambda rows: lanes.judged(rows, runs))
    return df
