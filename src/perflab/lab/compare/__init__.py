"""A/B comparison under setup randomization, the remedy of Mytkowicz et al. (ASPLOS 2009, §6).

One setup (an environment size, a link order, where the heap and the code start, ASLR) can make
B look faster than A when over many setups it is not. So: draw random setups, run A and B
interleaved in each, report B/A per setup and over all setups, and say so when the sign of the
effect depends on the layout. Every row records its setup's layout, so any one can be run again.
"""

from __future__ import annotations

import json
import math
import os
import re
import shlex
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from statistics import NormalDist
from typing import TYPE_CHECKING, Any

import numpy as np

from perflab import errors
from perflab.analysis import levels, stats
from perflab.analysis.summary import Summary, Table
from perflab.core import constants
from perflab.core.lazy import pd
from perflab.engine import childruns, controls, journal, lanes, results, spawn
from perflab.engine.childruns import value_column as value_column
from perflab.engine.progress import ProgressArg
from perflab.errors import PerflabError
from perflab.lab.link_order import counters_note
from perflab.lab.plans.compare import HEAP_DIGITS, RANDOMIZE, layout_text, parse_layout
from perflab.lab.plans.compare import Plan as Plan
from perflab.system import binlayout, compiler, machine

if TYPE_CHECKING:
    from matplotlib.figure import Figure

NO_PADDING = -1  # a size a setup leaves out: no padding variable, heap shift or padding object
HEAP_VAR = "PERFLAB_HEAP_OFFSET"  # what workloads/heap_offset.c reads
LAYOUT = ("env_size", "link_order", "heap_offset", "code_offset", "aslr")  # a setup's columns
CHUNK_RUNS = childruns.CHUNK_RUNS  # read at each comparison: a test may make chunks smaller
FLUSH_S = childruns.FLUSH_S


def parse_randomize(text: str) -> tuple[str, ...]:
    """'env-size,link-order' (or 'none') as a tuple of known setup dimensions."""
    if text.strip() == "none":
        return ()
    parts = tuple(dict.fromkeys(p.strip() for p in text.split(",") if p.strip()))
    bad = [p for p in parts if p not in RANDOMIZE]
    if bad or not parts:
        raise PerflabError(
            f"--randomize {text!r}: expected 'none' or a list of {', '.join(RANDOMIZE)}"
        )
    return parts


def layout_option(text: str) -> str:
    """--layout: RESULT:SETUP (the layout a saved comparison's setup ran in) or NAME=VALUE
    words, as the canonical words a plan records."""
    found = re.fullmatch(r"(.+):(\d+)", text.strip())
    if found and "=" not in text and os.path.isfile(found[1]):
        return recorded_layout(found[1], int(found[2]))
    return layout_text(parse_layout(text))


def recorded_layout(path: str | os.PathLike[str], setup: int) -> str:
    """The layout that setup `setup` of a saved comparison ran in, as --layout words."""
    df = results.load(path)
    if results.metadata(df).get("experiment") != "compare":
        raise PerflabError(f"{path}: not a perflab compare result")
    rows = df[(df["setup"] == setup) & (df["side"] == "A")]
    if rows.empty:
        have = ", ".join(map(str, sorted(set(df["setup"]))))
        raise PerflabError(f"{path}: no setup {setup} (it has {have})")
    row = rows.iloc[0]
    values = {"link-order": str(row.get("link_order") or ""), "aslr": str(row.get("aslr", ""))}
    for column in ("env_size", "heap_offset", "code_offset"):
        values[column.replace("_", "-")] = str(int(row.get(column, NO_PADDING)))
    return layout_text({k: v for k, v in values.items() if v and v != str(NO_PADDING)})


@dataclass(frozen=True)
class Setup:
    """One layout: the padding variable's length, the link order (None: as given), the heap
    offset and the code offset (each NO_PADDING when left out) and the child's ASLR mode."""

    index: int
    env_size: int
    perm: tuple[int, ...] | None
    heap_offset: int = NO_PADDING
    code_offset: int = NO_PADDING
    aslr: str = "off"


def draw_setups(plan: Plan, labels: Sequence[str]) -> list[Setup]:
    """The plan's fixed layout, or `setups` setups drawn with its seed, each dimension it
    randomizes uniform: env sizes in 0..env_max, orders of the objects `labels` name (A's),
    heap and code offsets in 0..heap_max and 0..code_max bytes, ASLR on or off. The offsets and
    ASLR draw from streams of their own: adding one leaves the others' draws as they were."""
    if plan.layout:
        return [_fixed(plan, labels)]
    randomize = plan.randomize
    rng = np.random.default_rng(plan.seed)
    own = {d: np.random.default_rng((plan.seed, i)) for i, d in enumerate(RANDOMIZE)}

    def offset(dimension: str, most: int) -> int:
        return int(own[dimension].integers(0, most + 1)) if dimension in randomize else NO_PADDING

    out = []
    for i in range(plan.setups):
        size = int(rng.integers(0, plan.env_max + 1)) if "env-size" in randomize else NO_PADDING
        perm = None
        if "link-order" in randomize:
            perm = tuple(int(x) for x in rng.permutation(len(labels)))
        heap, code = offset("heap-offset", plan.heap_max), offset("code-offset", plan.code_max)
        aslr = ("off", "on")[int(own["aslr"].integers(0, 2))] if "aslr" in randomize else plan.aslr
        out.append(Setup(i, size, perm, heap, code, aslr))
    return out


def _fixed(plan: Plan, labels: Sequence[str]) -> Setup:
    """The one setup of a --layout plan (the plan's aslr where the layout names none)."""
    values = parse_layout(plan.layout)
    perm = None
    if "link-order" in values:
        order = values["link-order"].split(",")
        if sorted(order) != sorted(labels):
            raise PerflabError(
                f"--layout link-order={values['link-order']}: A's objects are "
                f"{','.join(labels)}; give each once"
            )
        perm = tuple(list(labels).index(name) for name in order)

    def size(name: str) -> int:
        return int(values.get(name, NO_PADDING))

    return Setup(0, size("env-size"), perm, size("heap-offset"), size("code-offset"),
                 values.get("aslr", plan.aslr))  # fmt: skip


@dataclass(frozen=True)
class Side:
    """What A or B is: a command line, or objects each setup links (its order, a padding
    object first for a code offset), by a linker or by the user's build command (`build`,
    which links `target`), and runs with argv as arguments."""

    name: str
    argv: tuple[str, ...] = ()
    objects: tuple[compiler.Object, ...] = ()
    label: str = ""
    linker: compiler.Linker | None = None
    build: tuple[str, ...] = ()
    target: str = ""
    plain: str = ""  # target as the build command links it unchanged, a copy in the cache

    def program(self, setup: Setup) -> tuple[tuple[str, ...], str]:
        """The argv to run in this setup and the link order it was built in ('' if none)."""
        if not self.objects:
            return self.argv, ""
        perm = setup.perm if setup.perm is not None else range(len(self.objects))
        objects = [self.objects[i] for i in perm]
        order = [o.label for o in objects]
        pad = None
        if setup.code_offset != NO_PADDING:
            cc = self.linker.cc if self.linker else ()
            pad = compiler.padding_object(setup.code_offset, cc or None)
        if self.build:
            prog, linked = compiler.relink(self.build, Path(self.target), order, pad)
            if [o.digest for o in linked] != [o.digest for o in objects]:
                raise PerflabError(
                    f"{shlex.join(self.build)} linked other objects than it did first "
                    f"({','.join(prog.order)}, not {','.join(order)}): it must build the same "
                    "objects every time"
                )
        else:
            assert self.linker is not None  # objects come with what links them
            prog = compiler.link([*([pad] if pad else []), *objects], self.linker)
        return (str(prog.path), *self.argv), ",".join(order)

    def put_back(self) -> None:
        """After the setups' links, the build command's own program back where it built it:
        the user's tree is left as their command makes it."""
        if self.build:
            shutil.copy2(self.plain, self.target)


def identical(a: Side, b: Side) -> bool:
    """A and B would run the same bytes with the same arguments (e.g. -O2 and -O3 agreeing)."""
    if a.objects or b.objects:
        same = [o.digest for o in a.objects] == [o.digest for o in b.objects]
    else:
        same = compiler.Object.of(a.argv[0]).digest == compiler.Object.of(b.argv[0]).digest
    return same and a.argv[1:] == b.argv[1:]


def program_side(name: str, command: str | Sequence[str]) -> Side:
    """A program given as a command line (split like a shell would, run without one)."""
    argv = (
        controls.words(command, f"program {name}")
        if isinstance(command, str)
        else list(controls.typed_value(command, tuple[str, ...], f"program {name}"))
    )
    if not argv:
        raise PerflabError(f"program {name} is empty")
    return Side(name, (spawn.check_program(argv[0]), *argv[1:]), label=shlex.join(argv))


def build_side(
    name: str, cflags: Sequence[str], cc: Sequence[str] | None = None, args: Sequence[str] = ()
) -> Side:
    """The built-in multi-object workload compiled with cflags, linked per setup (statically
    when the libc allows it), run with args."""
    objects = tuple(compiler.linkorder_objects(tuple(cflags), cc))
    label = " ".join(["built-in workload", *cflags, *(["--", *args] if args else [])])
    return Side(name, tuple(args), objects, label, compiler.builtin_linker(cc))


def objects_side(
    name: str,
    paths: Sequence[str | os.PathLike[str]],
    cc: str | None = None,
    ldflags: Sequence[str] = (),
    args: Sequence[str] = (),
) -> Side:
    """The user's object files, linked per setup by cc (default $CC or cc) with ldflags after
    them, dynamically unless ldflags say otherwise, and run with args."""
    if not paths:
        raise PerflabError(f"{name}: no object files given")
    objects = tuple(compiler.Object.of(p) for p in paths)
    _distinct(name, objects)
    linker = compiler.Linker(cc=tuple(compiler.check_compiler(cc)), ldflags=tuple(ldflags))
    label = shlex.join([*map(str, paths), *ldflags, *(["--", *args] if args else [])])
    return Side(name, tuple(args), objects, label, linker)


def build_command_side(
    name: str,
    command: str | Sequence[str],
    program: str | os.PathLike[str],
    args: Sequence[str] = (),
) -> Side:
    """The program a build command of the user's links (`make -C src CC=cc`: run without a
    shell, perflab's compiler wrappers first on PATH, as ldrand does), run once here to find the
    objects its link takes; each setup runs it again, `program` removed so that it relinks."""
    what = f"build command {name}"
    argv = controls.words(command, what) if isinstance(command, str) else list(command)
    if not argv:
        raise PerflabError(f"build command {name} is empty")
    path = Path(program)
    target = Path(os.path.realpath(path.parent)) / path.name
    plain, objects = compiler.relink(argv, target)
    _distinct(name, objects)
    label = shlex.join([*argv, *(["--", *args] if args else [])])
    return Side(name, tuple(args), tuple(objects), label, build=tuple(argv), target=str(target),
                plain=str(plain.path))  # fmt: skip


def _distinct(name: str, objects: Sequence[compiler.Object]) -> None:
    """A link order names objects by label: two of one name could not be told apart."""
    labels = [o.label for o in objects]
    if len(set(labels)) != len(labels):
        raise PerflabError(f"{name}: object names must be distinct on a link order: "
                           f"{', '.join(labels)}")  # fmt: skip


def _digests(side: Side) -> tuple[str, ...]:
    """What decides the bytes A or B runs: its objects, or its program file."""
    objects = side.objects or (compiler.Object.of(side.argv[0]),)
    return tuple(o.digest for o in objects)


def _dynamic(side: Side) -> Side:
    """The side linked dynamically: a heap offset is a preloaded library, which only the
    dynamic loader loads."""
    if side.linker is None or not side.linker.static:
        return side
    return replace(side, linker=replace(side.linker, static=False))


def refuse_static(programs: Sequence[tuple[str, ...]]) -> None:
    """A heap offset asked for a program that cannot preload its shim: one line, nothing run."""
    for argv in programs:
        if not binlayout.preloads(argv[0]):
            raise PerflabError(
                f"{argv[0]} is statically linked (no ELF interpreter): a heap offset is a "
                "preloaded library, which only the dynamic loader loads; link it dynamically "
                "or leave heap-offset out"
            )


def compare(
    a: Side,
    b: Side,
    *,
    output: str | os.PathLike | None = None,
    resume: bool = False,
    discard_bad: bool = False,
    on_start: Callable[[int, int], None] | None = None,
    progress: ProgressArg = None,
    warn: Callable[[str], None] = errors.warn,
    **params: Any,
) -> pd.DataFrame:
    """Run A and B interleaved, `repeat` pairs in each of `setups` random setups; tidy frame.

    a, b: the two sides (compare.build_side("A", ["-O2"]), compare.objects_side("A", paths)
    or compare.program_side(name, argv)).
    params: any field of Plan (randomize, setups, repeat, env_max, heap_max, code_max, layout,
    var, seed, aslr, cpus, inherit_env, timeout, rt, mlock). Journaled to `output` when given,
    and resumable like a sweep: on_start(todo, done) once, progress(n) after each batch of n
    runs (by default a display on stderr or in Jupyter; progress=False for none).

    Returns one row per run: setup, its layout (env_size: bytes of padding; link_order;
    heap_offset and code_offset in bytes; -1: left out; aslr), side ("A"/"B"), rep, then the
    child-run columns: ticks (TSC ticks, timer cost subtracted), outer_ticks, wall_ns,
    utime_ns, stime_ns, maxrss_kb, faults, context switches, cycles, instructions, exit_code,
    signal, status (docs/env-size.md). per_setup() and overall() turn it into B/A ratios with
    intervals.
    """
    cpus = params.pop("cpus", None)
    if params.get("layout"):  # one setup, the layout given, unless asked otherwise (refused)
        params.setdefault("setups", 1)
    randomize = tuple(params.pop("randomize", () if params.get("layout") else ("env-size",)))
    plan = Plan(a=a.label, b=b.label, digests=(_digests(a), _digests(b)), randomize=randomize,
                **params)  # fmt: skip
    plan = lanes.with_cpus(plan, cpus, output if resume else None).check(
        (len(a.objects), len(b.objects))
    )
    recording = childruns.Recording(output, resume, discard_bad)
    recording.check()
    if "heap-offset" in plan.varied():
        a, b = _dynamic(a), _dynamic(b)
    meta = {
        **machine.metadata(),
        "experiment": "compare",
        **plan.conditions(),
        "a": a.label,
        "b": b.label,
        "randomize": list(randomize),
        "layout": plan.layout,
        "setups": plan.setups,
        "repeat": plan.repeat,
        "iterations": plan.iterations,
        "env_max": plan.env_max,
        "heap_max": plan.heap_max,
        "code_max": plan.code_max,
        "env_var": plan.var,
        "interleave": "A B, then B A, alternately",
        "program_pages": PROGRAM_PAGES,
        "hardware_counters": counters_note(),
        "identical": identical(a, b),
    }
    if "aslr" in plan.varied():  # the setups' own, not --aslr's: say where to read it
        fixed = parse_layout(plan.layout).get("aslr") if plan.layout else None
        meta["aslr"] = fixed or "drawn per setup (column aslr)"
    if plan.precision:
        return _to_precision(a, b, plan, meta, recording, on_start, progress, warn)
    setups = draw_setups(plan, [o.label for o in a.objects])
    return _measure(a, b, plan, {s: plan.repeat for s in setups}, meta, recording,
                    on_start=on_start, progress=progress, warn=warn)  # fmt: skip


def _measure(
    a: Side,
    b: Side,
    plan: Plan,
    setups: dict[Setup, int],
    meta: dict,
    recording: childruns.Recording,
    sources: journal.Executes | None = None,
    iterations: int | None = None,
    **shown: Any,
) -> pd.DataFrame:
    """Link what each setup runs, then run its pairs (setups[s] of them) through the engine,
    each run asked for `iterations` of the repeat loop (default: the plan's)."""
    t0 = time.perf_counter()
    try:
        built = [(a.program(s), b.program(s)) for s in setups]
    finally:
        a.put_back()
        b.put_back()
    heap = any(s.heap_offset != NO_PADDING for s in setups)
    shim = compiler.heap_shim() if heap else None
    meta = {**meta, "build_s": time.perf_counter() - t0}
    runs = _runs(plan, setups, built, str(shim.path) if shim else None, iterations)
    if shim is not None:
        refuse_static(runs.programs)
        meta |= {"heap_shim": shim.meta(), "heap_var": HEAP_VAR}
    if sources is not None:
        runs.sources = replace(sources, env=runs.env, var=runs.var)
    return lanes.measure(runs, plan, meta, recording, chunk_runs=CHUNK_RUNS, flush_s=FLUSH_S,
                         **shown)  # fmt: skip


# No precision is called reached over fewer layouts: a bootstrap over a handful of units
# misses more often than it says, and an interval that happens to be narrow stops the run.
MIN_LAYOUTS = 10
# Nor fewer pairs a layout than a median can stand on: one disturbed run (a neighbour's burst)
# is then outvoted in its layout instead of becoming that layout's B/A. And an even number,
# as any count of pairs is made: A goes first in half the pairs of every layout, so what the
# second run of a pair gains (0.2 % in A/A runs of brotli here) cancels within each layout.
MIN_PAIRS = 4
PILOT = (MIN_LAYOUTS, MIN_PAIRS)  # the least any decision stands on, and the plan's first data
PREDICTION_CONFIDENCE = 0.9  # the range said with the plan's predicted time
# With the repeat loop, the pilot's second round: layouts of one iteration a run, so that what
# more iterations buy is measured between processes at two counts (levels._by_count).
SINGLE_PILOT = 5
# The share of layouts B/A over layouts would cut at each end: none. A 20 % trim reads a
# loaded machine's wild layouts (±30 % in A/A runs at load 4) with a tenth of the layouts, but
# where most layouts' medians tie (a loop whose runs take the same ticks), the trimmed mean's
# variance collapses and its interval excluded 1 in 2 of 6 A/A comparisons of byte-identical
# builds; over real A/A data the plain mean's interval missed 2 % of the time, the trimmed 5 %.
TRIM = 0.0
# Where a program's file sits in physical memory is whatever its first reader left (large
# contiguous folios after a copy's write, scattered pages after an exec's faults), the same
# for a whole session unless drawn per layout: two byte-identical copies of brotli read B/A
# 0.987-1.001 here, 7 of 9 below 1, and claimed a difference 3, 10 and 5 times in 40.
PROGRAM_PAGES = "each program's file read afresh into the page cache as its layout starts"
CONFIDENCE = 0.95
# A run this many times its side's median was stalled (preempted, swapped), not moved by a
# layout: no placement effect comes near 10x, and one such run's log would outweigh a hundred.
STALLED = 10.0


def steady(ok: pd.DataFrame, value: str) -> pd.DataFrame:
    """The ok runs less the stalled ones (over STALLED times their side's median), which the
    means of logs behind B/A's interval and its variance components cannot absorb."""
    median = ok.groupby("side")[value].transform("median")
    return ok[ok[value] <= STALLED * median]


@dataclass
class Round:
    """One round of a --precision comparison: what it added, what it cost, where B/A stood."""

    setups: int
    repeat: int
    seconds: float
    half_width: float = math.nan
    planned: tuple[int, ...] | None = None  # the plan made after it: layouts in all, pairs each
    iterations: int = 1  # of the repeat loop, in each of its runs


def _sources(a: Side, b: Side) -> journal.Executes:
    """What every round of a --precision comparison runs, whatever it links: the sides'
    programs, or their objects (each round links its own setups)."""
    return journal.Executes(
        [tuple(map(str, (o.path for o in s.objects))) or s.argv for s in (a, b)]
    )


def half_width(ratio: float, low: float, high: float) -> float:
    """How far B/A's interval reaches from its estimate, on the ratio scale (0.01: 1 %)."""
    return max(high / ratio - 1, 1 - low / ratio)


def interval(
    ok: pd.DataFrame, value: str, confidence: float = CONFIDENCE
) -> tuple[float, float, float]:
    """B/A over the setups: the geometric mean of the setups' B/A (each the median of its A/B
    pairs' ratios, levels.paired_ratios; TRIM of each end cut) with Yuen's t interval over the
    setups (at TRIM 0, Student's), the one the plan predicts. Each setup's B/A carries its
    pairs' noise once: drawing the pairs again as well counts it twice. With one setup, the
    interval is its pairs' median's, from order statistics: an interval of that layout."""
    per = levels.paired_ratios(ok, value, "setup")
    if len(per) >= 2:
        centre, lo, hi = levels.trimmed_interval(per["log_ratio"], confidence, TRIM)
        return math.exp(centre), math.exp(lo), math.exp(hi)
    d = levels.pair_log_ratios(ok, value, "setup")
    centre, lo, hi = stats.median_interval(d, confidence)
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise PerflabError(
            f"one setup of {d.size} pairs: a median's interval at {confidence:.0%} needs "
            f"{fewest_pairs(confidence)}"
        )
    return math.exp(centre), math.exp(lo), math.exp(hi)


def covered(ok: pd.DataFrame) -> tuple[str, ...]:
    """The levels interval() covers: setups and runs, or with one setup its runs alone, and the
    iterations within the runs where they ran several of the repeat loop."""
    looped = ("iteration",) if "iterations" in ok and (ok["iterations"] >= 2).any() else ()
    return (*(("setup", "run") if ok["setup"].nunique() >= 2 else ("run",)), *looped)


def _to_precision(
    a: Side,
    b: Side,
    plan: Plan,
    meta: dict,
    recording: childruns.Recording,
    on_start: Callable[[int, int], None] | None,
    progress: ProgressArg,
    warn: Callable[[str], None],
) -> pd.DataFrame:
    """Rounds of new layouts until B/A's interval reaches plan.precision or the budget is
    spent: a pilot of PILOT, then as many layouts of as many pairs as Kalibera and Jones's plan
    asks from the variance of the layouts' B/A and the costs measured so far
    (analysis/levels.py), re-planned after every round. Journaled round by round into one
    file; a resume goes on from its rows, with the budget anew."""
    labels = [o.label for o in a.objects]
    sources = _sources(a, b)
    meta = {**meta, "setups": None, "repeat": None}
    frame = _resumed(recording)
    if frame is not None:
        _same_plan(results.metadata(frame).get("params") or {}, plan.params(), recording.output)
    reps = _reps(frame)
    todo = {s: PILOT[1] for s in range(PILOT[0])} if frame is None else _unfinished(frame)
    said: set[str] = set()

    def warn_once(message: str) -> None:
        """What a round warns (a kept program, refused priority), said once a comparison."""
        if message not in said:
            said.add(message)
            warn(message)

    rounds: list[Round] = []
    spent, reason, most = 0.0, "", constants.MAX_ITERATIONS
    earlier = _earlier(frame)  # what the sessions before a resume ran, predicted and spent
    predicted = earlier.get("predicted_s", math.nan)
    predicted_range = earlier.get("predicted_range_s", [math.nan, math.nan])
    pilot_layouts = earlier.get("predicted_from_layouts", 0)

    def so_far() -> dict[str, Any]:
        """The record of every round run so far, this session's after the earlier ones'."""
        return {
            "seconds": earlier.get("seconds", 0.0) + spent,
            "predicted_s": predicted,
            "predicted_range_s": predicted_range,
            "predicted_from_layouts": pilot_layouts,
            "rounds": [*earlier.get("rounds", []),
                       *(vars(r) | {"planned": list(r.planned or ())} for r in rounds)],
        }  # fmt: skip

    # a new layout, a pair of runs (A and B) beyond their iterations, an iteration of both
    costs = _costs_before(frame)
    k = plan.iterations if frame is None else _round_iterations(frame, plan)

    def started(todo: int, done: int = 0) -> Any:
        """A resumed round's start, with every run the file holds as done, not only the cut
        round's own."""
        assert on_start is not None
        return on_start(todo, len(frame) if done and frame is not None else done)

    while True:
        if todo:
            drawn = draw_setups(replace(plan, setups=max(todo) + 1), labels)
            t0 = time.perf_counter()
            resume = recording.resume or frame is not None
            planned_round = {"round_pairs": {str(s): n for s, n in todo.items()},
                             "round_iterations": k, "precision_so_far": so_far()}  # fmt: skip
            part = _measure(a, b, plan, {drawn[s]: n for s, n in todo.items()},
                            meta | planned_round, replace(recording, resume=resume), sources,
                            k, on_start=on_start and started, progress=progress,
                            warn=warn_once)  # fmt: skip
            seconds = time.perf_counter() - t0
            spent += seconds
            built = float(results.metadata(part).get("build_s", 0.0))
            before = len(frame) if frame is not None and recording.output is not None else 0
            new = part.iloc[before:]  # a resumed round runs what is missing
            pairs = max(len(new) / 2, 1)
            looping = _iteration_seconds(new, float(meta.get("tsc_hz") or 0.0))
            costs = [built / len(todo), max(seconds - built - looping, 1e-9) / pairs,
                     looping / pairs / k if looping > 0 else _known(costs[2])]  # fmt: skip
            frame = part if recording.output is not None or frame is None else _joined(frame, part)
            rounds.append(Round(len(todo), max(todo.values()), seconds, iterations=k))
            reps.update(todo)
        assert frame is not None  # the pilot ran, now or before the resume
        ok = steady(frame[frame["status"] == "ok"], value_column(frame))
        try:
            reached = half_width(*interval(ok, value_column(frame)))
            parts = levels.paired_ratio_components(ok, value_column(frame), trim=TRIM)
        except PerflabError as exc:
            reason = f"no interval: {exc}"
            break
        if rounds:
            rounds[-1].half_width = reached
        if reached <= plan.precision and len(reps) >= MIN_LAYOUTS:
            reason = "reached"
            break
        if _one_count_looped(ok):
            each = _layout_cost(costs, PILOT[1], 1)
            if int((plan.budget - spent) // max(each, 1e-9)) < SINGLE_PILOT:
                reason = "budget spent"
                break
            start = max(reps) + 1
            todo, k = {s: PILOT[1] for s in range(start, start + SINGLE_PILOT)}, 1
            continue
        looped = len(parts.levels) > 2
        most = _most_iterations(plan, costs)
        planned = levels.plan(parts, costs[: len(parts.levels)], plan.precision, CONFIDENCE,
                              least=(*PILOT, 1)[: len(parts.levels)],
                              most_inner=most)  # fmt: skip
        if rounds and rounds[-1].planned is None:
            rounds[-1].planned = planned.counts
        layouts, pairs = planned.counts[:2]
        pairs += pairs % 2
        k = planned.counts[2] if looped else k
        cost = _layout_cost(costs, pairs, k if looped else 0)
        if math.isnan(predicted):  # the first plan, from the pilot: what the docs weigh
            predicted, *predicted_range = predicted_time(spent, layouts, len(reps), cost)
            pilot_layouts = len(reps)
        more = _next_round(len(reps), layouts)
        afford = int((plan.budget - spent) // max(cost, 1e-9))
        if min(more, afford) < 1:
            reason = "budget spent"
            break
        start = max(reps) + 1
        todo = {s: pairs for s in range(start, start + min(more, afford))}
    record = {
        "target": plan.precision,
        "confidence": CONFIDENCE,
        "reached": reason == "reached",
        "stopped": reason,
        **so_far(),
        "predicted_confidence": PREDICTION_CONFIDENCE,
        "budget_s": plan.budget,
        "costs_s": {"layout": costs[0], "pair": costs[1], "iteration": costs[2]},
        "most_iterations": most,
    }
    kept = {k: v for k, v in results.metadata(frame).items() if k != "precision_so_far"}
    final = results.attach(frame, {**kept, "precision": record})
    if recording.output is not None:
        results.save(final, recording.output)
    return final


def _layout_cost(costs: Sequence[float], pairs: int, iterations: int) -> float:
    """Seconds one more layout takes, from the costs measured (a layout, a pair beyond its
    iterations, an iteration of both sides): its pairs at that many iterations a run."""
    return costs[0] + pairs * (costs[1] + iterations * costs[2])


def _next_round(run: int, layouts: int) -> int:
    """Layouts the next round adds to those run: what the plan still asks for, at least a
    quarter more (fewer barely move the estimate), at most as many again (a pilot's variance
    is itself uncertain)."""
    return min(max(layouts - run, run // 4, 1), max(run, PILOT[0]))


def predicted_time(spent: float, layouts: int, run: int, cost: float) -> list[float]:
    """The time a plan of `layouts` says the comparison takes, then its range at
    PREDICTION_CONFIDENCE: the layouts it needs scale with their variance, estimated from the
    `run` so far; and as the runs so far did not reach, the round about to run is part of any
    outcome, even where the plan reads them as enough."""
    spread = levels.variance_ratio_range(run - 1, PREDICTION_CONFIDENCE)
    return [spent + max(layouts * f - run, _next_round(run, layouts)) * cost
            for f in (1.0, *spread)]  # fmt: skip


def _one_count_looped(ok: pd.DataFrame) -> bool:
    """Whether the runs so far ran the repeat loop, all at one count of iterations: the pilot's
    second round then runs one a run."""
    if "iterations" not in ok:
        return False
    counts = set(ok["iterations"])
    return len(counts) == 1 and min(counts) >= 2


def _earlier(frame: pd.DataFrame | None) -> dict[str, Any]:
    """The rounds, time and prediction of the sessions a resume goes on from: the finished
    record of a complete file, or the one each round of an interrupted one left (the round
    cut short is the resume's first)."""
    if frame is None:
        return {}
    meta = results.metadata(frame)
    return dict(meta.get("precision") or meta.get("precision_so_far") or {})


def _costs_before(frame: pd.DataFrame | None) -> list[float]:
    """What a layout, a pair and an iteration of both sides cost in the run a resume goes on
    from: as it measured them, or (interrupted before it could) from its runs' wall time."""
    if frame is None:
        return [0.0, math.nan, math.nan]
    said = results.metadata(frame).get("precision", {}).get("costs_s")
    if said:
        return [float(said["layout"]), float(said["pair"]), float(said.get("iteration", 1e-9))]
    k = float(frame["iterations"].median()) if "iterations" in frame else 1.0
    hz = float(results.metadata(frame).get("tsc_hz") or 0.0)
    looping = _iteration_seconds(frame, hz) / max(len(frame) / 2, 1)
    pair = 2e-9 * float(frame["wall_ns"].median())
    return [0.0, max(pair - looping, 1e-9), max(looping / k, 1e-9)]


def _most_iterations(plan: Plan, costs: Sequence[float]) -> int:
    """The most iterations a run may be planned: what a run reports, and for real-time runs
    what keeps one inside RT_SHARE of the kernel's real-time runtime. Past it the kernel
    pauses the run for the rest of its period: brotli's encoder planned at 64 iterations of
    45 ms ran 2.9 s a run and was throttled inside every run."""
    bandwidth = machine.rt_bandwidth() if plan.rt else None
    if bandwidth is None or not all(math.isfinite(c) for c in costs[1:]):
        return constants.MAX_ITERATIONS
    start, each = costs[1] / 2, max(costs[2] / 2, 1e-9)  # one side's: a pair is two runs
    fits = int((RT_SHARE * bandwidth[0] / 1e9 - start) // each)
    return min(max(fits, 1), constants.MAX_ITERATIONS)


def _known(cost: float) -> float:
    """An iteration's cost a round could not time (no loop's columns): what was known, or 0."""
    return cost if math.isfinite(cost) else 0.0


def _iteration_seconds(rows: pd.DataFrame, hz: float) -> float:
    """The time these runs spent in their repeat loops' iterations (0 without the loop's
    columns: the region is then the pair's own cost), from the probe's ticks and the TSC's
    rate (hz). A round planned at one iteration a run still times that one: left out, it
    read iterations as free, and the next plan asked for 64 of them."""
    if "iterations" not in rows or rows.empty:
        return 0.0
    spent = (rows["ticks"] * rows["iterations"]).where(rows["iterations"] >= 1).sum()
    return float(spent) / hz if hz > 0 else 0.0


def _round_iterations(frame: pd.DataFrame, plan: Plan) -> int:
    """The iterations a run of the round a resume goes on from was asked for."""
    return int(results.metadata(frame).get("round_iterations") or plan.iterations)


def _same_plan(recorded: dict, asked: dict, output: object) -> None:
    """A resume goes on with the comparison the file holds, or refuses in one line: a round
    that never runs would not meet the journal's own check."""
    asked = json.loads(json.dumps(asked, default=str))  # as the file holds it: lists, not tuples
    changed = sorted(k for k in set(recorded) | set(asked) if recorded.get(k) != asked.get(k))
    if changed:
        raise PerflabError(
            f"{output} holds another comparison ({', '.join(changed)} differ); resume it with "
            "its own parameters, or write a new file"
        )


def _resumed(recording: childruns.Recording) -> pd.DataFrame | None:
    """The rows of the interrupted --precision comparison a resume goes on from (None: new)."""
    if recording.resume and recording.output is not None and os.path.exists(recording.output):
        return results.load(recording.output)
    return None


def _unfinished(frame: pd.DataFrame) -> dict[int, int]:
    """The layouts of the round a resume goes on from that have fewer runs than it planned (a
    pair is two), with the pairs it planned: a layout cut short is completed, not left short."""
    planned = results.metadata(frame).get("round_pairs") or {}
    have = frame.groupby("setup").size() if not frame.empty else pd.Series(dtype=int)
    return {int(s): int(n) for s, n in planned.items() if have.get(int(s), 0) < 2 * int(n)}


def _reps(frame: pd.DataFrame | None) -> dict[int, int]:
    """Pairs recorded per setup so far."""
    if frame is None or frame.empty:
        return {}
    return {int(s): int(r) + 1 for s, r in frame.groupby("setup")["rep"].max().items()}


def _joined(before: pd.DataFrame, part: pd.DataFrame) -> pd.DataFrame:
    """The rounds so far in memory, the newest round's metadata kept."""
    return results.attach(pd.concat([before, part], ignore_index=True), results.metadata(part))


def _b_first(seed: int, setup: int, repeat: int) -> np.ndarray:
    """Which of a setup's pairs run B first: half of them (a drawn side gets the odd one),
    which half drawn from the seed. A fixed alternation, in step with the runs, let a periodic
    disturbance of the host lean neighbouring setups alike: B/A of consecutive A/A setups of
    brotli correlated at 0.24 here, and the interval, which takes setups as independent,
    excluded 1 in 4 of 40 comparisons at 95 %."""
    rng = np.random.default_rng((seed, len(RANDOMIZE), setup))
    b_first = np.arange(repeat) < repeat // 2 + repeat % 2 * int(rng.integers(0, 2))
    return rng.permutation(b_first)


def _runs(
    plan: Plan,
    setups: dict[Setup, int],
    built: list,
    shim: str | None = None,
    iterations: int | None = None,
) -> childruns.Runs:
    """A/B pairs in each setup, B first in half of them (in which half: drawn, _b_first).
    Each setup's runs start under its own setting: its ASLR mode, and for a heap offset the shim
    preloaded (in every run's environment, so resume checks it) and the offset in HEAP_VAR,
    at a fixed width so that the environment's size varies with env-size alone."""
    env = childruns.base_env(plan.inherit_env, plan.var)
    if shim is not None:
        env["LD_PRELOAD"] = " ".join(filter(None, (shim, env.get("LD_PRELOAD"))))
    programs: dict[tuple[str, ...], int] = {}
    settings: dict[childruns.Setting, int] = {}
    prog, step = [], []
    rows: list[tuple] = []
    for (setup, repeat), sides in zip(setups.items(), built, strict=True):
        heap = (HEAP_VAR, f"{setup.heap_offset:0{HEAP_DIGITS}d}")
        setting = childruns.Setting((heap,) if setup.heap_offset != NO_PADDING else (),
                                    setup.aslr)  # fmt: skip
        b_first = _b_first(plan.seed, setup.index, repeat)
        for rep in range(repeat):
            pair = list(zip("AB", sides, strict=True))
            for side, (argv, order) in pair[::-1] if b_first[rep] else pair:
                prog.append(programs.setdefault(argv, len(programs)))
                step.append(settings.setdefault(setting, len(settings)))
                rows.append((setup.index, setup.env_size, order, setup.heap_offset,
                             setup.code_offset, setup.aslr, side, rep))  # fmt: skip
    names = ("setup", *LAYOUT, "side", "rep")
    text = ("link_order", "aslr", "side")
    labels = {n: np.array(col, dtype=object if n in text else np.int64)
              for n, col in zip(names, zip(*rows, strict=True), strict=True)}  # fmt: skip
    return childruns.Runs(
        programs=list(programs),
        prog=np.array(prog, np.int64),
        labels=labels,
        key=("setup", "rep", "side"),
        sizes=labels["env_size"],
        var=plan.var,
        env=env,
        setting=np.array(step, np.int64),
        settings=tuple(settings),
        layout=labels["setup"],
        iterations=iterations or plan.iterations,
        looped=plan.iterations > 1,
    )


SHOWN_SETUPS = 30  # setups a printed summary lists
RT_SHARE = 0.8  # of the kernel's real-time runtime a planned real-time run may fill
LABELLED_SETUPS = 40  # setups a figure names one by one; more are drawn ranked by B/A
# The change a setup without a verdict is weighed against, as diff's --change: how many pairs
# it would need to show one this large (`perflab report FILE --change PCT` asks for another).
CHANGE = 0.02
POWER = 0.8


def pair_interval(d: pd.Series, confidence: float) -> tuple[float, float, float]:
    """A setup's B/A, the median of its A/B pairs' ratios (d: their logs), with the
    distribution-free interval of that median (order statistics: the sign test's); (ratio,
    nan, nan) where the pairs are too few for one at this confidence (4 at 95 %: all four one
    way happen 1 time in 8). A bootstrap of so few reads narrower than any test of them can."""
    if d.empty:
        return math.nan, math.nan, math.nan
    centre, lo, hi = stats.median_interval(d, confidence)
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return math.exp(centre), math.nan, math.nan
    return math.exp(centre), math.exp(lo), math.exp(hi)


# A setup's verdict where its pairs are too few for an interval of its own (pair_interval).
TOO_FEW = "too few pairs"


def _verdict(lo: float, hi: float) -> str:
    """Which way a setup's interval points: beyond 1, holding it, or none to point."""
    if lo > 1:
        return "B slower"
    if hi < 1:
        return "B faster"
    return "unclear" if math.isfinite(lo) else TOO_FEW


def per_setup(df: pd.DataFrame, value: str | None = None, confidence: float = 0.95) -> pd.DataFrame:
    """Each setup's B/A, the median of its A/B pairs' ratios, with its interval (pair_interval)
    and which way it points: unclear where the interval holds 1, TOO_FEW without one. Of the
    steady runs, as overall()'s: a run stalled 10x its side's median is no layout's doing."""
    value = value or value_column(df)
    ok = df[df["status"] == "ok"].copy()
    ok.attrs = {}  # every slice below would copy the metadata: most of the time at 1000 setups
    ok = steady(ok, value)
    layout = [c for c in LAYOUT[1:] if c in ok]  # a file from before a dimension lacks it
    none = pd.Series(dtype=float)
    pairs = (
        dict(iter(levels.pair_log_ratios(ok, value, "setup").groupby(level=0)))
        if {"A", "B"} <= set(ok["side"])
        else {}  # a side with no ok run anywhere: no setup is in the table
    )
    rows = []
    for (setup, size), g in ok.groupby(["setup", "env_size"], sort=True):
        a, b = g.loc[g["side"] == "A", value], g.loc[g["side"] == "B", value]
        if a.empty or b.empty:
            continue
        d = pairs.get(setup, none)
        ratio, lo, hi = pair_interval(d, confidence)  # no pair of both sides: nan, TOO_FEW
        first = g.iloc[0]
        rows.append(
            {
                "setup": int(setup),
                "env_size": int(size),
                **{c: first[c].item() if hasattr(first[c], "item") else first[c] for c in layout},
                "n_a": len(a),
                "n_b": len(b),
                "pairs": int(d.size),
                "median_a": float(a.median()),
                "median_b": float(b.median()),
                "ratio": ratio,
                "ci_low": lo,
                "ci_high": hi,
                "verdict": _verdict(lo, hi),
            }
        )
    return pd.DataFrame(rows)


def overall(
    df: pd.DataFrame,
    setups: pd.DataFrame,
    value: str | None = None,
    confidence: float = CONFIDENCE,
    change: float = CHANGE,
) -> dict:
    """B/A over all setups (the geometric mean of the setups' B/A of pairs) with Student's t
    interval over the setups, whose B/A each carry their pairs' noise: an interval about
    random layouts, not just these ones; and the variance of B/A by level."""
    value = value or value_column(df)
    if setups.empty:
        raise PerflabError("no setup has ok runs of both A and B: nothing to compare")
    ok = df[(df["status"] == "ok") & df["setup"].isin(setups["setup"])]
    stalled = len(ok)
    ok = steady(ok, value)
    stalled -= len(ok)
    setups = setups[setups["pairs"] > 0]  # a setup without an A/B pair has no B/A to average
    if setups.empty:
        raise PerflabError("no setup holds a pair of ok A and B runs: nothing to compare")
    try:
        ratio, lo, hi = interval(ok, value, confidence)
        covers = covered(ok)
    except PerflabError:  # one setup of too few pairs: B/A without an interval
        ratio = float(setups["ratio"].iloc[0])
        lo, hi, covers = math.nan, math.nan, ()
    try:
        parts: levels.Components | None = levels.paired_ratio_components(ok, value, trim=TRIM)
    except PerflabError:
        parts = None  # one setup, or one pair in every setup: no split by level
    counts = setups["verdict"].value_counts()
    slower, faster = int(counts.get("B slower", 0)), int(counts.get("B faster", 0))
    family, sure = _family_verdicts(ok, setups, value, confidence)
    split = _split(ok, value, ratio, parts, confidence, change)
    return {
        "ratio": ratio,
        "ci_low": lo,
        "ci_high": hi,
        "confidence": confidence,
        "covers": list(covers),
        "half_width": half_width(ratio, lo, hi),
        "stalled": stalled,
        "setups": len(setups),
        "b_slower": slower,
        "b_faster": faster,
        "unclear": int(counts.get("unclear", 0)),
        "too_few_pairs": int(counts.get(TOO_FEW, 0)),
        "min_ratio": float(setups["ratio"].min()),
        "max_ratio": float(setups["ratio"].max()),
        "depends_on_setup": bool(sure["B slower"] and sure["B faster"]) or split is not None,
        "layouts_each_way": split,
        "family_confidence": family,
        "components": _shares(parts, setups, ok if "iteration" in covers else None)
        if parts is not None
        else None,
        "pair_variance": parts.variances[1] if parts is not None else math.nan,
        "conclusion": _conclusion(
            ratio,
            lo,
            hi,
            sure["B slower"],
            sure["B faster"],
            len(setups),
            _over(results.metadata(df), len(setups), covers),
            family,
            split,
        ),
    }


# The share of random layouts that must move B/A past the change of interest each way before
# the conclusion is said to depend on the layout: one layout in ten or more would have shown
# B slower by that much, and one in ten B faster by that much.
EACH_WAY = 0.1


def _split(
    ok: pd.DataFrame,
    value: str,
    ratio: float,
    parts: levels.Components | None,
    confidence: float,
    change: float,
) -> dict[str, float] | None:
    """Where layouts of few pairs cannot be decided one by one (4 pairs never are), whether
    they differ as a whole and point both ways: Kruskal and Wallis's test that the layouts'
    pairs come from one distribution, at confidence, and, from the layouts' own variance
    component (their log B/A normal about the overall one), the share of random layouts that
    make B slower by more than `change` and faster by more than it, each at least EACH_WAY.
    The change keeps a layout effect too small to matter from being called a flip: 12 layouts
    at B/A 1.000 but for one at 1.006 and one at 0.996 differ, and say so at 20 pairs each."""
    if parts is None or not parts.variances[0] > 0 or not ratio > 0:
        return None
    try:
        p = levels.layouts_differ(levels.pair_log_ratios(ok, value, "setup"))
    except PerflabError:
        return None
    sd, centre, bound = math.sqrt(parts.variances[0]), math.log(ratio), math.log1p(change)
    slower = 1 - NormalDist(centre, sd).cdf(bound)
    faster = NormalDist(centre, sd).cdf(-bound)
    if p >= 1 - confidence or min(slower, faster) < EACH_WAY:
        return None
    return {"slower": slower, "faster": faster, "p": p, "change": change}


def _family_verdicts(
    ok: pd.DataFrame, setups: pd.DataFrame, value: str, confidence: float
) -> tuple[float, dict[str, int]]:
    """The setups whose B/A is beyond doubt at confidence over them all (Bonferroni: each at
    1 - (1 - confidence) / n), by direction. Twelve setups of byte-identical programs at 95 %
    each show one "slower" and one "faster" often enough to call the layout decisive when
    nothing differs. A setup is beyond doubt only where its pairs could be: its pairs'
    median's interval at that confidence (pair_interval), which n pairs cannot give below
    2 / 2^n (a bootstrap of 4 runs a side read 7 of 200 setups of identical programs "beyond
    doubt" at 1 - 0.05/200: a new user's trial)."""
    decided = setups[setups["verdict"].isin(("B slower", "B faster"))]
    n = max(int(setups["ci_low"].notna().sum()), 1)
    each = 1 - (1 - confidence) / n
    sure = {"B slower": 0, "B faster": 0}
    for _, row in decided.iterrows():
        d = levels.pair_log_ratios(ok[ok["setup"] == row["setup"]], value, "setup")
        _, lo, hi = pair_interval(d, each)
        if lo > 1 or hi < 1:
            sure["B slower" if lo > 1 else "B faster"] += 1
    return each, sure


def _shares(
    parts: levels.Components, setups: pd.DataFrame, looped: pd.DataFrame | None = None
) -> dict[str, float]:
    """What share of the variance of a setup's B/A its layout holds, and its pairs (with the
    iterations within their runs, where there were several: their own share where runs ran
    two counts of them, else `within`, the iterations a run of `looped` ran), at the median
    number of pairs the setups ran."""
    pairs = float(np.median(setups["pairs"]))
    factor = float(np.mean([levels.median_factor(max(int(n), 1)) for n in setups["pairs"]]))
    var = parts.variances
    per_run = parts.units[2] / (2 * parts.units[1]) if len(var) > 2 else 1.0
    k = max(round(per_run), 1)
    row = parts.row(k) if len(var) > 2 else var[1]  # a run's value: its iterations' median
    iteration = min(var[2] * levels.median_factor(k), row) * factor if len(var) > 2 else 0.0
    layout, runs = var[0], row * factor - iteration
    total = layout + runs + iteration
    if not total > 0:
        return {"setup": math.nan, "run": math.nan, "pairs": pairs}
    shares = {"setup": layout / total, "run": runs / total, "pairs": pairs}
    if len(var) > 2:
        shares |= {"iteration": iteration / total, "iterations": per_run}
    elif looped is not None:
        shares["within"] = float(looped["iterations"].mean())
    return shares


def _conclusion(
    ratio: float,
    lo: float,
    hi: float,
    slower: int,
    faster: int,
    n: int,
    over: str,
    each: float = CONFIDENCE,
    split: dict[str, float] | None = None,
) -> str:
    """The plain-language verdict, the layout-dependence first (that is the paper's point),
    then what the interval is over: what was randomized, and the levels it covers."""
    if split is not None and not (slower and faster):
        return (
            f"the conclusion depends on the layout: the layouts' B/A differ beyond their pairs' "
            f"noise (Kruskal-Wallis p {_p(split['p'])}), and an estimated "
            f"{split['slower']:.0%} of random layouts make B slower by over "
            f"{split['change'] * 100:g}%, {split['faster']:.0%} faster by as much (the 'wrong "
            "data' case of Mytkowicz et al.): one layout would have shown either; over all, "
            f"B/A = {ratio:.3f} ({lo:.3f}-{hi:.3f}) {over}"
        )
    if slower and faster:
        return (
            f"the conclusion depends on the layout: B is slower than A in {slower} setups and "
            f"faster in {faster} of {n}, each at {each:.2%} (the 'wrong data' case of "
            "Mytkowicz et al.): "
            f"one layout would have shown either; over all, B/A = {ratio:.3f} "
            f"({lo:.3f}-{hi:.3f}) {over}"
        )
    if math.isnan(lo):
        return f"B/A = {ratio:.3f} {over}: too few pairs for an interval"
    if lo > 1:
        return f"B is slower than A: B/A = {ratio:.3f} ({lo:.3f}-{hi:.3f}) {over}"
    if hi < 1:
        return f"B is faster than A: B/A = {ratio:.3f} ({lo:.3f}-{hi:.3f}) {over}"
    return (
        f"no difference shown: B/A = {ratio:.3f}, its interval {lo:.3f}-{hi:.3f} contains 1, {over}"
    )


def _p(p: float) -> str:
    """'= 0.003', or '< 1e-16' where a float's p-value is only rounding."""
    return f"= {p:.1g}" if p >= 1e-16 else "< 1e-16"


def _over(meta: dict[str, Any], n: int, covers: Sequence[str]) -> str:
    """'over 12 setups randomizing env-size, heap-offset (interval over setups and runs)'."""
    varied = f"fixed layout {meta['layout']}" if meta.get("layout") else (
        "randomizing " + ", ".join(meta.get("randomize") or ()) if meta.get("randomize")
        else "one fixed layout"
    )  # fmt: skip
    covered = f" (the interval covers: {' and '.join(covers)})" if covers else ""
    trimmed = f" ({TRIM:.0%} of them cut at each end)" if TRIM and n >= 1 / TRIM else ""
    return f"over {n} setup{'s' if n != 1 else ''}{trimmed}, {varied}{covered}"


def plot(
    df: pd.DataFrame,
    path: str | os.PathLike[str] | None,
    setups: pd.DataFrame,
    summary: dict[str, Any],
) -> Figure:
    """B/A per setup with its CI (red: B slower, blue: B faster), and the overall band."""
    from perflab.analysis import plot as plt

    many = len(setups) > LABELLED_SETUPS  # a --precision run's hundreds: ranked, unlabelled
    if many:
        setups = setups.sort_values("ratio", kind="stable").reset_index(drop=True)
    fig, ax = plt.figure(figsize=(min(max(7, 0.35 * len(setups) + 3), 14), 5))
    colour = {"B slower": plt.COLORS[0], "B faster": plt.COLORS[1], "unclear": "#888888",
              TOO_FEW: "#888888"}  # fmt: skip
    x = np.arange(len(setups))
    for verdict, g in setups.groupby("verdict"):
        idx = x[setups["verdict"].to_numpy() == verdict]
        r, lo, hi = (g[c].to_numpy(float) for c in ("ratio", "ci_low", "ci_high"))
        ax.errorbar(idx, r, yerr=[r - lo, hi - r], fmt="o", color=colour[verdict],
                    capsize=0 if many else 3, ms=2 if many else 6, lw=0.6 if many else 1.5,
                    label=verdict)  # fmt: skip
    ax.axhline(1.0, color="black", lw=0.8, ls="--")
    ax.axhspan(summary["ci_low"], summary["ci_high"], color=plt.COLORS[2], alpha=0.2, lw=0,
               label=f"over all setups {summary['ratio']:.3f}")  # fmt: skip
    if many:
        ax.set_xlabel(f"{len(setups)} setups, in order of their B/A (each one's layout: the table)")
    else:
        ticks = ["\n".join(_layout_words(r)) or str(r["setup"]) for _, r in setups.iterrows()]
        ax.set_xticks(x, ticks, rotation=90, fontsize=7)
        ax.set_xlabel("setup")
    ax.set_ylabel("B / A (median of its pairs)")
    below = -0.15 if many else -0.3  # under the axis label, or under the layouts' names
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, below), ncol=4, fontsize=8)
    meta = results.metadata(df)
    title = "B/A over random setups" + (
        ": depends on the layout" if summary["depends_on_setup"] else ""
    )
    title += f" ({', '.join(meta.get('randomize', [])) or 'fixed setup'})"
    return plt.save(fig, path, title=title)


def _layout_words(row: pd.Series) -> list[str]:
    """A setup's layout in short words for a figure's axis: what it set, nothing else."""
    words = [f"env {row['env_size']}" if row["env_size"] >= 0 else "", row.get("link_order", "")]
    for column, word in (("heap_offset", "heap"), ("code_offset", "code")):
        if row.get(column, NO_PADDING) >= 0:
            words.append(f"{word} {row[column]}")
    return [w for w in words if w]


def fewest_pairs(confidence: float) -> int:
    """The fewest pairs whose median can have an interval at this confidence: all n one way
    happen 2 / 2^n of the time by chance."""
    return math.ceil(math.log2(2 / (1 - confidence)) - 1e-9)


def pairs_needed(pair_variance: float, change: float, confidence: float = 0.95) -> int:
    """Pairs a setup would need for its interval (pair_interval) to exclude 1 with probability
    POWER when B is `change` slower, from the variance of one pair's log B/A: the normal
    approximation for a median (levels.runs_for_spreads, whose per-side spread is half the
    pair's variance), and never fewer than fewest_pairs."""
    spread = np.array([math.sqrt(pair_variance / 2)])
    need = int(levels.runs_for_spreads(spread, change, confidence, POWER, "median")[0])
    return max(need, fewest_pairs(confidence))


def shown_change(total: dict, change: float) -> bool:
    """Whether the interval over all setups already lies beyond a `change` either way: then
    no setup needs more pairs to show that much."""
    return total["ci_low"] > 1 + change or total["ci_high"] < 1 / (1 + change)


def _undecided_line(setups: pd.DataFrame, total: dict, change: float) -> list[str]:
    """How many pairs the setups without a verdict would need to show a `change` (from the
    pairs' spread this comparison measured), or that they had enough; nothing where the
    setups together have shown more than that change already."""
    open_ = setups[setups["verdict"].isin(("unclear", TOO_FEW))]
    if open_.empty or not total["pair_variance"] > 0 or shown_change(total, change):
        return []
    need = pairs_needed(total["pair_variance"], change)
    have = int(open_["pairs"].median())
    what = f"a {change * 100:g}% change"
    strength = f"{POWER:.0%} power, from the spread of this comparison's pairs"
    if need > have:
        return [
            f"{len(open_)} setups without a verdict would each need about {need:,} pairs to show "
            f"{what} ({strength}; they have {have:,})"
        ]
    return [
        f"the {len(open_)} setups without a verdict had pairs enough to show {what} "
        f"({strength}): a layout's effect there is likely smaller"
    ]


def _per_setup_line(per: pd.DataFrame, total: dict, confidence: float = 0.95) -> str:
    """The setups one by one, and where some cannot decide alone what they read as a group
    (how many put B/A above 1 and below), which the interval over them all weighs together."""
    n, few = total["setups"], total["too_few_pairs"]
    head = (
        f"per setup: B/A, the median of its pairs' ratios, from {total['min_ratio']:.3f} to "
        f"{total['max_ratio']:.3f}; "
    )
    if few:
        have = per.loc[per["verdict"] == TOO_FEW, "pairs"]
        least, most = int(have.min()), int(have.max())
        pairs = f"{least}-{most}" if least != most else f"{most}"
        why = (
            f"{pairs} pair{'s' * (most != 1)} each, where an interval of its own at "
            f"{confidence:.0%} needs {fewest_pairs(confidence)}"
        )
    if few == n:
        head += f"no setup can decide alone ({why})"
    else:
        head += (
            f"B slower in {total['b_slower']}, faster in {total['b_faster']}, unclear in "
            f"{total['unclear']}" + (f", too few pairs in {few} ({why})" if few else "")
            + f" of {n}"
        )  # fmt: skip
    head += _pairless(per)
    if not (few or total["unclear"]):
        return head
    ratios = per.loc[per["pairs"] > 0, "ratio"]
    above, below = int((ratios > 1).sum()), int((ratios < 1).sum())
    counted = f"all {len(ratios)}" if len(ratios) in (above, below) else ""
    if counted:
        group = f"{counted} read B/A {'above' if above else 'below'} 1"
    else:
        group = f"B/A reads above 1 in {above} of {len(ratios)} and below in {below}"
    weighs = "weighs them together" if math.isfinite(total["ci_low"]) else "needs more pairs"
    return f"{head}; as a group {group}, and the interval over them all {weighs}:"


def _pairless(setups: pd.DataFrame) -> str:
    """'; 1 more setup without a pair of ok runs (left out)', or nothing."""
    n = int((setups["pairs"] == 0).sum())
    return f"; {n} more setup{'s' if n != 1 else ''} without a pair of ok runs (left out)" * bool(n)


def _components_line(shares: dict[str, float] | None) -> list[str]:
    """What share of B/A's variance the layout holds, the rest being the runs' own (and their
    iterations', where they ran several)."""
    if not shares or any(math.isnan(v) for v in shares.values()):
        return []
    pairs = shares["pairs"]
    at = f"at {pairs:g} pair{'' if pairs == 1 else 's'} a setup"
    runs = f"its runs {shares['run']:.0%}"
    if "iteration" in shares:
        runs += f", the iterations within them {shares['iteration']:.0%}"
        at += f" and {shares['iterations']:.3g} iterations a run"
    elif "within" in shares:
        runs += (f" with their {shares['within']:.3g} iterations each (runs of one count of "
                 "iterations cannot tell the two apart)")  # fmt: skip
    return [
        f"the layout explains {shares['setup']:.0%} of the variance of a setup's B/A here, "
        f"{runs} (variance components of a setup's median of its pairs' log B/A, {at})"
    ]


def _single_pairs(setups: pd.DataFrame) -> list[str]:
    """Setups whose B/A is one A/B pair: one run disturbed (a neighbour's burst) is then that
    setup's B/A, where a median of four pairs or more outvotes it."""
    if setups.empty or not (setups["pairs"] == 1).any():
        return []
    n = int((setups["pairs"] == 1).sum())
    which = "every setup has" if n == len(setups) else f"{n} of {len(setups)} setups have"
    return [
        f"note: {which} one A/B pair: one disturbed run decides such a setup's B/A "
        f"(--repeat {MIN_PAIRS} or more lets a median of pairs outvote it)"
    ]


def _failed_by_side(frame: pd.DataFrame) -> list[str]:
    """Which side's runs failed, and how: the pooled status cannot tell a B that fails one run
    in five from both failing now and then. Its pairs drop out of the layouts' medians."""
    bad = frame[frame["status"] != "ok"]
    if bad.empty:
        return []
    sides = []
    for side in ("A", "B"):
        mine = frame["side"] == side
        how = bad.loc[bad["side"] == side, "status"].astype(str).value_counts()
        what = ", ".join(f"{n} {s}" for s, n in how.items())
        sides.append(f"{side} {int(how.sum())} of {int(mine.sum())}"
                     + (f" ({what})" if what else ""))  # fmt: skip
    return [f"runs not ok: {'; '.join(sides)}; a pair missing a run drops out of its layout"]


def _loopless(frame: pd.DataFrame, meta: dict[str, Any]) -> list[str]:
    """Iterations asked of programs whose ok runs never sent more than one probe record."""
    asked = int(meta.get("iterations") or 1)
    ok = frame[frame["status"] == "ok"]
    if asked < 2 or "iterations" not in ok or ok.empty or ok["iterations"].max() >= 2:
        return []
    return [
        f"note: {asked} iterations a run were asked, and the programs sent at most one probe "
        "record a run: without the probe's repeat loop (PERFLAB_PROBE_LOOP) iterations are no "
        "level here"
    ]


def _counted(n: int, thing: str) -> str:
    """A count in words, singular for one: "1 round", "2 rounds"."""
    return f"{n} {thing}" + "s" * (n != 1)


def _predicted(record: dict) -> str:
    """The time the pilot's plan predicted, with the range its variance estimate leaves."""
    predicted = record.get("predicted_s", math.nan)
    if not math.isfinite(predicted):
        return ""
    lo, hi = record.get("predicted_range_s", [math.nan, math.nan])
    ranged = (
        f", {lo:.1f}-{hi:.1f} s at {record['predicted_confidence']:.0%} from the variance of "
        f"{record['predicted_from_layouts']} layouts"
        if math.isfinite(lo) and math.isfinite(hi)
        else ""
    )
    return f" (the plan made after the pilot predicted {predicted:.1f} s{ranged})"


def _precision_lines(frame: pd.DataFrame, record: dict | None, value: str) -> list[str]:
    """What --precision asked, reached, took and predicted, against a fixed 10 x 10 design."""
    if not record:
        return []
    target, took = record["target"], record["seconds"]
    rounds = record["rounds"]
    head = (
        f"precision: ±{target * 100:.3g}% asked; "
        + (f"reached in {_counted(len(rounds), 'round')}" if record["reached"]
           else f"not reached ({record['stopped']}) after {_counted(len(rounds), 'round')}")
        + f", {took:.1f} s"
        + _predicted(record)
    )  # fmt: skip
    out = [head]
    ok = steady(frame[frame["status"] == "ok"], value)
    costs = record["costs_s"]
    try:
        parts = levels.paired_ratio_components(ok, value, trim=TRIM)
        each = [costs["layout"], costs["pair"], costs.get("iteration", 0.0)]
        looped = len(parts.levels) > 2
        pilot = int(rounds[0].get("iterations", 1)) if rounds else 1
        fixed = levels.predict(parts, each[: len(parts.levels)], (10, 10, pilot)[: len(each)]
                               if looped else (10, 10))  # fmt: skip
    except PerflabError:
        return out
    planned = next((r["planned"] for r in reversed(rounds) if r["planned"]), None)
    if planned:
        loop = f" of {_counted(planned[2], 'iteration')}" if len(planned) > 2 else ""
        most = int(record.get("most_iterations") or constants.MAX_ITERATIONS)
        if loop and planned[2] == most < constants.MAX_ITERATIONS:
            loop += " (the most that keep a real-time run inside the kernel's runtime)"
        priced = f", {costs['iteration'] * 1e3:.3g} ms an iteration of both" if looped else ""
        out.append(f"plan: {planned[0]} layouts of {planned[1]} A/B pairs each{loop} (Kalibera "
                   f"and Jones, from costs of {costs['layout']:.3f} s a layout, "
                   f"{costs['pair']:.3f} s a pair{priced})")  # fmt: skip
    design = f"10 x 10 x {pilot}" if looped else "10 x 10"
    out.append(
        f"a fixed {design} design would take {fixed.time:.1f} s here and reach "
        f"±{fixed.half_width:.1%}"
    )
    return out


def _intervals(per: pd.DataFrame) -> list[str]:
    """Each setup's interval as text, or why it has none: never a bare nan."""
    return [
        f"{lo:.3f}-{hi:.3f}" if math.isfinite(lo) else f"none: {n} pair{'s' * (n != 1)}"
        for lo, hi, n in zip(per["ci_low"], per["ci_high"], per["pairs"], strict=True)
    ]


def summary(frame: pd.DataFrame, meta: dict[str, Any]) -> Summary:
    """A and B, B/A per setup with its interval and verdict, and over all setups."""
    value = value_column(frame)
    per = per_setup(frame, value)
    counts = childruns.status_counts(frame)
    randomize = meta.get("randomize", [])
    lines = [f"A: {meta.get('a')}", f"B: {meta.get('b')}"]
    if meta.get("identical"):
        lines.append("note: A and B are byte-identical programs run with the same arguments")
    fixed = f"fixed layout: {meta['layout']}" if meta.get("layout") else ""
    lines.append(f"{len(frame)} runs, status {counts}; "
                 f"{fixed or 'randomized: ' + ', '.join(randomize)}")  # fmt: skip
    lines += _loopless(frame, meta) + _failed_by_side(frame) + _single_pairs(per)
    values: dict[str, Any] = {
        "a": meta.get("a"),
        "b": meta.get("b"),
        "randomize": randomize,
        "value": value,
        "runs": len(frame),
        "status": counts,
        "identical": meta.get("identical"),
        "interference": meta.get("interference"),
        "iterations": int(meta.get("iterations") or 1),
        "precision": meta.get("precision"),
    }
    if per.empty:
        lines.append("no setup has ok runs of both A and B: nothing to compare")
        return Summary(lines, [Table("setups", "setups", per)], values)
    total = overall(frame, per, value, change=float(meta.get("change") or CHANGE))
    lines += [
        _per_setup_line(per, total),
        total["conclusion"],
        *(
            [
                f"{total['stalled']} runs set aside as stalled (over {STALLED:.0f}x their side's "
                "median): the interval and the variance by level are of the others"
            ]
            if total["stalled"]
            else []
        ),
        *_components_line(total["components"]),
        *_undecided_line(per, total, float(meta.get("change") or CHANGE)),
        *_precision_lines(frame, meta.get("precision"), value),
        *lanes.describe(meta.get("interference", {})),
    ]
    values["overall"] = total
    varied = set(randomize) | set(parse_layout(meta["layout"]) if meta.get("layout") else ())
    layout = ["env_size", "link_order",
              *(c for c in LAYOUT[2:] if c in per and c.replace("_", "-") in varied)]  # fmt: skip
    cols = ["setup", *layout, "median_a", "median_b", "ratio", "interval", "verdict"]
    shown = per.assign(interval=_intervals(per))[cols].astype(
        {"median_a": "int64", "median_b": "int64"}
    )
    title = f"B/A of {value} per setup: the median of its A/B pairs' ratios"
    if len(shown) > SHOWN_SETUPS:  # a --precision run may hold thousands: the file has them all
        shown = shown.head(SHOWN_SETUPS)
        title += f"; the first {SHOWN_SETUPS} of {len(per)}, every one in the saved result"
    sizes = [c for c in layout if c != "link_order"]
    if (shown[sizes] == NO_PADDING).any(axis=None):  # a dimension this layout left out
        title += f" ({NO_PADDING}: no padding)"
    table = Table("setups", title, per, "{:,.3f}", shown)
    return Summary(lines, [table], values, lambda p: plot(frame, p, per, total))
