"""What a perf assertion can time: Python callables, C functions, and programs run as children.

A callable or C function is timed as samples of `calls` back-to-back calls made by
csrc/timing.c through a function pointer (a cffi callback for a Python callable), so Python
never sits between two timestamps. The batch size is calibrated so a sample dwarfs the timer's
own cost, and the cost of calling an empty function through the same path is measured and
subtracted: values are net ticks per call. A program is one exact child run per sample
(perflab.spawn: exactly the given environment, ASLR off, pinned), timed by its probe when it
has one, else from clone to wait4.
"""

import dataclasses
import functools
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from perflab import spawn, stats
from perflab._native import check, ffi, lib, ptr, u64_array
from perflab.errors import PerflabError

# A sample should last about this many ticks (~10 us at 2.5 GHz): ~700 times the timer's
# cost, short enough that few samples are hit by an interrupt; and at least STEPS_PER_SAMPLE
# timer steps, so one step is at most 0.1 % of a sample on a coarse counter.
SAMPLE_TICKS = 25_000
STEPS_PER_SAMPLE = 1000
MAX_SAMPLE_TICKS = 64 * SAMPLE_TICKS
MAX_CALLS = 1 << 24
OVERHEAD_SAMPLES = 101
STEP_READS = 20_000


@functools.cache
def timer_overhead() -> int:
    """Ticks of an empty timed region: subtracted once from every sample."""
    return int(lib.perflab_timer_overhead())


def timer_reads(n: int = STEP_READS) -> np.ndarray:
    """Ticks between the timing layer's begin and end reads, n empty regions back to back."""
    out = ffi.new("int64_t[]", n)
    lib.perflab_time_empty(out, n)
    return np.frombuffer(ffi.buffer(out), dtype=np.int64) + timer_overhead()


@functools.cache
def timer_step() -> int:
    """The tick counter's step (20 on some AMD EPYC guests, 1 on most hosts): no timing is
    finer than this, so it sets how long a sample must be and how close two medians can be."""
    return max(1, stats.quantum(timer_reads()))


def sample_ticks_default() -> int:
    """How long a sample should last: SAMPLE_TICKS, or STEPS_PER_SAMPLE steps if longer."""
    return max(SAMPLE_TICKS, STEPS_PER_SAMPLE * timer_step())


@dataclass(eq=False)
class CallTarget:
    """A function the core calls `calls` times per sample; `overhead` is its empty call's cost."""

    name: str
    shape: tuple
    call: Any = field(repr=False)
    empty: Any = field(repr=False)
    keep: tuple = field(default=(), repr=False)
    errors: list = field(default_factory=list, repr=False)
    calls: int = 0
    overhead: float = 0.0

    def raise_errors(self) -> None:
        """Re-raise the first exception a Python callable raised inside the C loop."""
        if self.errors:
            exc = self.errors[0]
            self.errors.clear()
            raise exc

    def per_call(self, ticks: np.ndarray) -> np.ndarray:
        """Net ticks per call of raw sample ticks: timer and empty-call costs removed."""
        return (ticks.astype(float) - timer_overhead()) / self.calls - self.overhead

    @property
    def resolution(self) -> float:
        """Ticks per call one timer step is worth: no per-call value is finer than this."""
        return timer_step() / max(self.calls, 1)


def _call_struct(fn=None, fn_arg=None, arg=ffi.NULL):
    c = ffi.new("struct perflab_call *")
    c.fn = fn if fn is not None else ffi.NULL
    c.fn_arg = fn_arg if fn_arg is not None else ffi.NULL
    c.arg = arg
    c.calls = 1
    return c


def _noop() -> None:
    return None


@ffi.callback("void(void *)")
def _enter(handle) -> None:
    """The one C-to-Python entry of every Python target: the callable arrives as a handle,
    so two targets differ only in what they run, not in a per-target trampoline."""
    target = ffi.from_handle(handle)
    try:
        target.fn()
    except BaseException as exc:
        if not target.errors:
            target.errors.append(exc)


@dataclass(eq=False)
class _Entry:
    fn: Any
    errors: list


def python_callable(fn, name: str | None = None) -> CallTarget:
    """A Python callable, called from C through the shared entry (its return value dropped)."""
    if not callable(fn):
        raise PerflabError(f"{fn!r} is not callable")
    errors: list = []
    fn()  # once from Python first: a broken workload fails here with its own traceback
    body, empty = _Entry(fn, errors), _Entry(_noop, errors)
    hb, he = ffi.new_handle(body), ffi.new_handle(empty)
    return CallTarget(
        name=name or getattr(fn, "__name__", None) or repr(fn),
        shape=("python",),
        call=_call_struct(fn_arg=_enter, arg=hb),
        empty=_call_struct(fn_arg=_enter, arg=he),
        keep=(hb, he, body, empty),
        errors=errors,
    )


def c_function(fnptr, arg=None, name: str | None = None) -> CallTarget:
    """A C function pointer from any cffi FFI: `void (*)(void)`, or `void (*)(void *)` with arg."""
    if not isinstance(fnptr, ffi.CData):
        raise PerflabError(
            f"{fnptr!r} is not a cffi function pointer; use ffi.addressof(lib, 'name') "
            "(API mode) or lib.name (ABI mode)"
        )
    kind = ffi.typeof(fnptr)
    if kind.kind != "function":
        raise PerflabError(f"{kind.cname} is not a function pointer")
    if arg is None:
        call = _call_struct(fn=ffi.cast("void(*)(void)", fnptr))
        empty = _call_struct(fn=lib.perflab_noop)
    else:
        call = _call_struct(fn_arg=ffi.cast("void(*)(void *)", fnptr), arg=ffi.cast("void *", arg))
        empty = _call_struct(fn_arg=lib.perflab_noop_arg)
    label = name or f"C function at {int(ffi.cast('uintptr_t', fnptr)):#x}"
    shape = ("c", arg is None)
    return CallTarget(name=label, shape=shape, call=call, empty=empty, keep=(fnptr, arg))


def spin(iterations: int, name: str | None = None) -> CallTarget:
    """The core's spin loop: a C workload whose cost grows linearly with `iterations`."""
    if iterations < 0:
        raise PerflabError(f"spin iterations must be >= 0, not {iterations}")
    n = ffi.new("uint64_t *", iterations)
    return c_function(ffi.addressof(lib, "perflab_spin"), arg=n, name=name or f"spin({iterations})")


@dataclass(eq=False)
class ProgramTarget:
    """A program run once per sample as an exact child; `probe` once a run showed its probe."""

    name: str
    argv: tuple[str, ...]
    env: dict[str, str] | None
    options: Any = field(repr=False)
    pin: bool = False
    probe: bool = False
    calls: int = 1
    overhead: float = 0.0

    def run(self, n: int) -> np.ndarray:
        """n runs: ticks of the probed region (timer cost removed) or of the whole child."""
        out = np.empty(n, dtype=np.uint64)
        for i in range(n):
            out[i] = self._ticks(spawn.run(self.argv, self.env, self.options))
        return out

    def _ticks(self, r) -> int:
        if r["status"] != lib.PERFLAB_RUN_OK:
            raise PerflabError(f"{self.name}: run failed: {_run_failure(r)}")
        has_probe = bool(r["flags"] & lib.PERFLAB_RUN_HAS_PROBE)
        if has_probe != self.probe:
            raise PerflabError(f"{self.name}: its probe record came and went between runs")
        return int(r["probe_ticks"]) if self.probe else int(r["outer_ticks"])

    def per_call(self, ticks: np.ndarray) -> np.ndarray:
        return ticks.astype(float) - (timer_overhead() if self.probe else 0)

    @property
    def resolution(self) -> float:
        return float(timer_step())


def _run_failure(r) -> str:
    status = spawn.STATUS.get(int(r["status"]), str(r["status"]))
    if status == "exit":
        return f"exit code {r['exit_code']}"
    if status == "crash":
        return f"killed by signal {r['signal']}"
    if r["child_errno"]:
        return f"{status}: {spawn.describe_errno(int(r['child_errno']))}"
    return status


def program(
    argv: Sequence[str],
    env: Mapping[str, str] | None = None,
    cpus: Sequence[int] | None = None,
    aslr: str = "off",
    rt: bool = False,
    timeout: float = 60.0,
    name: str | None = None,
) -> ProgramTarget:
    """A program run with exactly argv and env (None: empty), ASLR off, pinned.

    cpus=None pins both programs of a comparison to the CPU this process is on when the
    comparison starts: the scheduler put it where it could run, and it sleeps in wait4 while
    the child runs. rt=True asks for SCHED_FIFO (perflab.spawn; refused without privileges,
    then the runs are ordinary) so other tasks on that CPU cannot preempt the child.
    """
    argv = [str(a) for a in argv]
    if not argv:
        raise PerflabError("program: empty argv")
    argv[0] = spawn.check_program(argv[0])
    options = spawn.SpawnOptions(
        aslr=aslr,
        cpus=tuple(cpus or ()),
        rt=rt,
        timeout=timeout,
        stdout=_devnull(),
        stderr=_devnull(),
    )
    label = name or " ".join([os.path.basename(argv[0]), *argv[1:]])
    return ProgramTarget(
        name=label, argv=tuple(argv), env=dict(env or {}), options=options, pin=cpus is None
    )


def current_cpu() -> int:
    """The CPU this process runs on now (field 39 of /proc/self/stat)."""
    with open("/proc/self/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[36])


@functools.cache
def _devnull() -> int:
    """One fd on /dev/null for every child's stdout/stderr: a test's output stays readable."""
    return os.open(os.devnull, os.O_WRONLY | os.O_CLOEXEC)


Target = CallTarget | ProgramTarget


def as_target(obj, name: str | None = None) -> Target:
    """Accept a target, a cffi function pointer or a Python callable."""
    if isinstance(obj, CallTarget | ProgramTarget):
        return obj
    if isinstance(obj, ffi.CData):
        return c_function(obj, name=name)
    return python_callable(obj, name=name)


def _raw(call, n: int) -> np.ndarray:
    out = u64_array(n)
    check(lib.perflab_time_calls(call, ptr(out, "uint64_t[]"), n), "time calls")
    return out


def _needed_calls(target: CallTarget, sample_ticks: int) -> tuple[int, float]:
    """Power-of-two calls per sample reaching sample_ticks, and the raw ticks per call seen."""
    calls = 1
    while True:
        target.call.calls = calls
        best = int(_raw(target.call, 3).min())
        target.raise_errors()
        if best >= sample_ticks or calls >= MAX_CALLS:
            return calls, best / calls
        calls *= 2


def calibrate(*targets: CallTarget, sample_ticks: int | None = None) -> None:
    """Choose calls per sample for targets compared together, and measure their empty calls.

    Targets share one batch size (the cheapest target's) unless that would make a sample of a
    costlier one longer than MAX_SAMPLE_TICKS, and targets called through the same path at the
    same batch size share one overhead estimate: two identical workloads are then treated
    identically, so noise in the overhead cannot fake a difference between them.
    """
    if any(isinstance(t, ProgramTarget) for t in targets):
        _calibrate_programs(targets)
        return
    sample_ticks = sample_ticks or sample_ticks_default()
    seen = [_needed_calls(t, sample_ticks) for t in targets]
    common = max(calls for calls, _ in seen)
    overheads: dict[tuple, float] = {}
    for target, (_, per_call) in zip(targets, seen, strict=True):
        calls = common
        while calls > 1 and calls * per_call > max(MAX_SAMPLE_TICKS, 64 * sample_ticks):
            calls //= 2
        key = (target.shape, calls)
        if key not in overheads:
            target.empty.calls = calls
            empty = _raw(target.empty, OVERHEAD_SAMPLES).astype(float)
            overheads[key] = float(np.median((empty - timer_overhead()) / calls))
        target.calls = calls
        target.call.calls = calls
        target.overhead = overheads[key]


def _calibrate_programs(targets) -> None:
    """One warm-up run each (fills the page cache, shows whether the program has a probe)."""
    if not all(isinstance(t, ProgramTarget) for t in targets):
        raise PerflabError("compare a program with a program, not with an in-process function")
    cpu = current_cpu()
    for t in targets:
        if t.pin:
            t.options = dataclasses.replace(t.options, cpus=(cpu,))
        r = spawn.run(t.argv, t.env, t.options)
        if r["status"] != lib.PERFLAB_RUN_OK:
            raise PerflabError(f"{t.name}: run failed: {_run_failure(r)}")
        t.probe = bool(r["flags"] & lib.PERFLAB_RUN_HAS_PROBE)
    if len({t.probe for t in targets}) > 1:
        raise PerflabError(
            "one program reports a probe record and the other does not: their ticks would "
            "time different things"
        )


def sample(target: Target, n: int) -> tuple[np.ndarray, np.ndarray]:
    """n samples of a calibrated target: (raw ticks per sample, net ticks per call)."""
    if isinstance(target, ProgramTarget):
        raw = target.run(n)
        return raw, target.per_call(raw)
    raw = _raw(target.call, n)
    target.raise_errors()
    return raw, target.per_call(raw)


def _program_pair(a: ProgramTarget, b: ProgramTarget, n: int):
    """Runs interleaved a b, b a, ... like perflab_time_pair; each run is timed in C."""
    ra, rb = np.empty(n, dtype=np.uint64), np.empty(n, dtype=np.uint64)
    for i in range(n):
        first, second = ((a, ra), (b, rb)) if i % 2 == 0 else ((b, rb), (a, ra))
        first[1][i] = first[0].run(1)[0]
        second[1][i] = second[0].run(1)[0]
    return ra, a.per_call(ra), rb, b.per_call(rb)


def sample_pair(a: Target, b: Target, n: int):
    """n interleaved samples of two calibrated targets: (raw_a, net_a, raw_b, net_b)."""
    if isinstance(a, ProgramTarget):
        return _program_pair(a, b, n)
    ra, rb = u64_array(n), u64_array(n)
    rc = lib.perflab_time_pair(a.call, b.call, ptr(ra, "uint64_t[]"), ptr(rb, "uint64_t[]"), n)
    check(rc, "time pair")
    a.raise_errors()
    b.raise_errors()
    return ra, a.per_call(ra), rb, b.per_call(rb)
