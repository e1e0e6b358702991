"""What a perf assertion can time: Python callables, C functions, and programs run as children.

A callable or C function is timed as samples of `calls` back-to-back calls made by
csrc/timing.c through a function pointer (a cffi callback for a Python callable), so Python
never sits between two timestamps. The batch size is calibrated so a sample dwarfs the timer's
own cost, and the cost of calling an empty function through the same path is measured and
subtracted: values are net ticks per call. A program is one controlled child run per sample
(running/spawn.py: exactly the given environment, ASLR off, pinned), timed by its probe when it
has one, else from clone to wait4.
"""

import dataclasses
import functools
import inspect
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from perflab.core import bindings
from perflab.errors import PerflabError, Stopped
from perflab.running import spawn
from perflab.system.timer import STEP_READS as STEP_READS
from perflab.system.timer import timer_overhead as timer_overhead
from perflab.system.timer import timer_reads as timer_reads
from perflab.system.timer import timer_step as timer_step

# A sample should last about this many ticks (~10 us at 2.5 GHz): ~700 times the timer's
# cost, short enough that few samples are hit by an interrupt; and at least STEPS_PER_SAMPLE
# timer steps, so one step is at most 0.1 % of a sample on a coarse counter.
SAMPLE_TICKS = 25_000
STEPS_PER_SAMPLE = 1000
MAX_SAMPLE_TICKS = 64 * SAMPLE_TICKS
MAX_CALLS = 1 << 24
OVERHEAD_SAMPLES = 101


def sample_ticks_default() -> int:
    """How long a sample should last: SAMPLE_TICKS, or STEPS_PER_SAMPLE steps if longer."""
    return max(SAMPLE_TICKS, STEPS_PER_SAMPLE * timer_step())


@dataclass(eq=False)
class CallTarget:
    """A function the core calls `calls` times per sample; `overhead` is its empty call's cost.

    `code` is the address of a C target's code (None for Python): two C targets at different
    addresses are distinct functions, whose speeds also depend on where their code lies;
    `function` is a Python target's callable, whose object's placement matters the same way.
    """

    name: str
    shape: tuple[str, bool]
    call: bindings.Call = field(repr=False)
    empty: bindings.Call = field(repr=False)
    errors: list[BaseException] = field(default_factory=list, repr=False)
    code: int | None = None
    function: Callable[[], object] | None = field(default=None, repr=False)
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


def _noop() -> None:
    return None


def python_callable(fn: Callable[[], object], name: str | None = None) -> CallTarget:
    """A Python callable, called from C through the shared entry (its return value dropped)."""
    if not callable(fn):
        raise PerflabError(f"{fn!r} is not callable")
    said = name or getattr(fn, "__name__", None) or repr(fn)
    if inspect.iscoroutinefunction(fn) or inspect.isasyncgenfunction(fn):
        raise _asynchronous(said)
    errors: list[BaseException] = []
    made = fn()  # once from Python first: a broken workload fails here with its own traceback
    if inspect.isawaitable(made):  # an object whose __call__ is async, a lambda making one
        if inspect.iscoroutine(made):
            made.close()  # never awaited, on purpose: no warning about it
        raise _asynchronous(said)
    return CallTarget(
        name=said,
        shape=("python", False),
        call=bindings.python_call(bindings.PyEntry(fn, errors)),
        empty=bindings.python_call(bindings.PyEntry(_noop, errors)),
        errors=errors,
        function=fn,
    )


def _asynchronous(name: str) -> PerflabError:
    """The refusal of an async target: calling it makes a coroutine and runs none of its body,
    so its time would be the making's."""
    return PerflabError(
        f"{name} is asynchronous: calling it only makes a coroutine, so perflab would time that "
        "and none of its work; give a plain callable that runs it, e.g. "
        "lambda: asyncio.run(target())"
    )


def c_function(fnptr: Any, arg: Any = None, name: str | None = None) -> CallTarget:
    """A C function pointer from any cffi FFI: `void (*)(void)`, or `void (*)(void *)` with arg."""
    if not bindings.is_c_pointer(fnptr):
        raise PerflabError(
            f"{fnptr!r} is not a cffi function pointer; use ffi.addressof(lib, 'name') "
            "(API mode) or lib.name (ABI mode)"
        )
    is_function, cname = bindings.c_pointer_kind(fnptr)
    if not is_function:
        raise PerflabError(f"{cname} is not a function pointer")
    code = bindings.address(fnptr)
    return CallTarget(
        name=name or f"C function at {code:#x}",
        shape=("c", arg is None),
        call=bindings.c_call(fnptr, arg),
        empty=bindings.empty_call(with_arg=arg is not None),
        code=code,
    )


def spin(iterations: int, name: str | None = None) -> CallTarget:
    """The core's spin loop: a C workload whose cost grows linearly with `iterations`."""
    if iterations < 0:
        raise PerflabError(f"spin iterations must be >= 0, not {iterations}")
    fnptr, arg = bindings.spin_call(iterations)
    return c_function(fnptr, arg=arg, name=name or f"spin({iterations})")


@dataclass(eq=False)
class ProgramTarget:
    """A program run once per sample as a controlled child; `probe` once a run showed its probe.

    With `lanes` (two or more CPUs) its runs are made one child per lane CPU at a time.
    """

    name: str
    argv: tuple[str, ...]
    env: dict[str, str] | None
    options: spawn.SpawnOptions = field(repr=False)
    pin: bool = False
    probe: bool = False
    calls: int = 1
    overhead: float = 0.0
    lanes: tuple[int, ...] = ()

    def run(self, n: int) -> np.ndarray:
        """n runs: ticks of the probed region (timer cost removed) or of the whole child."""
        return self.run_tagged(n)[0]

    def run_tagged(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        """n runs: their ticks and the CPU each ran on (-1: not pinned to one)."""
        if self.lanes:
            return _lane_ticks([self], np.zeros(n, np.int32))[0]
        out = np.empty(n, dtype=np.uint64)
        for i in range(n):
            out[i] = self._ticks(spawn.run(self.argv, self.env, self.options))
        return out, np.full(n, self.cpu, np.int16)

    @property
    def cpu(self) -> int:
        """The one CPU its sequential runs are pinned to, else -1."""
        return self.options.cpus[0] if len(self.options.cpus) == 1 else -1

    def _ticks(self, r: Any) -> int:
        _check_run(self.name, r)
        if bindings.run_has_probe(int(r["flags"])) != self.probe:
            raise PerflabError(f"{self.name}: its probe record came and went between runs")
        return int(r["probe_ticks"]) if self.probe else int(r["outer_ticks"])

    def per_call(self, ticks: np.ndarray) -> np.ndarray:
        return ticks.astype(float) - (timer_overhead() if self.probe else 0)

    @property
    def resolution(self) -> float:
        return float(timer_step())


def _check_run(name: str, r: Any) -> None:
    """Refuse a child run that did not end normally, saying how it ended."""
    status = spawn.STATUS.get(int(r["status"]), str(r["status"]))
    if status == "ok":
        return
    if status == "exit":
        why = f"exit code {r['exit_code']}"
    elif status == "crash":
        why = f"killed by signal {r['signal']}"
    elif r["child_errno"]:
        why = f"{status}: {spawn.describe_errno(int(r['child_errno']))}"
    else:
        why = status
    raise PerflabError(f"{name}: run failed: {why}")


def _lane_ticks(
    targets: Sequence[ProgramTarget], prog: np.ndarray
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Runs of targets[prog[i]] in one parallel batch on their lanes: (ticks, cpu) per target,
    each in the order its runs were planned."""
    first = targets[0]
    if any((t.lanes, t.env, t.options) != (first.lanes, first.env, first.options)
           for t in targets[1:]):  # fmt: skip
        raise PerflabError(
            "programs compared side by side (jobs) run in one batch: give them the same jobs, "
            "CPUs, environment and options"
        )
    lanes = spawn.ParallelOptions(**{**vars(first.options), "cpus": first.lanes})
    out = spawn.run_batch([t.argv for t in targets], prog, None, "A", first.env, lanes)
    if out.size < prog.size:
        raise Stopped
    ticks = np.array([targets[int(r["prog"])]._ticks(r) for r in out], dtype=np.uint64)
    return [(ticks[prog == k], out["cpu"][prog == k].astype(np.int16))
            for k in range(len(targets))]  # fmt: skip


def program_lanes(
    jobs: int, cpus: Sequence[int] | None, allow_siblings: bool = False
) -> tuple[int, ...]:
    """The lane CPUs of a program run `jobs` children at once (() for one at a time)."""
    if jobs == 1:
        return ()
    from perflab.running import lanes  # builds on pandas: only for programs run side by side
    from perflab.system import machine

    chosen = lanes.lane_cpus(jobs, cpus)
    machine.refuse_siblings(chosen, allow_siblings)
    return chosen


def program(
    argv: Sequence[str],
    env: Mapping[str, str] | None = None,
    cpus: Sequence[int] | None = None,
    aslr: str = "off",
    rt: bool = False,
    timeout: float = 60.0,
    name: str | None = None,
    jobs: int = 1,
    allow_siblings: bool = False,
) -> ProgramTarget:
    """A program run with exactly argv and env (None: empty), ASLR off, pinned.

    cpus=None pins both programs of a comparison to the CPU this process is on when the
    comparison starts: the scheduler put it where it could run, and it sleeps in wait4 while
    the child runs. rt=True asks for SCHED_FIFO (running/spawn.py; refused without privileges,
    then the runs are ordinary) so other tasks on that CPU cannot preempt the child.

    jobs=N (0: one per CPU) runs N children at once, each pinned to its own CPU: the `cpus`
    list, else the last N usable CPUs; SMT siblings are refused unless allow_siblings. Each
    sample then records its CPU, and two programs compared run in one batch (same jobs, CPUs,
    environment and options).
    """
    args = [str(a) for a in argv]
    if not args:
        raise PerflabError("program: empty argv")
    args[0] = spawn.check_program(args[0])
    lanes = program_lanes(jobs, cpus, allow_siblings)
    options = spawn.SpawnOptions(
        aslr=aslr,
        cpus=lanes or tuple(cpus or ()),
        rt=rt,
        timeout=timeout,
        stdout=_devnull(),
        stderr=_devnull(),
    )
    label = name or " ".join([os.path.basename(args[0]), *args[1:]])
    return ProgramTarget(name=label, argv=tuple(args), env=dict(env or {}), options=options,
                         pin=cpus is None and not lanes, lanes=lanes)  # fmt: skip


def current_cpu() -> int:
    """The CPU this process runs on now (field 39 of /proc/self/stat)."""
    with open("/proc/self/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[36])


@functools.cache
def _devnull() -> int:
    """One fd on /dev/null for every child's stdout/stderr: a test's output stays readable."""
    return os.open(os.devnull, os.O_WRONLY | os.O_CLOEXEC)


Target = CallTarget | ProgramTarget


def as_target(obj: Any, name: str | None = None) -> Target:
    """Accept a target, a cffi function pointer or a Python callable."""
    if isinstance(obj, CallTarget | ProgramTarget):
        return obj
    if bindings.is_c_pointer(obj):
        return c_function(obj, name=name)
    return python_callable(obj, name=name)


def distinct_code(*targets: Target) -> bool:
    """Whether the targets are C functions at different addresses: distinct code whose
    relative speed also depends on where each lies (running/placement.py measures how much)."""
    codes = [getattr(t, "code", None) for t in targets]
    return None not in codes and len(set(codes)) > 1


def distinct_callables(*targets: Target) -> bool:
    """Whether the targets are distinct Python callables (objects), whose relative speed also
    depends on where each object lies (running/placement.py measures how much)."""
    functions = [getattr(t, "function", None) for t in targets]
    return None not in functions and len({id(f) for f in functions}) > 1


def _needed_calls(target: CallTarget, sample_ticks: int) -> tuple[int, float]:
    """Power-of-two calls per sample reaching sample_ticks, and the raw ticks per call seen."""
    calls = 1
    while True:
        target.call.calls = calls
        best = int(target.call.time(3).min())
        target.raise_errors()
        if best >= sample_ticks or calls >= MAX_CALLS:
            return calls, best / calls
        calls *= 2


def calibrate(*targets: Target, sample_ticks: int | None = None) -> None:
    """Choose calls per sample for targets compared together, and measure their empty calls.

    Targets share one batch size (the cheapest target's) unless that would make a sample of a
    costlier one longer than MAX_SAMPLE_TICKS, and targets called through the same path at the
    same batch size share one overhead estimate: two identical workloads are then treated
    identically, so noise in the overhead cannot fake a difference between them.
    """
    calls_targets = [t for t in targets if isinstance(t, CallTarget)]
    if len(calls_targets) < len(targets):
        _calibrate_programs(targets)
        return
    sample_ticks = sample_ticks or sample_ticks_default()
    seen = [_needed_calls(t, sample_ticks) for t in calls_targets]
    common = max(calls for calls, _ in seen)
    overheads: dict[tuple[tuple[str, bool], int], float] = {}
    for target, (_, per_call) in zip(calls_targets, seen, strict=True):
        calls = common
        while calls > 1 and calls * per_call > max(MAX_SAMPLE_TICKS, 64 * sample_ticks):
            calls //= 2
        key = (target.shape, calls)
        if key not in overheads:
            target.empty.calls = calls
            empty = target.empty.time(OVERHEAD_SAMPLES).astype(float)
            overheads[key] = float(np.median((empty - timer_overhead()) / calls))
        target.calls = calls
        target.call.calls = calls
        target.overhead = overheads[key]


def _calibrate_programs(targets: Sequence[Target]) -> None:
    """One warm-up run each (fills the page cache, shows whether the program has a probe)."""
    programs = [t for t in targets if isinstance(t, ProgramTarget)]
    if len(programs) < len(targets):
        raise PerflabError("compare a program with a program, not with an in-process function")
    cpu = current_cpu()
    for t in programs:
        if t.pin:
            t.options = dataclasses.replace(t.options, cpus=(cpu,))
        r = spawn.run(t.argv, t.env, t.options)
        _check_run(t.name, r)
        t.probe = bindings.run_has_probe(int(r["flags"]))
    if len({t.probe for t in programs}) > 1:
        raise PerflabError(
            "one program reports a probe record and the other does not: their ticks would "
            "time different things"
        )


NOT_PINNED = -1  # the CPU of a sample made where the scheduler chose


def sample(target: Target, n: int) -> tuple[np.ndarray, np.ndarray]:
    """n samples of a calibrated target: (raw ticks per sample, net ticks per call)."""
    return sample_tagged(target, n)[:2]


def sample_tagged(target: Target, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """n samples of a calibrated target: raw ticks, net ticks per call, and each one's CPU."""
    if isinstance(target, ProgramTarget):
        raw, cpu = target.run_tagged(n)
        return raw, target.per_call(raw), cpu
    raw = target.call.time(n)
    target.raise_errors()
    return raw, target.per_call(raw), np.full(n, NOT_PINNED, np.int16)


Pair = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]
TaggedPair = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def _program_pair(a: ProgramTarget, b: ProgramTarget, n: int) -> TaggedPair:
    """Runs interleaved a b, b a, ... like perflab_time_pair; each run is timed in C. Side
    by side (lanes), the lanes take the runs in that order from one batch."""
    if a.lanes or b.lanes:
        prog = np.array([0, 1, 1, 0], np.int32)[np.arange(2 * n) % 4]
        (ra, ca), (rb, cb) = _lane_ticks([a, b], prog)
        return ra, a.per_call(ra), ca, rb, b.per_call(rb), cb
    ra, rb = np.empty(n, dtype=np.uint64), np.empty(n, dtype=np.uint64)
    for i in range(n):
        first, second = ((a, ra), (b, rb)) if i % 2 == 0 else ((b, rb), (a, ra))
        first[1][i] = first[0].run(1)[0]
        second[1][i] = second[0].run(1)[0]
    return ra, a.per_call(ra), np.full(n, a.cpu, np.int16), rb, b.per_call(rb), \
        np.full(n, b.cpu, np.int16)  # fmt: skip


def sample_pair(a: Target, b: Target, n: int) -> Pair:
    """n interleaved samples of two calibrated targets: (raw_a, net_a, raw_b, net_b)."""
    ra, na, _, rb, nb, _ = sample_pair_tagged(a, b, n)
    return ra, na, rb, nb


def sample_pair_tagged(a: Target, b: Target, n: int) -> TaggedPair:
    """sample_pair with each sample's CPU: (raw_a, net_a, cpu_a, raw_b, net_b, cpu_b)."""
    if isinstance(a, ProgramTarget) and isinstance(b, ProgramTarget):
        return _program_pair(a, b, n)
    if not (isinstance(a, CallTarget) and isinstance(b, CallTarget)):
        raise PerflabError("compare a program with a program, not with an in-process function")
    ra, rb = bindings.time_pair(a.call, b.call, n)
    a.raise_errors()
    b.raise_errors()
    cpu = np.full(n, NOT_PINNED, np.int16)
    return ra, a.per_call(ra), cpu, rb, b.per_call(rb), cpu
