"""Controlled child runs from Python: typed options over csrc/spawn.c, results as numpy records."""

from __future__ import annotations

import array
import atexit
import contextlib
import functools
import os
import shutil
import socket
import threading
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from perflab.analysis import steady, warmup
from perflab.core import bindings
from perflab.core.constants import RUNQ_MODES
from perflab.core.lazy import pd
from perflab.errors import PerflabError, Stopped
from perflab.plan import controls
from perflab.system import limits, supervisor

STATUS = bindings.RUN_STATUS
STATUS_NAMES = [STATUS[i] for i in range(len(STATUS))]
RUNQ_SOURCES = [bindings.RUNQ_SOURCES[i] for i in range(len(bindings.RUNQ_SOURCES))]
RUNQ_COLUMNS = ("runq_ns", "runq_source", "runq_cover")
RT_POLICIES = {"fifo": 1, "rr": 2}
RUN_DTYPE = bindings.RUN_DTYPE


@dataclass(frozen=True)
class SpawnOptions:
    """How each child runs: ASLR (a user's is checked where the plan is made, Controls.check),
    CPUs, priority, memory locking, timeout, stdio, and whether the run-queue wait of its
    threads is read (runq: auto = taskstats where perflab may, else
    /proc; proc = /proc only; off = not read, the fastest path), whether the
    programs' files are read afresh into the page cache before the batch's first run (settle:
    their physical pages drawn anew, PERFLAB_SPAWN_SETTLE), and how many iterations the probe's
    repeat loop (PERFLAB_PROBE_LOOP) runs in each child, and the directory each program of a
    batch runs in (dirs, one per program, "" for perflab's current one; none: wherever the
    spawner runs), as `git bisect run` runs a commit's benchmark in its tree."""

    aslr: str = "system"
    cpus: tuple[int, ...] = ()
    rt: bool = False
    rt_policy: str = "fifo"
    rt_priority: int = 1
    mlock: bool = False
    timeout: float | None = 10.0
    stdin: int | None = None
    stdout: int | None = None
    stderr: int | None = None
    runq: str = "off"
    settle: bool = False
    iterations: int = 1
    dirs: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        limits.check_open_files()  # every child gets the probe's descriptor
        controls.check_iterations(self.iterations)
        if self.runq not in RUNQ_MODES:
            raise PerflabError(f"runq must be one of {', '.join(RUNQ_MODES)}, not {self.runq!r}")
        if self.rt_policy not in RT_POLICIES:
            raise PerflabError(f"rt_policy must be fifo or rr, not {self.rt_policy!r}")
        if self.timeout is not None:
            controls.check_timeout(self.timeout)

    def flags(self) -> int:
        """PERFLAB_SPAWN_* for these options."""
        return (
            {"off": bindings.SPAWN_NO_ASLR, "on": bindings.SPAWN_ASLR, "system": 0}[self.aslr]
            | (bindings.SPAWN_RT if self.rt else 0)
            | (bindings.SPAWN_MLOCK if self.mlock else 0)
            | (bindings.SPAWN_RUNQ if self.runq != "off" else 0)
            | (bindings.SPAWN_RUNQ_PROC if self.runq == "proc" else 0)
            | (bindings.SPAWN_DIRS if self.dirs else 0)
            | (bindings.SPAWN_SETTLE if self.settle else 0)
        )


def check_program(program: str | os.PathLike) -> str:
    """Resolve a program like a shell would, refusing what cannot be executed, before any run."""
    name = os.fspath(program)
    if os.sep not in name:
        found = shutil.which(name)
        if found is None:
            raise PerflabError(f"{name}: command not found")
        name = found
    p = Path(name)
    if not p.exists():
        raise PerflabError(f"{name}: no such file")
    if p.is_dir():
        raise PerflabError(f"{name}: is a directory, not a program")
    if not os.access(p, os.X_OK) or not p.stat().st_mode & 0o111:
        raise PerflabError(f"{name}: not an executable file")
    _check_interpreter(name)
    return str(p.resolve())


def _check_interpreter(name: str) -> None:
    """A script's #! interpreter exists and runs: else execve's ENOENT would blame the script."""
    try:
        with open(name, "rb") as f:
            line = f.readline(256)
    except OSError:
        return  # execute-only: the kernel reads it, perflab cannot
    words = line[2:].split() if line.startswith(b"#!") else []
    if not words or not words[0].startswith(b"/"):
        return
    interpreter = os.fsdecode(words[0])
    if not os.path.exists(interpreter):
        raise PerflabError(f"{name}: its interpreter {interpreter} (its #! line) does not exist")
    if os.path.isdir(interpreter) or not os.access(interpreter, os.X_OK):
        raise PerflabError(f"{name}: its interpreter {interpreter} (its #! line) cannot run")


def env_list(env: Mapping[str, str] | None) -> list[str]:
    """NAME=value strings, in the mapping's order; None means an empty environment."""
    return [f"{k}={v}" for k, v in (env or {}).items()]


def _pack(
    programs: Sequence[Sequence[str]],
    prog: np.ndarray,
    sizes: np.ndarray,
    var: str,
    base_env: Mapping[str, str] | None,
    options: SpawnOptions,
) -> bytes:
    """A batch laid out as csrc/perflab.h says (struct perflab_batch), for both spawners."""
    env = env_list(base_env)
    if options.dirs and len(options.dirs) != len(programs):
        raise PerflabError(f"{len(options.dirs)} directories for {len(programs)} programs")
    here = os.getcwd() if options.dirs else ""  # "" is perflab's directory, not the helper's
    dirs = [[d or here] for d in options.dirs] if options.dirs else [[] for _ in programs]
    texts = [s for argv, d in zip(programs, dirs, strict=True) for s in [*d, *argv]] + env + [var]
    strings = b"".join(os.fsencode(s) + b"\0" for s in texts)
    header = bindings.BatchHeader(
        flags=options.flags(),
        rt_policy=RT_POLICIES[options.rt_policy],
        rt_priority=options.rt_priority,
        ncpus=len(options.cpus),
        timeout_ns=int(options.timeout * 1e9) if options.timeout else 0,
        nprogs=len(programs),
        nenv=len(env),
        nruns=prog.size,
        strings_len=len(strings),
        iterations=options.iterations,
    )
    return b"".join(
        [
            bindings.batch_header(header),
            np.asarray(options.cpus, dtype=np.int32).tobytes(),
            np.array([len(a) - 1 for a in programs], dtype=np.int32).tobytes(),
            prog.astype(np.int32).tobytes(),
            sizes.astype(np.int64).tobytes(),
            strings,
        ]
    )


@functools.cache
def _stop_pipe() -> tuple[int, int]:
    """The in-process stop: readable means stop; the write end is also Python's wakeup fd."""
    return os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)


# a forked child makes its own: a stop it is asked for (or a signal it gets) is not its parent's
os.register_at_fork(after_in_child=_stop_pipe.cache_clear)


def _stdio(options: SpawnOptions) -> list[int]:
    """The child's stdin/stdout/stderr: the ones asked for, else ours at this moment."""
    return [
        i if fd is None else fd
        for i, fd in enumerate((options.stdin, options.stdout, options.stderr))
    ]


class Spawner(Protocol):
    """What a sweep asks of whatever starts its children (DirectSpawner, HelperSpawner): the
    records of a packed batch (request(), csrc/perflab.h's struct perflab_batch), batches queued
    ahead and answered in order, and a stop between runs that a signal handler may ask for."""

    method: str  # how maxrss_kb was measured (maxrss_meta)
    floor_kb: int | None  # a peak every child's maxrss_kb includes, when known

    def batch(self, request: bytes, nruns: int, stdio: list[int]) -> np.ndarray:
        """The batch's RUN_DTYPE records, fewer than nruns when a stop cut it short."""
        ...

    def pipeline(self) -> contextlib.AbstractContextManager[Pipeline]:
        """Batches submitted ahead of their replies, collected oldest first."""
        ...

    def request_stop(self) -> None:
        """The batch in flight and every queued one end at their next run; outside a
        pipeline, every batch until clear_stop, and a pipeline forgets it as it ends."""
        ...

    def clear_stop(self) -> None:
        """Forget a stop asked for, before a new sweep."""
        ...


class DirectSpawner:
    """Spawns from perflab's own process: a child's maxrss would be perflab's, so it is empty."""

    method = "in-process (maxrss not measurable: a vfork child inherits the parent's peak)"
    floor_kb: int | None = None

    def batch(self, request: bytes, nruns: int, stdio: list[int]) -> np.ndarray:
        out = np.zeros(nruns, dtype=RUN_DTYPE)
        out = out[: bindings.spawn_batch(request, stdio, _stop_pipe()[0], out)]
        out["maxrss_kb"] = -1
        return out

    @contextlib.contextmanager
    def pipeline(self) -> Iterator[Pipeline]:
        """Batches queued ahead, answered in order (here: run one after another on a thread).

        The stop pipe is drained first and last: it is also Python's signal wakeup fd while a
        sweep runs, and a stop ends the batches queued behind an error, so a byte left there
        must not end the batches of whatever runs next (a stop asked meanwhile is still seen
        by the sweep's Interrupt, between chunks)."""
        self.clear_stop()
        try:
            with ThreadPoolExecutor(1) as pool:
                queued: deque[Future[np.ndarray]] = deque()
                yield Pipeline(lambda *request: queued.append(pool.submit(self.batch, *request)),
                               lambda: queued.popleft().result())  # fmt: skip
        finally:
            self.clear_stop()

    def request_stop(self) -> None:
        with contextlib.suppress(BlockingIOError):
            os.write(_stop_pipe()[1], b"S")

    def clear_stop(self) -> None:
        _drain(_stop_pipe()[0])


class HelperSpawner(DirectSpawner):
    """csrc/spawner: a small freshly exec'd helper spawns the children, so their maxrss is theirs.

    Its own peak (VmHWM, 0.9-2 MiB by machine: recorded, not assumed) is carried into every
    child it spawns: floor_kb.
    A stop is a byte in a pipe the helper polls (not on the request socket), so requests can
    wait queued in the socket while a batch runs: the helper starts the next one at once.
    The helper runs under a supervisor of its own (system/supervisor.py) and is a child
    subreaper itself: what a run leaves outside its process group is killed once no run is in
    flight, and everything it started when perflab ends, however perflab ends.
    A program it runs cannot stop it for long (its supervisor resumes it) nor end it short of
    SIGKILL; killed, it leaves the runs its batch had finished in the batch's memfd (its
    fourth fd), which HelperLost carries.
    """

    method = "spawner helper (children exec'd from a small process; maxrss includes its peak)"

    def __init__(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self.stop_r, self.stop_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self.supervisor = supervisor.Supervisor()
        try:
            with theirs:  # the helper's fds 3 and 4; in a group of its own, off the terminal
                self.proc = self.supervisor.start(
                    [str(supervisor.HELPER), "3", "4"],
                    fds=(None, None, 2, theirs.fileno(), self.stop_r),
                )
        except BaseException:
            self.supervisor.close()
            for fd in (self.stop_r, self.stop_w):
                os.close(fd)
            ours.close()
            raise
        self.sock, self.pid, self.floor_kb = ours, os.getpid(), None
        self.lock = threading.RLock()  # one caller's requests and replies at a time
        self.kept: deque[int] = deque()  # each queued batch's memfd, oldest first
        self.queued = 0
        self.most_queued = 0  # the most requests waiting at once in the last pipeline or batch
        atexit.register(self.close)  # no helper outlives perflab, nor warns that it was left

    def batch(self, request: bytes, nruns: int, stdio: list[int]) -> np.ndarray:
        with self.lock:
            self.most_queued = 0
            self._submit(request, nruns, stdio)
            return self._collect()

    @contextlib.contextmanager
    def pipeline(self) -> Iterator[Pipeline]:
        """Requests sent ahead, queued in the socket; replies read in order. Replies left
        unread at the end (an error) leave the helper out of step: it is ended. A stop asked
        for ends with the pipeline, as a direct spawner's does."""
        with self.lock:
            self.most_queued = 0
            try:
                yield Pipeline(self._submit, self._collect)
            finally:
                if self.queued:
                    self.close()
                self.clear_stop()

    def _submit(self, request: bytes, nruns: int, stdio: list[int]) -> None:
        kept = os.memfd_create("perflab-batch", os.MFD_CLOEXEC)
        try:
            os.ftruncate(kept, bindings.KEPT_HEAD + max(nruns, 1) * RUN_DTYPE.itemsize)
            fds = array.array("i", [*stdio, kept])
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                # the helper died under an earlier batch: collecting that one says so
                sent = self.sock.sendmsg([request], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds)])
                self.sock.sendall(request[sent:])
            self.kept.append(kept)
            self.queued += 1
            self.most_queued = max(self.most_queued, self.queued)
        except BaseException:
            if kept not in self.kept:
                os.close(kept)
            self.close()  # out of step with the helper now: the next batch starts a new one
            raise

    def _collect(self) -> np.ndarray:
        try:
            reply = bytearray(bindings.BATCH_REPLY_BYTES)
            self._recv_into(reply)
            done, floor_kb = bindings.batch_reply(bytes(reply))
            out = np.zeros(done, dtype=RUN_DTYPE)
            self._recv_into(out.data.cast("B"))
            self.queued -= 1
            os.close(self.kept.popleft())
        except (OSError, supervisor.Lost):
            lost = self._lost()
            self.close()
            raise lost from None
        except BaseException:
            self.close()
            raise
        self.floor_kb = max(self.floor_kb or 0, floor_kb) if floor_kb > 0 else None
        return out

    def _lost(self) -> HelperLost:
        """The helper ended under a batch: how, and the runs that batch finished (its memfd)."""
        runs = np.zeros(0, dtype=RUN_DTYPE)
        if self.kept:
            kept = self.kept[0]
            done = int(np.frombuffer(os.pread(kept, 8, 0), np.int64)[0])
            most = (os.fstat(kept).st_size - bindings.KEPT_HEAD) // RUN_DTYPE.itemsize
            size = min(max(done, 0), most) * RUN_DTYPE.itemsize
            raw = os.pread(kept, size, bindings.KEPT_HEAD) if size else b""
            runs = np.frombuffer(raw, dtype=RUN_DTYPE)[: len(raw) // RUN_DTYPE.itemsize].copy()
        code = None
        with contextlib.suppress(OSError, PerflabError):  # its supervisor may be gone too
            code = self.proc.wait(1.0)
        return HelperLost(f"the spawner helper {supervisor.ending(code)}", runs)

    def _recv_into(self, buf: bytearray | memoryview) -> None:
        supervisor.recv_exactly(self.sock, buf, self.supervisor.watch)

    def request_stop(self) -> None:
        """Safe from a signal handler: the batch in flight and every queued one stop."""
        with contextlib.suppress(OSError):
            os.write(self.stop_w, b"S")

    def clear_stop(self) -> None:
        _drain(self.stop_r)

    def alive(self) -> bool:
        """Not closed (a closed helper's process is no longer waited for), nor ended."""
        return self.pid == os.getpid() and self.sock.fileno() >= 0 and self.proc.poll() is None

    def close(self) -> None:
        """End the helper and what its runs left; idempotent, and a forked child leaves its
        parent's helper alone."""
        self.sock.close()
        if self.pid != os.getpid():
            return
        self.supervisor.close()
        for fd in (self.stop_r, self.stop_w, *self.kept):
            with contextlib.suppress(OSError):
                os.close(fd)
        self.stop_r = self.stop_w = -1
        self.kept.clear()


class HelperLost(supervisor.Lost):
    """The spawner helper ended under a batch: the records of the runs it had finished."""

    def __init__(self, message: str, runs: np.ndarray):
        super().__init__(message)
        self.runs = runs
        self.parts: list[tuple] = []  # a caller's batches collected with it (running/lanes.py)


@dataclass(frozen=True)
class Pipeline:
    """Batches sent ahead of their replies: submit(request, nruns, stdio), collect() -> the
    oldest one's records."""

    submit: Callable[[bytes, int, list[int]], None]
    collect: Callable[[], np.ndarray]


_spawners: dict[str, Spawner] = {}


def spawner() -> Spawner:
    """The spawner chosen for this process (chosen()), else the spawner helper, started on
    first use (again after a fork), else in-process runs."""
    if "chosen" in _spawners:
        return _spawners["chosen"]
    current = _spawners.get("default")
    if isinstance(current, HelperSpawner) and current.alive():
        return current
    if supervisor.HELPER.exists() and os.access(supervisor.HELPER, os.X_OK):
        _spawners["default"] = HelperSpawner()
    else:
        _spawners["default"] = _spawners.setdefault("in-process", DirectSpawner())
    return _spawners["default"]


def direct() -> Spawner:
    """Runs without the helper: what each run costs without it, or when it cannot start."""
    return _spawners.setdefault("in-process", DirectSpawner())


@contextlib.contextmanager
def chosen(using: Spawner) -> Iterator[Spawner]:
    """Every run of this process without a spawner of its own (run_batch's `using`) goes to
    `using` within the block, every sweep's included; a stop reaches it as it reaches the
    others (request_stop)."""
    before = _spawners.get("chosen")
    _spawners["chosen"] = using
    try:
        yield using
    finally:
        if before is None:
            del _spawners["chosen"]
        else:
            _spawners["chosen"] = before


def request_stop() -> None:
    """Stop every batch in flight between runs (called from signal handlers)."""
    for e in list(_spawners.values()):
        e.request_stop()


def clear_stop() -> None:
    """Forget a stop request, before a new sweep begins: every spawner's, and the bytes a
    signal left in the wakeup pipe though no in-process spawner was made yet to read it."""
    _drain(_stop_pipe()[0])
    for e in list(_spawners.values()):
        e.clear_stop()


def _drain(fd: int) -> None:
    """Read a non-blocking pipe empty (a closed one is empty too)."""
    with contextlib.suppress(OSError):
        while os.read(fd, 4096):
            pass


def stop_wakeup_fd() -> int:
    """The fd Python's C-level signal handler writes to: stops an in-process batch at once."""
    return _stop_pipe()[1]


def maxrss_meta(used: Spawner) -> dict[str, Any]:
    """What a result records about its maxrss_kb column: the method and its floor."""
    return {"maxrss_method": used.method, "maxrss_floor_kb": used.floor_kb}


def run_batch(
    programs: Sequence[Sequence[str]],
    prog: np.ndarray,
    sizes: np.ndarray | None = None,
    var: str = "A",
    base_env: Mapping[str, str] | None = None,
    options: SpawnOptions | None = None,
    using: Spawner | None = None,
) -> np.ndarray:
    """Run programs[prog[i]] for each i (argv[0] the resolved path), with base_env plus
    VAR=<sizes[i] pad characters> where sizes[i] >= 0, all in one C call.

    Fewer records than runs come back when a stop was requested: the runs not made.
    """
    return (using or spawner()).batch(*request(programs, prog, sizes, var, base_env, options))


def request(
    programs: Sequence[Sequence[str]],
    prog: np.ndarray,
    sizes: np.ndarray | None = None,
    var: str = "A",
    base_env: Mapping[str, str] | None = None,
    options: SpawnOptions | None = None,
) -> tuple[bytes, int, list[int]]:
    """run_batch's arguments as what a spawner takes: (request bytes, runs, stdio fds)."""
    options = options or SpawnOptions()
    prog = np.ascontiguousarray(prog, dtype=np.int32)
    sizes = np.full(prog.size, -1, np.int64) if sizes is None else np.asarray(sizes, np.int64)
    if not var or "=" in var:
        raise PerflabError(f"invalid environment variable name {var!r}")
    if sizes.size and sizes.min() < -1:
        raise PerflabError("environment sizes must not be negative")
    programs = [(a[0], *a) for a in programs]
    return _pack(programs, prog, sizes, var, base_env, options), prog.size, _stdio(options)


def run(
    argv: Sequence[str],
    env: Mapping[str, str] | None = None,
    options: SpawnOptions | None = None,
    using: Spawner | None = None,
) -> np.record:
    """One run with exactly argv and env (None: empty): nothing else is inherited."""
    path = check_program(argv[0])
    out = run_batch([(path, *argv[1:])], np.zeros(1), None, "A", env, options, using)
    if out.size == 0:
        raise Stopped
    out = out.copy()
    out["prog"] = 0
    return out[0]


def run_env_sizes(
    argv: Sequence[str],
    sizes: np.ndarray,
    var: str = "A",
    base_env: Mapping[str, str] | None = None,
    options: SpawnOptions | None = None,
    using: Spawner | None = None,
) -> np.ndarray:
    """Run argv once per size, each with base_env plus VAR=<size pad characters>, in one C call."""
    sizes = np.ascontiguousarray(sizes, dtype=np.int64)
    if sizes.size and sizes.min() < 0:
        raise PerflabError("environment sizes must not be negative")
    return run_batch([argv], np.zeros(sizes.size), sizes, var, base_env, options, using)


def timer_overhead() -> int:
    """The probe's own cost in ticks (same lfence;rdtsc / rdtscp;lfence pair), to subtract."""
    return bindings.timer_overhead_ticks()


def tidy(runs: np.ndarray, overhead: int = 0, runq: bool = False) -> pd.DataFrame:
    """Run records as tidy columns: probe ticks less overhead (NaN if no probe), rusage, status,
    and with runq the RUNQ_COLUMNS (see runq_columns).

    maxrss_kb is <NA> where it cannot be the child's own (in-process runs); strays says the
    child left processes running (in its group, or setsid ones the spawner helper reaped after a
    serial run), which were killed.

    Counts are int32 and status a categorical: 800 000 rows must fit in a few copies.
    """
    df = pd.DataFrame(tidy_columns(runs, overhead))
    return df.assign(**runq_columns(runs)) if runq else df


TIDY_COLUMNS = ("ticks", "outer_ticks", "wall_ns", "utime_ns", "stime_ns", "maxrss_kb", "minflt",
                "majflt", "nvcsw", "nivcsw", "cycles", "instructions", "exit_code", "signal",
                "status", "child_errno", "strays")  # fmt: skip


def tidy_columns(runs: np.ndarray, overhead: int = 0) -> dict[str, Any]:
    """tidy's columns by name, for a frame built once with more columns in front: inserting
    them one by one cost a sweep on every CPU more Python time than the rows' own making."""
    has_probe = (runs["flags"] & bindings.RUN_HAS_PROBE) != 0
    has_counters = (runs["flags"] & bindings.RUN_HAS_COUNTERS) != 0
    # The probed region lies inside the parent's own reads around the run, on the same clock:
    # a record of 0 or of more than outer_ticks is not a measurement (bad_probe, no ticks).
    raw = runs["probe_ticks"]
    unphysical = has_probe & ((raw == 0) | (raw > runs["outer_ticks"]))
    ok = runs["status"] == bindings.RUN_OK
    status = np.where(unphysical & ok, bindings.RUN_BAD_PROBE, runs["status"])
    # A region cheaper than the timer's own cost reads 0, not a negative time.
    probe = np.maximum(raw.astype(np.float64) - overhead, 0.0)
    return {
        "ticks": np.where(has_probe & ~unphysical, probe, np.nan),
        "outer_ticks": runs["outer_ticks"].astype(np.int64),
        "wall_ns": runs["wall_ns"],
        "utime_ns": runs["utime_ns"],
        "stime_ns": runs["stime_ns"],
        "maxrss_kb": pd.arrays.IntegerArray(
            runs["maxrss_kb"].astype(np.int32), mask=runs["maxrss_kb"] < 0
        ),
        "minflt": runs["minflt"].astype(np.int32),
        "majflt": runs["majflt"].astype(np.int32),
        "nvcsw": runs["nvcsw"].astype(np.int32),
        "nivcsw": runs["nivcsw"].astype(np.int32),
        "cycles": np.where(has_counters, runs["cycles"].astype(np.float64), np.nan),
        "instructions": np.where(has_counters, runs["instructions"].astype(np.float64), np.nan),
        "exit_code": runs["exit_code"],
        "signal": runs["signal"],
        "status": pd.Categorical.from_codes(status, STATUS_NAMES),
        "child_errno": runs["child_errno"],
        "strays": (runs["flags"] & bindings.RUN_STRAYS) != 0,
    }


ITERATION_COLUMNS = ("iterations",)


def iteration_columns(runs: np.ndarray, ticks: np.ndarray, overhead: int = 0) -> dict[str, Any]:
    """For runs asked for several iterations of the probe's repeat loop: ticks becomes their
    median (each less the timer's cost; NaN where tidy's ticks is), which an iteration the host
    stretched cannot move as it moves a mean; iterations, the records the run sent (1: a
    program with a plain BEGIN and END). An iteration cheaper than the timer counts as 1 tick."""
    k = runs["iterations"].astype(np.int64)
    raw = np.maximum(runs["iteration_ticks"].astype(np.float64) - overhead, 1.0)
    shown = np.isfinite(ticks) & (k >= 1)
    per = np.full(k.size, np.nan)
    for n in np.unique(k[shown]):
        mine = shown & (k == n)
        per[mine] = np.median(raw[mine, :n], axis=1)
    return {"ticks": per, "iterations": k.astype(np.int32)}


STEADY_COLUMNS = ("warmup", "steady_state")


def steady_columns(runs: np.ndarray, ticks: np.ndarray, overhead: int = 0) -> dict[str, Any]:
    """iteration_columns with each run's iterations classified first (analysis/steady.py):
    ticks becomes the median of its steady iterations, warmup the iterations set aside before
    them, steady_state the class (no steady state: the median of all, and the class says so;
    unclassified: fewer iterations than a classification needs, or no ticks)."""
    out = iteration_columns(runs, ticks, overhead)
    k = runs["iterations"].astype(np.int64)
    raw = np.maximum(runs["iteration_ticks"].astype(np.float64) - overhead, 1.0)
    warm = np.zeros(k.size, np.int32)
    found = np.zeros(k.size, np.int8)
    for i in np.flatnonzero(np.isfinite(out["ticks"]) & (k >= warmup.MIN_ITERATIONS)):
        cls, start, median = steady.steady_run(raw[i, : k[i]])
        warm[i], found[i], out["ticks"][i] = start, steady.RUN_CLASSES.index(cls), median
    classes = pd.Categorical.from_codes(found, steady.RUN_CLASSES)
    return {**out, "warmup": warm, "steady_state": classes}


def runq_columns(runs: np.ndarray) -> dict[str, Any]:
    """runq_ns: the run-queue wait of the child's threads, summed (NaN where no source answered,
    or the kernel keeps no schedstat: no CPU time counted); runq_source: taskstats (every
    thread, exact at exit) or proc (threads gone before the leader as of their last reading);
    runq_cover: the counted threads' CPU time over the run's rusage CPU time (1: all of it;
    less when threads were missed or the program's own children ran)."""
    counted = runs["runq_cpu_ns"].astype(np.float64)
    has = (runs["runq_source"] != 0) & (counted > 0)
    cpu = (runs["utime_ns"] + runs["stime_ns"]).astype(np.float64)
    return {
        "runq_ns": np.where(has, runs["runq_ns"].astype(np.float64), np.nan),
        "runq_source": pd.Categorical.from_codes(np.where(has, runs["runq_source"], 0),
                                                 RUNQ_SOURCES),
        "runq_cover": np.where(has & (cpu > 0), counted / np.where(cpu > 0, cpu, 1), np.nan),
    }  # fmt: skip


def runq_note(runs: np.ndarray) -> str:
    """How the runs' run-queue wait was read, one phrase, with why taskstats was not used."""
    sources = {RUNQ_SOURCES[int(s)] for s in runs["runq_source"]}
    refused = runs["runq_errno"][runs["runq_errno"] != 0]
    why = f"taskstats refused: {describe_errno(int(refused[0]))}; " if refused.size else ""
    if sources == {"taskstats"}:
        return "taskstats: every thread's wait, summed by the kernel at exit"
    if "proc" in sources:
        return (f"{why}/proc readings during each run: threads that exit before the leader "
                "count as of their last reading (runq_cover: the CPU time covered)")  # fmt: skip
    return f"{why}no source answered"


def describe_errno(code: int) -> str:
    """An errno the child reported, worded as perflab words every errno."""
    return bindings.errno_text(code)


@dataclass(frozen=True)
class ParallelOptions(SpawnOptions):
    """Options of a parallel batch: one child per CPU of `cpus` at a time, each pinned to its
    own CPU (record field cpu); the finished runs before the first one a stop cut short."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if len(set(self.cpus)) != len(self.cpus) or len(self.cpus) < 1:
            raise PerflabError(f"a parallel batch needs distinct CPUs, not {list(self.cpus)}")

    def flags(self) -> int:
        return super().flags() | bindings.SPAWN_PARALLEL
