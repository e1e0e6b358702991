"""Warm-up and steady state of a Python callable: P executions of I calls each, every call
timed alone by the core's loop (csrc/timing.c, through the shared cffi entry the perf
assertions use), and each execution's series classified as the verb's (analysis/warmup.py).

An execution is a fresh process. A callable a fresh interpreter can import (a module's
function, found again by its module and qualified name) runs in one started by perflab's
spawner as the verb's programs are: exactly an environment of padding whose size is drawn per
execution, ASLR off, pinned. Any other (a lambda, a closure, a function of __main__ or of a
Jupyter cell, a bound method) runs in a child forked from this process: it starts from the
parent's layout and state (its imports, caches and heap), which the result says.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib
import importlib.machinery
import inspect
import json
import math
import os
import select
import signal
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from perflab.analysis import steady
from perflab.analysis import warmup as analysis
from perflab.core import bindings
from perflab.core.lazy import pd
from perflab.errors import PerflabError
from perflab.lab.warmup import STEADY_WIDTH, STEADY_WIDTHS, check_until_steady
from perflab.plan import controls
from perflab.plan.base import Plan, option
from perflab.system.timer import timer_overhead

Fresh = Literal["auto", "interpreter", "fork"]
EMPTY_CALLS = 101  # empty calls timed before the first iteration: what the entry costs
MOST_ITERATIONS = 10_000_000  # one execution's ticks are held whole, in the child and here
FORK_KEEPS = (
    "each execution is a fork of this process: it keeps the parent's layout and state as "
    "they are at the fork (imports, caches, heap, environment, ASLR); what the callable "
    "changes is each execution's own"
)
INTERPRETER = (
    "each execution is a fresh interpreter that imports the callable: an exact environment "
    "of padding drawn per execution, ASLR off, pinned"
)
# the fresh interpreter's program: the parent's sys.path, so it imports what the parent would
BOOT = (
    "import json, sys; spec = json.load(sys.stdin); sys.path[:] = spec['path']; "
    "from perflab.lab.warmup.callables import child; child(spec)"
)


@dataclass(frozen=True)
class CallablePlan(Plan):
    """How many executions and calls, how each is run: its env sizes, timeout and CPUs."""

    executions: int = option("executions", 10, "Fresh processes, each classified.",
                             least=1, most=100_000,
                             most_why="the executions one run classifies")  # fmt: skip
    iterations: int = option("iterations", 200, "Calls timed in each execution.",
                             least=analysis.MIN_ITERATIONS, each_bytes=controls.ROW_BYTES,
                             what="one execution's rows", most=MOST_ITERATIONS,
                             most_why="the calls one execution holds")  # fmt: skip
    fresh: str = option("fresh", "auto", "interpreter, fork, or auto: interpreter where it can.")
    env_max: int = option("env_max", 4096, "Each interpreter's env size is drawn in 0..ENV_MAX.")
    seed: int = option("seed", 0, "Seed of the env sizes drawn.", within=(0, controls.SEED_MAX))
    timeout: float = option("timeout", 60.0, "Seconds one execution may take.")
    cpus: tuple[int, ...] = option("cpus", (), "Pin each execution to these CPUs.")
    until_steady: bool = option("until_steady", False, "Stop adding executions once the "
                                "steady value over them is as narrow as steady_width; "
                                "executions is then the most.")  # fmt: skip
    steady_width: float = option("steady_width", STEADY_WIDTH, "With until_steady: the width "
                                 "of the steady value's 95 % interval over executions, over "
                                 "its median, at which executions stop (0.03: 3 %).",
                                 within=STEADY_WIDTHS, needs="until_steady")  # fmt: skip

    def check_more(self) -> None:
        """Sizes and a timeout that can be, memory for every row, and executions enough for
        until_steady's interval (warmup's annotations checked the types, and that fresh is
        one of Fresh)."""
        if self.env_max < 0:
            raise PerflabError(f"env_max is 0 or more, not {self.env_max}")
        controls.check_timeout(self.timeout)
        controls.check_cpu_list("cpus", tuple(self.cpus), allow_empty=True)
        rows = self.executions * self.iterations
        name = f"{self.executions} executions of {self.iterations} iterations"
        controls.check_memory(name, rows * controls.ROW_BYTES, "their rows", controls.ROW_BYTES)
        if self.until_steady:
            check_until_steady("until_steady", "executions", self.executions)


@controls.typed_arguments
def warmup(
    fn: Callable[[], object],
    executions: int = CallablePlan.executions,
    iterations: int = CallablePlan.iterations,
    *,
    fresh: Fresh = "auto",
    env_max: int = CallablePlan.env_max,
    seed: int = CallablePlan.seed,
    timeout: float = CallablePlan.timeout,
    cpus: tuple[int, ...] = CallablePlan.cpus,
    until_steady: bool = CallablePlan.until_steady,
    steady_width: float | None = None,
    output: str | os.PathLike | None = None,
) -> pd.DataFrame:
    """fn called `iterations` times in each of `executions` fresh processes, each call timed
    alone: one row per (execution, iteration) with its time in ns (the timer's own cost
    subtracted; the entry's, call_overhead_ns in the metadata, is in every time) and the env
    size drawn (NA where forked), metadata as
    `perflab warmup` writes it, so perflab.lab.warmup.summary, summarize and plot read it and
    perflab report reads it back from `output` (saved whole once every execution is done; an
    interrupted run keeps nothing, as the verb's). fresh="auto" runs a fresh interpreter where
    one can import fn, else forks (module docstring); "interpreter" or "fork" insists.
    until_steady: stop adding executions once the steady value over them is known to
    steady_width (3 % when not given; refused without until_steady), as the verb's
    --until-steady (analysis/steady.py)."""
    _check_callable(fn)
    if steady_width is not None and not until_steady:
        raise PerflabError(f"steady_width={steady_width} is where until_steady stops: give "
                           "until_steady=True with it")  # fmt: skip
    steady_width = STEADY_WIDTH if steady_width is None else steady_width
    CallablePlan(executions, iterations, fresh, env_max, seed, timeout, cpus, until_steady,
                 steady_width).check()  # fmt: skip
    how, where = _way(fn, fresh)
    from perflab.running import cpuchoice
    from perflab.store import results
    from perflab.store.recording import Recording
    from perflab.system import machine, provenance

    recording = Recording(output)
    recording.check_whole("warmup")
    choice = cpuchoice.check_asked(cpus) if cpus else cpuchoice.pick(1)
    hz, hz_how = machine.tsc_hz()
    sizes = np.random.default_rng(seed).integers(0, env_max + 1, executions)
    name = ".".join(where) if how == "interpreter" else _label(fn)
    cpuchoice.say(choice.line)
    frames, entries, seconds = [], [], []
    done: list[analysis.Execution] = []
    width = math.inf
    for i, size in enumerate(sizes):
        t0 = time.perf_counter()
        if how == "interpreter":
            got = _spawned(where, iterations, int(size), choice.cpus, timeout, i)
        else:
            got = _forked(fn, iterations, choice.cpus, timeout, i)
        seconds.append(time.perf_counter() - t0)
        ns, entry = _net_ns(got, hz, i)
        entries.append(entry)
        frames.append(pd.DataFrame({"execution": i, "iteration": np.arange(iterations),
                                    "time": ns, "env_size": int(size)}))  # fmt: skip
        if until_steady:
            done.append(analysis.classify(ns))
            width = steady.relative_width(done)
            if width <= steady_width:
                break
    df = pd.concat(frames, ignore_index=True)
    if how == "fork":
        df["env_size"] = pd.array([pd.NA] * len(df), dtype="Int64")
    meta = {**provenance.metadata(), "experiment": "warmup", "unit": "ns", "target": name,
            "fresh": how, "fresh_means": INTERPRETER if how == "interpreter" else FORK_KEEPS,
            "params": {"callable": name, "executions": executions, "iterations": iterations,
                       "fresh": fresh, "env_max": env_max, "seed": seed, "timeout": timeout,
                       "cpus": list(cpus), "until_steady": until_steady,
                       "steady_width": steady_width},
            "cpus": list(choice.cpus), "aslr": "off" if how == "interpreter" else "the parent's",
            "tsc_hz": hz, "tsc_hz_how": hz_how, "timer_overhead_ticks": timer_overhead(),
            "subtracted": "the timer's own cost", "call_overhead_ns": float(np.median(entries)),
            "call_overhead": "each time includes the call through perflab's C-to-Python entry: "
                             "the median of 101 empty calls, timed in each execution before "
                             "its first call, median over executions"}  # fmt: skip
    if until_steady:
        from perflab.lab.warmup.measure import stopped

        unsteady = sum(e.steady is None for e in done)
        meta["until_steady"] = stopped(seconds, executions, steady_width, width, unsteady)
    return recording.keep(results.attach(df, meta))


def _check_callable(fn: Any) -> None:
    """A plain callable (its annotation checked it is one), refused in one line before
    anything runs when it is asynchronous (never called here: a call would warm the state
    every fork inherits)."""
    if inspect.iscoroutinefunction(fn) or inspect.isasyncgenfunction(fn):
        raise PerflabError(
            f"{_label(fn)} is asynchronous: calling it only makes a coroutine; give a plain "
            "callable that runs it, e.g. lambda: asyncio.run(target())"
        )


def _label(fn: Any) -> str:
    """The callable's name as the result records it."""
    qual = getattr(fn, "__qualname__", None)
    if not isinstance(qual, str):
        return repr(fn)
    module = getattr(fn, "__module__", None)
    return f"{module}.{qual}" if isinstance(module, str) else qual


def _way(fn: Any, fresh: str) -> tuple[str, Any]:
    """("interpreter", (module, qualname)) where a fresh interpreter can import fn, else
    ("fork", why not); fresh="interpreter" refuses what cannot be imported."""
    found = _importable(fn)
    if fresh == "fork" or (fresh == "auto" and isinstance(found, str)):
        return "fork", found
    if isinstance(found, str):
        raise PerflabError(
            f"{_label(fn)}: a fresh interpreter cannot import it ({found}); fresh='fork' runs "
            "it in forks of this process"
        )
    return "interpreter", found


def _importable(fn: Any) -> tuple[str, str] | str:
    """fn's module and qualified name where importing the one and walking the other gives fn
    back, else why not."""
    module, qual = getattr(fn, "__module__", None), getattr(fn, "__qualname__", None)
    if not (isinstance(module, str) and isinstance(qual, str)):
        return "it has no module and qualified name"
    if module == "__main__":
        return "it is defined in __main__: a script or a notebook cell"
    if "<" in qual:
        return f"it is {qual}: a lambda or a closure"
    loaded = sys.modules.get(module)
    top = module.split(".")[0]
    if loaded is None:
        return f"its module {module} is not imported"
    if top not in sys.builtin_module_names and not importlib.machinery.PathFinder.find_spec(
        top, sys.path
    ):
        return f"its module {module} is not found on sys.path"
    obj: Any = loaded
    for part in qual.split("."):
        obj = getattr(obj, part, None)
    if obj is not fn:
        return f"{module}.{qual} is not this object (a bound method, a wrapper)"
    return module, qual


def _noop() -> None:
    return None


def _iterate(fn: Callable[[], object], iterations: int) -> np.ndarray:
    """[the timer's cost, the median empty call, each call's raw ticks]: the empty calls
    first, so the shared entry is warm and the first iteration is fn's own first call."""
    errors: list[BaseException] = []
    empty = bindings.python_call(bindings.PyEntry(_noop, errors))
    median = float(np.median(empty.time(EMPTY_CALLS)))
    call = bindings.python_call(bindings.PyEntry(fn, errors))
    raw = call.time(iterations)
    if errors:
        raise errors[0]
    return np.concatenate([[float(timer_overhead()), median], raw.astype(float)])


def _outcome(fn: Callable[[], object], iterations: int) -> bytes:
    """What an execution sends back: b"T" and its ticks, or b"E" and why it failed."""
    try:
        return b"T" + _iterate(fn, iterations).tobytes()
    except BaseException as exc:  # the child reports whatever ended it, then exits
        said = (str(exc).splitlines() or [""])[0]
        return b"E" + f"{_label(fn)} raised {type(exc).__name__}: {said}".encode()


def _net_ns(got: bytes, hz: float, i: int) -> tuple[np.ndarray, float]:
    """An execution's times in ns net of the timer's own cost (the least an empty timed
    region took, so none is below 0), and its empty call's median, in ns as well."""
    if got[:1] == b"E":
        raise PerflabError(f"execution {i}: {got[1:].decode(errors='replace')}")
    values = np.frombuffer(got[1:], dtype=float)
    return np.maximum(values[2:] - values[0], 0) / hz * 1e9, (values[1] - values[0]) / hz * 1e9


def child(spec: dict[str, Any]) -> None:
    """The fresh interpreter's work: import the callable, time it, write the outcome."""
    try:
        obj: Any = importlib.import_module(spec["module"])
        for part in spec["qualname"].split("."):
            obj = getattr(obj, part)
        got = _outcome(obj, int(spec["iterations"]))
    except BaseException as exc:  # an import that failed is the execution's one line
        said = (str(exc).splitlines() or [""])[0]
        got = b"E" + f"importing {spec['module']}.{spec['qualname']}: {said}".encode()
    with open(spec["out"], "wb") as f:
        f.write(got)


def _spawned(
    where: tuple[str, str], iterations: int, size: int, cpus: tuple[int, ...], timeout: float,
    i: int
) -> bytes:  # fmt: skip
    """One fresh interpreter's outcome, run as the verb runs its programs."""
    from perflab.running import spawn

    module, qual = where
    devnull = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
    try:
        with tempfile.TemporaryDirectory(prefix="perflab-warmup-") as d:
            out, spec_path = os.path.join(d, "out"), os.path.join(d, "spec")
            with open(spec_path, "w") as f:
                json.dump({"path": sys.path, "module": module, "qualname": qual,
                           "iterations": iterations, "out": out}, f)  # fmt: skip
            with open(spec_path, "rb") as spec, tempfile.TemporaryFile(dir=d) as err:
                options = spawn.SpawnOptions(aslr="off", cpus=cpus, timeout=timeout,
                                             stdin=spec.fileno(), stdout=devnull,
                                             stderr=err.fileno())  # fmt: skip
                argv = [spawn.check_program(sys.executable), "-c", BOOT]
                runs = spawn.run_env_sizes(argv, np.array([size]), "A", {}, options)
                if runs.size == 0:
                    raise KeyboardInterrupt
                status = int(runs["status"][0])
                if os.path.exists(out):
                    with open(out, "rb") as f:
                        return f.read()
                err.seek(0)
                last = (err.read().decode(errors="replace").strip().splitlines() or [""])[-1]
                raise PerflabError(
                    f"execution {i} of {module}.{qual}: {spawn.STATUS[status]}, not a clean "
                    f"exit{': ' + last if last else ''}"
                )
    finally:
        os.close(devnull)


def _forked(
    fn: Callable[[], object], iterations: int, cpus: tuple[int, ...], timeout: float, i: int
) -> bytes:
    """One forked child's outcome, back through a pipe; the child is killed and reaped on any
    way out of here (Ctrl-C, the timeout), and dies with this process (PR_SET_PDEATHSIG)."""
    parent = os.getpid()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into the caller's code
        got = b"E" + b"the forked child could not start"
        try:
            os.close(r)
            signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides, and kills it
            ctypes.CDLL(None).prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG
            if os.getppid() != parent:
                os._exit(1)
            if cpus:
                os.sched_setaffinity(0, cpus)
            got = _outcome(fn, iterations)
        finally:
            view = memoryview(got)
            with contextlib.suppress(OSError):
                while view:
                    view = view[os.write(w, view) :]
            os._exit(0)
    os.close(w)
    reaped = False
    try:
        got = _drain(r, timeout, i)
        _, status = os.waitpid(pid, 0)
        reaped = True
    finally:
        os.close(r)
        if not reaped:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
    if not got or (got[:1] == b"T" and (len(got) - 1) % 8):
        how = f"killed by signal {os.WTERMSIG(status)}" if os.WIFSIGNALED(status) else "cut short"
        raise PerflabError(f"execution {i}: the forked child was {how} before it reported")
    return got


def _drain(fd: int, timeout: float, i: int) -> bytes:
    """Everything the child writes until it closes the pipe, within `timeout` seconds."""
    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            raise PerflabError(f"execution {i}: ran past its timeout of {timeout:g} s")
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
