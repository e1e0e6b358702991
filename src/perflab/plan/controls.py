"""What a measurement plans, stated once and light: the plan dataclasses whose fields the CLI
turns into options, and the defaults its help shows.

Nothing here imports numpy, pandas or the C core at import time, so `perflab VERB --help`
builds every option without them; the experiment plans (EnvSizePlan, ComparePlan, ...) build
on these and import what a plan's methods need only when they run.
"""

import dataclasses
import functools
import inspect
import math
import numbers
import os
import re
import reprlib
import shlex
import types
import typing
from collections import abc
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from perflab.core import constants
from perflab.errors import PerflabError, WrongType
from perflab.system import compiler, limits

# The C core counts a timeout in int64 nanoseconds, and 0 ns would mean none at all.
TIMEOUT_S = (1e-6, 1e6)
ORDERS = ("random", "sequential")
ASLR_MODES = constants.ASLR_MODES
OPT_LEVELS = compiler.OPT_LEVELS
DEFAULT_OPT = compiler.DEFAULT_OPT
RUNQ_MODES = constants.RUNQ_MODES

# What a count costs at the least, so a plan that cannot fit this machine's memory or a week is
# refused before it starts: the bounds are lower ones (a real row or run costs more), so what
# they refuse is surely absurd, typos such as --repeat 1000000000000.
PAGE = 4096  # the page every experiment that maps memory counts in
ROW_BYTES = 64  # a recorded row: a frame's 4 to 20 columns take 40 to 100 bytes a row
# A row an in-process plan records, at the run's peak: its key row, the plan's index of keys,
# its chunk, the merged rows and the saved table each hold a copy (measured: `clocks`, kept in
# memory, 90 bytes a row; `run syscalls` 230 in memory, 300 journaled).
PLANNED_ROW_BYTES = 200
# A child run's row at a sweep's peak, its plan's arrays too (measured: `sweep env-size --max 0`,
# 30,000 to 150,000 runs of /bin/true, 515 bytes a run for its 19 columns).
RUN_ROW_BYTES = 400
SPAWN_S = 50e-6  # a child run: fork (or vfork), exec and wait
CALL_S = 50e-9  # a system call or a clock read in a loop
LOOP_S = 10e-6  # a kernel loop of LOOP_FACTOR (100,000) iterations
LONGEST_S = 7 * 86400  # the time bound: a plan longer than a week is a typo, not an experiment
INT64_MAX = 2**63 - 1  # what the C core's and a frame's counters hold
PLACEHOLDERS = re.compile(r"(?<!\$)\{([A-Za-z_][A-Za-z0-9_]*)\}")  # {name}, not a shell's ${name}


def _cli(flag: str, help: str, **more: Any) -> dict:
    """Field metadata a CLI derives its option from: the flag, its help, click extras."""
    return {"cli": {"flag": flag, "help": help, **more}}


@dataclass(frozen=True)
class Controls:
    """How every child of a sweep runs; the fields every child-run plan shares.

    Subclasses add what their experiment varies; the CLI options come from the fields' metadata.
    """

    aslr: str = field(
        default="off",
        metadata=_cli("--aslr", "off: personality(ADDR_NO_RANDOMIZE) for the child only (no "
                      "root, nothing system-wide); on: force randomisation; system: leave "
                      "randomize_va_space decide.", choices=ASLR_MODES),
    )  # fmt: skip
    cpus: tuple[int, ...] = field(
        default=(),
        metadata=_cli("--cpu", "Pin the child to these CPUs (e.g. 1 or 0-1), as taskset did. "
                      "[default: the quietest usable one (online, inside the affinity mask), "
                      "said at the start]", kind="cpus"),
    )  # fmt: skip
    seed: int = field(default=0, metadata=_cli("--seed", "Seed of every random draw.", min=0))
    inherit_env: bool = field(
        default=False,
        metadata=_cli("--inherit-env", "Run with perflab's own environment instead of an empty "
                      "one (the post used env -i)."),
    )  # fmt: skip
    timeout: float = field(
        default=10.0,
        metadata=_cli("--timeout", "Seconds before a run is killed and recorded as 'timeout'.",
                      kind="seconds"),
    )  # fmt: skip
    rt: bool = field(
        default=True,
        metadata=_cli("--rt/--no-rt", "Ask SCHED_FIFO priority 1 for the child (as chrt did), "
                      "capped by RLIMIT_RTTIME; refused -> one warning, then normal priority."),
    )  # fmt: skip
    mlock: bool = field(
        default=False,
        metadata=_cli("--mlock", "Ask the probed child to mlockall() (only a child with "
                      "perflab's probe can honour it)."),
    )  # fmt: skip
    jobs: int = field(
        default=1,
        metadata=_cli("--jobs", "Children at once, each pinned to its own CPU (the --cpu list, "
                      "else the quietest usable CPUs); 0: one per CPU. Rows then carry cpu and "
                      "parallel columns, and a sequential reference slice checks the result.",
                      min=0),
    )  # fmt: skip
    reference: float | None = field(
        default=None,
        metadata=_cli("--reference", "With --jobs: the share of runs made one at a time, to "
                      "compare the parallel ones with. [default: 0.1 / the CPUs, at most 0.05: "
                      "the slice costs about a tenth of the parallel time]", type=float,
                      needs="jobs"),
    )  # fmt: skip
    allow_siblings: bool = field(
        default=False,
        metadata=_cli("--allow-siblings", "With --jobs: let two children share a core (SMT "
                      "siblings), which perflab otherwise refuses.", needs="jobs"),
    )  # fmt: skip
    # Why perflab measures on `cpus` when no --cpu chose them (running/cpuchoice.py): recorded
    # with the result, not an option, and no part of the plan a resume must repeat.
    cpu_choice: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        """Every field of the type it is declared (check_types): the Python API's keywords are
        refused as the CLI's options are, not passed on to a raw TypeError or truncated."""
        check_types(self)

    def check_controls(self) -> None:
        """Refuse controls the C core cannot honour, before anything is built or measured."""
        from perflab.system import machine

        check_seed(self.seed)
        check_timeout(self.timeout)
        check_aslr(self.aslr)
        machine.check_cpus(self.cpus)
        self.check_lanes()

    def check_lanes(self, root: str | None = None) -> None:
        """Refuse lanes that share a core, a repeated CPU, or a reference share out of range."""
        from perflab.system import machine

        if self.jobs < 0:
            raise PerflabError(f"--jobs must be 0 (one per CPU) or more, not {self.jobs}")
        if self.reference is not None and not 0 <= self.reference < 1:
            raise PerflabError(f"--reference must be at least 0 and below 1, not {self.reference}")
        check_cpu_list("--cpu", self.cpus, allow_empty=True)
        if self.jobs <= 1:
            return
        if len(self.cpus) != self.jobs:
            raise PerflabError(f"--jobs {self.jobs} needs {self.jobs} CPUs, not {len(self.cpus)}")
        machine.refuse_siblings(self.cpus, self.allow_siblings, root or machine.SYS_CPU)

    def params(self) -> dict:
        """The plan as a journal stores it: a resume must match it field for field."""
        plan = asdict(self)
        del plan["cpu_choice"]
        if self.jobs == 1:  # as before --jobs existed, so journals of that time still resume
            for name in ("jobs", "reference", "allow_siblings"):
                del plan[name]
        return plan

    def conditions(self) -> dict:
        """The run conditions every result records next to provenance.metadata()."""
        return {
            "aslr": self.aslr,
            "cpus": list(self.cpus),
            **({"cpu_choice": self.cpu_choice} if self.cpu_choice else {}),
            "seed": self.seed,
            "inherit_env": self.inherit_env,
            "rt_requested": self.rt,
            "mlock": self.mlock,
            "timeout_s": self.timeout,
        }


def flag_of(f: dataclasses.Field) -> str:
    """How an error names a plan's field: its keyword, and its CLI option where it has one
    ("max_size (--max)")."""
    cli = f.metadata.get("cli")
    return f"{f.name} ({cli['flag'].split('/')[0]})" if cli else f.name


def check_types(plan: Any) -> None:
    """Refuse a plan field whose value is not of its declared type, in the CLI's words ("'128'
    is not a whole number"); sequences become tuples, numpy scalars Python ones, and a CPU
    list given as text ("0-1,3") is read as --cpu reads it."""
    hints = typing.get_type_hints(type(plan))
    for f in dataclasses.fields(plan):
        value = getattr(plan, f.name)
        if f.name == "cpus":
            typed: Any = cpu_tuple(value, flag_of(f))
        else:
            typed = typed_value(value, hints[f.name], flag_of(f))
        if typed is not value:
            object.__setattr__(plan, f.name, typed)


def typed_value(value: Any, kind: Any, flag: str) -> Any:
    """value as `kind` (bool, int, float, str, a literal's values, X | None, tuple[X, ...],
    tuple[X, Y], a sequence, a mapping, a path, a function, any other class), else one WrongType
    naming the flag; Any, and what no isinstance can check (a protocol), pass unchecked."""
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if kind in (abc.Callable, abc.Sequence, abc.Iterable, abc.Mapping):  # bare: any items
        origin = kind
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        refusals = []
        for option in (a for a in args if a is not type(None)):
            try:
                return typed_value(value, option, flag)
            except PerflabError as exc:
                refusals.append(exc)
        paths = [e for e in refusals if str(e).endswith(" is not a path")]
        raise (paths or refusals)[0]
    if origin is typing.Literal:  # a choice of texts: the value one of them, of its type
        if not any(type(value) is type(a) and value == a for a in args):
            raise WrongType(f"{flag}: {shown(value)} is not one of {', '.join(map(str, args))}")
        return value
    if os.PathLike in (kind, origin):
        if not isinstance(value, os.PathLike):
            raise WrongType(f"{flag}: {shown(value)} is not a path")
        return value
    if origin is abc.Callable:
        if not callable(value):
            raise WrongType(f"{flag}: {shown(value)} is not a function")
        return value
    if origin in (list, abc.Sequence, abc.Iterable):  # checked, not copied: it may be filled
        _sequence(value, flag)
        if origin is not abc.Iterable and isinstance(value, abc.Iterator):  # read once
            raise WrongType(f"{flag}: {shown(value)} is read once: give a list or tuple")
        if isinstance(value, (list, tuple)) and args:
            for v in value:
                typed_value(v, args[0], flag)
        return value
    if origin in (dict, abc.Mapping):  # checked, not copied, as a sequence is
        if not isinstance(value, Mapping):
            raise WrongType(f"{flag}: {shown(value)} is not a mapping of names to values")
        for k, v in value.items() if args else ():
            typed_value(k, args[0], f"{flag} key")
            typed_value(v, args[1], f"{flag}[{shown(k)}]")
        return value
    if origin is tuple:
        _sequence(value, flag)
        items = tuple(value)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(typed_value(v, args[0], flag) for v in items)
        if len(items) != len(args):
            raise WrongType(f"{flag}: {shown(value)} is not {len(args)} values")
        return tuple(typed_value(v, a, flag) for v, a in zip(items, args, strict=True))
    if kind is bool:
        if not isinstance(value, bool):
            raise WrongType(f"{flag}: {shown(value)} is not True or False")
        return value
    if kind is int:
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise WrongType(f"{flag}: {shown(value)} is not a whole number")
        return value if type(value) is int else int(value)
    if kind is float:
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise WrongType(f"{flag}: {shown(value)} is not a number")
        return value if type(value) is float else float(value)
    if kind is str:
        if not isinstance(value, str):
            raise WrongType(f"{flag}: {shown(value)} is not a text")
        return value
    cls = origin if isinstance(origin, type) else kind  # list[X] and the like: their class
    if isinstance(cls, type) and cls is not Any and _checkable(cls) and not isinstance(value, cls):
        raise WrongType(f"{flag}: {shown(value)} is not {described(cls)}")
    return value


def _checkable(cls: type) -> bool:
    """Whether isinstance can check cls: a protocol only when it is runtime-checkable."""
    return not getattr(cls, "_is_protocol", False) or getattr(cls, "_is_runtime_protocol", False)


def described(cls: type) -> str:
    """How a refusal names a class: its own words (a class attribute `described`, saying how
    to make one), else its name ("a Recording", "an Object")."""
    said = getattr(cls, "described", None)
    if isinstance(said, str):
        return said
    return f"{'an' if cls.__name__[:1] in 'AEIOU' else 'a'} {cls.__name__}"


_REPR = reprlib.Repr()
_REPR.maxstring = _REPR.maxother = 80


def shown(value: Any) -> str:
    """A value as a refusal quotes it: its repr, cut short, on one printable line; one that
    spans lines (a frame's) or holds control characters is named by its class instead."""
    try:
        text = _REPR.repr(value)
    except Exception:  # a repr of the user's that raises: its class says enough
        text = ""
    if not text or not text.isprintable():
        return described(type(value))
    return text


def _sequence(value: Any, flag: str) -> None:
    """Refuse a value that is not a sequence, or that is one string (iterated per character)."""
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Iterable):
        one = ", not one string: ('./a.out', 'arg') for a program" if isinstance(value, str) else ""
        raise WrongType(f"{flag}: {shown(value)} is not a sequence (a list or tuple{one})")


F = typing.TypeVar("F", bound=Callable[..., Any])


def typed_arguments(fn: F) -> F:
    """An API function whose arguments are checked against their annotations (typed_value)
    before it runs: pages='1' is the CLI's one line, not a TypeError from inside."""
    return _checked(fn, None)


def plan_arguments(plan: type, but: Sequence[str] = ()) -> Callable[[F], F]:
    """typed_arguments for a function whose **params are the fields of `plan` (a dataclass,
    whose own check types their values) but those it sets itself: a keyword that is none of
    them is one line, not the dataclass's TypeError."""
    return lambda fn: _checked(fn, plan, but)


def _checked(fn: F, plan: type | None, but: Sequence[str] = ()) -> F:
    """fn, its arguments checked first (typed_arguments), its **params named by plan's fields."""
    signature = inspect.signature(fn)
    params = signature.parameters
    var = {p.name for p in params.values() if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}
    fields = []
    if plan is not None:
        fields = [f.name for f in dataclasses.fields(plan) if f.init and f.name not in but]

    @functools.cache
    def kinds() -> dict[str, Any]:
        """The annotations, read at the first call (they may name what loads pandas)."""
        found = {}
        for name, param in params.items():
            kind = param.annotation
            if isinstance(kind, str):
                try:  # as typing.get_type_hints would, one at a time
                    kind = eval(kind, fn.__globals__)
                except Exception:  # a name only type checkers import: left unchecked
                    continue
            if kind is not inspect.Parameter.empty:
                found[name] = kind
        return found

    @functools.wraps(fn)
    def checked(*args: Any, **kwargs: Any) -> Any:
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError as exc:  # an unknown keyword, a missing argument
            raise WrongType(f"{fn.__name__}(): {exc}") from None
        for name, value in bound.arguments.items():
            if name not in kinds():
                continue
            kind = kinds()[name]
            if name not in var:
                bound.arguments[name] = typed_value(value, kind, name)
            elif isinstance(value, dict):
                bound.arguments[name] = {k: typed_value(v, kind, k) for k, v in value.items()}
            else:
                bound.arguments[name] = tuple(typed_value(v, kind, name) for v in value)
        other = sorted(set(bound.kwargs) - (set(params) - var) - set(fields))
        if plan is not None and other:
            raise WrongType(f"{fn.__name__}(): {', '.join(other)} is none of its keywords nor "
                            f"a field of {plan.__name__} ({', '.join(fields)})")  # fmt: skip
        return fn(*bound.args, **bound.kwargs)

    return typing.cast(F, checked)


def cpu_tuple(value: Any, flag: str = "cpus (--cpu)") -> tuple[int, ...]:
    """CPUs as a tuple of numbers: a sequence of them, or a list such as "0-1,3" read as --cpu
    reads it; anything else one line in the CLI's words."""
    from perflab.system import machine

    if isinstance(value, str):
        try:
            return tuple(machine.parse_cpu_list(value))
        except ValueError:
            raise WrongType(f"{flag}: {value!r} is not a CPU list such as 1 or 0-3,6") from None
    return typed_value(value, tuple[int, ...], flag)


def order_field() -> Any:
    """The `order` field of a plan that shuffles its runs."""
    return field(
        default="random",
        metadata=_cli("--order", "random keeps drift over time from posing as an effect.",
                      choices=ORDERS),
    )  # fmt: skip


def check_order(order: str) -> None:
    if order not in ORDERS:
        raise PerflabError(f"order must be random or sequential, not {order!r}")


def check_repeat(repeat: int) -> None:
    if repeat < 1:
        raise PerflabError(f"--repeat must be at least 1, not {repeat}")


def check_aslr(mode: str) -> None:
    """Refuse an ASLR mode the C core does not know (click's --aslr choices parse the same)."""
    if mode not in ASLR_MODES:
        raise PerflabError(f"--aslr must be one of {', '.join(ASLR_MODES)}, not {mode!r}")


def check_timeout(seconds: float) -> None:
    """Refuse a timeout the C core cannot honour (nan, inf, 0, or beyond its int64 ns)."""
    lo, hi = TIMEOUT_S
    if not lo <= seconds <= hi:  # also refuses nan
        raise PerflabError(f"--timeout must be {lo:g} to {hi:g} seconds, not {seconds}")


def check_iterations(n: int) -> None:
    """Refuse a count the probe's repeat loop cannot report: each run's records are read into
    a fixed array of MAX_ITERATIONS."""
    most = constants.MAX_ITERATIONS
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= most:
        raise PerflabError(f"--iterations must be 1 to {most}, not {n}")


def check_cpu_list(flag: str, cpus: Sequence[int], allow_empty: bool = False) -> None:
    """Refuse a CPU list that names no CPU or one CPU twice: a pinning asked for and not made."""
    if not cpus and not allow_empty:
        raise PerflabError(f"{flag} names no CPU: give some (e.g. 1 or 0-1), or leave {flag} out")
    twice = sorted({c for c in cpus if list(cpus).count(c) > 1})
    if twice:
        listed = ",".join(map(str, cpus))
        raise PerflabError(f"{flag} {listed} names CPU {', '.join(map(str, twice))} twice")


def most_threads() -> tuple[int, str]:
    """The most threads a count may ask for, and why: what this kernel allows at once."""
    try:
        with open("/proc/sys/kernel/threads-max") as f:
            most = int(f.read())
    except (OSError, ValueError):
        most = 2**22  # PID_MAX_LIMIT: no kernel has more thread ids
    return most, "kernel.threads-max, the threads this kernel allows at once"


def counter_bound() -> tuple[int, str]:
    """What any count may reach, and why: what the C core's and a frame's counters hold."""
    return INT64_MAX, "a 64-bit counter holds"


def check_count(
    flag: str,
    value: int,
    least: int | None = 1,
    each_bytes: float = 0,
    each_s: float = 0,
    what: str = "its rows",
    most: tuple[int, str] | None = None,
) -> int:
    """Refuse a count below `least`, or one whose `each_bytes` and `each_s` per unit would need
    more than this machine's memory or a week, or that `most` cannot carry: one line that names
    the bound, the value it stops at included (most: 64-bit counters when None)."""
    name = f"{flag} {value}".strip()
    if least is not None and value < least:
        raise PerflabError(f"{flag} must be at least {least}, not {value}".strip())
    if each_bytes:
        check_memory(name, value * each_bytes, what, each_bytes)
    if value * each_s > LONGEST_S:
        raise PerflabError(
            f"{name} would take at least {_duration(value * each_s)} ({_duration(each_s)} each); "
            f"perflab plans at most a week (at most {count_text(LONGEST_S // each_s)})"
        )
    limit, why = most or counter_bound()
    if value > limit:
        raise PerflabError(f"{name} is more than {why} ({count_text(limit)})")
    return value


def check_memory(name: str, nbytes: float, what: str, each_bytes: float) -> None:
    """Refuse what needs more than the memory available, or than ulimit -v or -d leaves
    above what perflab holds: one line naming that bound and the count it stops at."""
    room = limits.memory_room()
    if nbytes <= room.nbytes:
        return
    if room.limit is None:
        bound = f"this machine has {size_text(room.nbytes)} available"
    else:
        bound = (f"{room.bound} leaves {size_text(room.nbytes)} (it is {size_text(room.limit)}; "
                 f"perflab holds {size_text(room.held)})")  # fmt: skip
    raise PerflabError(
        f"{name} would need {size_text(nbytes)} for {what}; {bound} "
        f"(at most {count_text(room.nbytes // each_bytes)})"
    )


def check_rows(
    factors: dict[str, int],
    per: int = 1,
    each_s: float = SPAWN_S,
    row_bytes: float = RUN_ROW_BYTES,
) -> None:
    """Refuse a plan whose rows (one a run: the product of factors and per) would not fit the
    memory it may take or a week, named by its largest factor, with that factor's bound."""
    flag = max(factors, key=lambda k: factors[k])
    rest = per * math.prod(v for k, v in factors.items() if k != flag)
    rows = count_text(factors[flag] * rest)
    check_count(flag, factors[flag], None, rest * row_bytes, rest * each_s, f"its {rows} rows")


def size_text(nbytes: float) -> str:
    """Bytes in binary units, as free(1): '24 GiB', '7.3 TiB'."""
    units = ("B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB")
    k = min(int(math.log(max(nbytes, 1), 1024)), len(units) - 1)
    x = nbytes / 1024**k
    return f"{x:.2g} {units[k]}" if x < 10 else f"{x:,.0f} {units[k]}"


def count_text(n: float) -> str:
    """A number as people read it: 12,345, 2.5 or 3.1e9."""
    if n >= 1e6:
        return f"{n:.2g}".replace("e+0", "e").replace("e+", "e")
    return f"{n:,.0f}" if n >= 100 or n == int(n) else f"{n:.3g}"


def _duration(seconds: float) -> str:
    """A duration in the largest unit it fills: '3.2e6 years', '2.5 days', '40 µs'."""
    for unit, length in (("years", 365 * 86400), ("days", 86400), ("hours", 3600), ("s", 1)):
        if seconds >= length:
            return f"{count_text(seconds / length)} {unit}"
    return f"{seconds * 1e6:g} µs"


def words(text: str, what: str) -> list[str]:
    """A command line split as a shell would (never run by one); one line when it cannot be."""
    try:
        return shlex.split(text)
    except ValueError as exc:
        raise PerflabError(f"{what} {text!r}: {exc}".lstrip()) from None


def check_placeholders(args: Iterable[str], known: Sequence[str], what: str) -> None:
    """Refuse a {name} perflab would not replace: a typo such as {thread} would reach the
    program as it is and the rows would claim what never ran."""
    for arg in args:
        for name in PLACEHOLDERS.findall(arg):
            if name not in known:
                allowed = " and ".join(f"{{{k}}}" for k in known)
                where = f"{what}: " if what else ""
                raise PerflabError(
                    f"{where}unknown placeholder {{{name}}} in {arg!r}; perflab replaces only "
                    f"{allowed}"
                )


# The run controls bisect, track and history pass to each comparison's children.
COMMIT_CONTROLS = ("cpus", "timeout", "rt")


def commit_controls(given: Mapping[str, Any] | None) -> dict[str, Any]:
    """The controls a verb on commits gives its comparisons (COMMIT_CONTROLS), checked before
    anything is built: one line for a name that is not one or a value out of range."""
    if given is not None and not isinstance(given, Mapping):
        raise WrongType(f"controls: {given!r} is not a mapping of names to values")
    given = {k: v for k, v in (given or {}).items() if v is not None}  # None: not given
    other = sorted(set(given) - set(COMMIT_CONTROLS))
    if other:
        raise PerflabError(f"controls: {', '.join(other)} is not one of "
                           f"{', '.join(COMMIT_CONTROLS)}")  # fmt: skip
    typed = {name: typed_value(value, _TYPES[name], name) for name, value in given.items()}
    Controls(**typed).check_controls()
    return typed


_TYPES: dict[str, Any] = {"cpus": tuple[int, ...], "timeout": float, "rt": bool}


SEED_MAX = 2**32 - 1  # numpy's and the CLI's bound


def check_seed(seed: int, flag: str = "--seed") -> None:
    """A seed numpy can draw from: 0 to SEED_MAX, one line otherwise."""
    if not 0 <= seed <= SEED_MAX:
        raise PerflabError(f"{flag} must be 0 to {SEED_MAX}, not {seed}")
