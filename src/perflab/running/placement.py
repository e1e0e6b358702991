"""The placement floor: how much identical C code at different addresses differs on this machine.

Two distinct C functions differ in speed by where their code lies as well as by what it does
(fetch blocks, branch predictors and cache sets see addresses), and such a difference holds for
whole assertions and across fresh processes, so no run count averages it away. Its size is a
property of the CPU (0.3 % on one, 7 % on another), so it is measured here, not assumed: twelve
identical loops (workloads/placement_twins.c: eight in a page of their own each at another cache
line and offset, four packed in one page as a library's functions are), built with the system
compiler, every pair timed as an assertion times two
targets (calibrated together, interleaved runs; twice, in both slots), and the floor is the
farthest from 1 any pair's 95 % ratio interval reaches. The effect of one placement also depends
on where the library is mapped (the same pair read 1.0040 in one mapping and 1.0000 in another
on an EPYC guest, and a floor of 0.28 % from one mapping let two twins 0.40 % apart claim 9 of
20 times), so the library is loaded as COPIES separate files, each mapped at its own addresses,
and the floor is the farthest over every copy's pairs. On some CPUs identical code at two
addresses also runs far apart for a few milliseconds at a time, one copy then the other (on a
Zen 5 guest 3-16 % of timings as short as an assertion's first look lay wholly beyond 5 % apart,
up to 1.5x, while 1000 interleaved runs read them within 2 % and the same function timed against
itself never strayed): a first look that falls in such a spell claims. So every pair is timed
again, in both slots, in timings that short, and the floor reaches as far as any of their
intervals lies from 1 as a whole. Measured once per machine and C core (a few seconds) and
cached beside the build cache (system/placement_floor.py); assertions widen a ratio between
distinct C functions by it.

Distinct Python callables have a floor of their own: the interpreter runs identical code
slower or faster by where its function object lies (B/A of two such objects read 1.007 in
Debian's Python 3.11.2, and 0.5 % apart pinned to a busy CPU was enough for 10 claims in 30 at
confidence 0.9). It depends on the interpreter, not the C core, so it is measured once per
process (a quarter of a second here), on function objects of one loop timed in pairs the same
way.
"""

import dataclasses
import datetime as dt
import itertools
import math
import platform
import shutil
import tempfile
import time
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import cffi

from perflab.analysis import stats
from perflab.errors import PerflabError
from perflab.running import timing
from perflab.system import compiler, placement_floor

SOURCE = compiler.WORKLOADS / "placement_twins.c"
TWINS = tuple(f"placed_{i}" for i in range(12))
# Each twin exactly where the source's directives put it; the loops padded as the compiler pads.
FLAGS = ("-shared", "-fPIC", "-fno-toplevel-reorder", "-falign-functions=1")
RUNS = 1000
COPIES = 3  # mappings of the twins' library, each timed pair by pair
LEVEL = 0.95
# Each pair is timed twice, the second time in the other slots and a second or so later: the
# effect comes and goes with the state of the machine (a run of 28 pairs may miss it).
# A timing the machine disturbed (preempted, its CPU stolen) widens the interval, which
# placement does not: an interval wider than WIDE is timed again, up to ATTEMPTS times, and
# the narrowest one counts (pinned to a busy CPU one reached 0.70-1.29).
WIDE = 0.01
ATTEMPTS = 4
SHORT_RUNS = 20  # an assertion's first look (assertions/claims.py takes it from here)
SHORT_LEVEL = 0.99  # about a first look's level at the default confidence and budget
APART = 0.05
PYTHON_TWINS = 4  # function objects of one loop: 6 pairs, each timed in both slots
PYTHON_RUNS = 400

_python_floor: placement_floor.PlacementFloor | None = None


def _width(lo: float, hi: float) -> float:
    """hi/lo, the interval's width as a ratio; unbounded when lo is not above 0."""
    return hi / lo if lo > 0 else math.inf


def _timed(
    first: Callable[[], timing.CallTarget], second: Callable[[], timing.CallTarget], runs: int
) -> tuple[float, float, float]:
    """second/first's ratio of medians and its interval: the narrowest of up to ATTEMPTS."""
    best = (1.0, 0.0, math.inf)
    for _ in range(ATTEMPTS):
        a, b = first(), second()
        timing.calibrate(a, b)
        _, net_a, _, net_b = timing.sample_pair(a, b, runs)
        got = stats.ratio_order_interval(net_a, net_b, LEVEL, (a.resolution, b.resolution))
        if _width(*got[1:]) < _width(*best[1:]):
            best = got
        if _width(*best[1:]) <= 1 + WIDE:
            break
    if not math.isfinite(_width(*best[1:])):
        raise PerflabError(
            f"placement floor: {b.name}/{a.name} has no bounded ratio interval: the twins "
            "could not be timed here"
        )
    return best


def _slots(
    copies: list[dict[str, Callable[[], timing.CallTarget]]],
) -> Iterator[tuple[dict[str, Callable[[], timing.CallTarget]], str, str, str]]:
    """Every pair of twins of each copy in both slots: (the copy's twins, first, second, where)."""
    pairs = list(itertools.combinations(copies[0], 2))
    for k, twins in enumerate(copies):
        where = f" (copy {k + 1})" if len(copies) > 1 else ""
        for first, second in pairs + [(b, a) for a, b in reversed(pairs)]:
            yield twins, first, second, where


def _farthest(
    copies: list[dict[str, Callable[[], timing.CallTarget]]], runs: int, compiler: str, kind: str
) -> placement_floor.PlacementFloor:
    """Every pair of twins of each copy timed in both slots; the floor is the farthest from 1
    any pair's interval reaches (that pair named), with how many timings stayed disturbed."""
    t0 = time.monotonic()
    pairs = len(copies[0]) * (len(copies[0]) - 1) // 2
    reach, worst, disturbed = -1.0, "", 0
    for twins, first, second, where in _slots(copies):
        ratio, lo, hi = _timed(twins[first], twins[second], runs)
        disturbed += _width(lo, hi) > 1 + WIDE
        far = max(-math.log(lo), math.log(hi))
        if far > reach:
            reach = far
            worst = f"{second}/{first} {ratio:.4f} [{lo:.4f}, {hi:.4f}]{where}"
    return placement_floor.PlacementFloor(
        share=math.expm1(max(reach, 0.0)),
        placements=len(copies[0]),
        copies=len(copies),
        pairs=pairs,
        runs=runs,
        worst=worst,
        disturbed=disturbed,
        measured_at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        seconds=round(time.monotonic() - t0, 3),
        timer_step_ticks=timing.timer_step(),
        compiler=compiler,
        short_runs=0,
        short_timings=0,
        short_apart=0,
        kind=kind,
    )


def _short(
    copies: list[dict[str, Callable[[], timing.CallTarget]]],
    farthest: placement_floor.PlacementFloor,
) -> placement_floor.PlacementFloor:
    """`farthest` reaching as far as a timing of every pair in both slots, SHORT_RUNS runs
    each, lies from 1 as a whole (the interval's near end): spells a long timing averages away."""
    t0 = time.monotonic()
    reach, worst, timings, apart = math.log1p(farthest.share), farthest.worst, 0, 0
    for twins, first, second, where in _slots(copies):
        a, b = twins[first](), twins[second]()
        timing.calibrate(a, b)
        _, net_a, _, net_b = timing.sample_pair(a, b, SHORT_RUNS)
        resolutions = (a.resolution, b.resolution)
        ratio, lo, hi = stats.ratio_order_interval(net_a, net_b, SHORT_LEVEL, resolutions)
        timings += 1
        near = max(math.log(lo) if lo > 0 else 0.0, -math.log(hi) if hi > 0 else 0.0)
        apart += near > math.log1p(APART)
        if near > reach:
            reach = near
            worst = f"{second}/{first} {ratio:.4f} [{lo:.4f}, {hi:.4f}] in {SHORT_RUNS} runs{where}"
    return dataclasses.replace(
        farthest,
        share=math.expm1(reach),
        worst=worst,
        seconds=round(farthest.seconds + time.monotonic() - t0, 3),
        short_runs=SHORT_RUNS,
        short_timings=timings,
        short_apart=apart,
    )


def measure(runs: int = RUNS) -> placement_floor.PlacementFloor:
    """Time every pair of the twins now and say how far apart identical code ran."""
    try:
        built = compiler.build(SOURCE, opt="2", static=False, extra=FLAGS)
    except PerflabError as exc:
        raise PerflabError(
            f"the placement floor could not be measured ({exc}); assertions between distinct "
            "C functions take placement_floor= instead"
        ) from None
    ffi = cffi.FFI()
    ffi.cdef(" ".join(f"void {name}(void);" for name in TWINS))
    copies = []
    with tempfile.TemporaryDirectory(prefix="perflab-twins-") as tmp:
        for k in range(COPIES):  # a file each: the same file would be mapped only once
            path = Path(tmp) / f"twins-{k}.so"
            shutil.copyfile(built.path, path)
            lib = ffi.dlopen(str(path))  # mapped now: the file may go
            copies.append({name: _c_twin(lib, name) for name in TWINS})
    return _short(copies, _farthest(copies, runs, built.compiler, "c"))


def floor(remeasure: bool = False) -> tuple[placement_floor.PlacementFloor, bool]:
    """This machine's floor and whether it came from the cache; measured and cached when none
    is cached, the cached one is unreadable or another machine's, or when asked to."""
    cached = None if remeasure else placement_floor.cached_placement_floor()
    if cached is not None:
        return cached, True
    measured = measure()
    placement_floor.store_placement_floor(measured)
    return measured, False


def _c_twin(lib: Any, name: str) -> Callable[[], timing.CallTarget]:
    return lambda: timing.c_function(getattr(lib, name), name=name)


def _loop() -> int:
    """The Python twins' code: a few microseconds of interpreted work."""
    return sum(range(200))


def _python_twin(name: str) -> Callable[[], timing.CallTarget]:
    """A function object of its own running _loop's code (one object, however often timed)."""
    fn = types.FunctionType(_loop.__code__, _loop.__globals__, name)
    return lambda: timing.python_callable(fn, name)


def python_floor() -> tuple[placement_floor.PlacementFloor, bool]:
    """This interpreter's floor for distinct Python callables and whether this process had
    measured it already (it is measured on first use, then kept until the process ends)."""
    global _python_floor
    if _python_floor is not None:
        return _python_floor, True
    twins = {f"twin_{i}": _python_twin(f"twin_{i}") for i in range(PYTHON_TWINS)}
    interpreter = f"{platform.python_implementation()} {platform.python_version()}"
    _python_floor = _farthest([twins], PYTHON_RUNS, interpreter, "python")
    return _python_floor, False
