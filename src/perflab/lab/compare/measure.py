"""compare(): A and B interleaved in random setups, journaled and resumable, and the names of
the package's modules that perflab.compare offers (its plan and entry are the package's light
__init__)."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from perflab import errors
from perflab.core.lazy import pd
from perflab.lab.compare import runs
from perflab.lab.compare.layouts import LAYOUT as LAYOUT
from perflab.lab.compare.layouts import NO_PADDING as NO_PADDING
from perflab.lab.compare.layouts import Setup as Setup
from perflab.lab.compare.layouts import draw_setups as draw_setups
from perflab.lab.compare.layouts import layout_option as layout_option
from perflab.lab.compare.layouts import parse_randomize as parse_randomize
from perflab.lab.compare.layouts import recorded_layout as recorded_layout
from perflab.lab.compare.plan import HEAP_DIGITS as HEAP_DIGITS
from perflab.lab.compare.plan import RANDOMIZE as RANDOMIZE
from perflab.lab.compare.plan import ComparePlan, parse_layout
from perflab.lab.compare.precision import MIN_LAYOUTS as MIN_LAYOUTS
from perflab.lab.compare.precision import MIN_PAIRS as MIN_PAIRS
from perflab.lab.compare.precision import PILOT as PILOT
from perflab.lab.compare.precision import PREDICTION_CONFIDENCE as PREDICTION_CONFIDENCE
from perflab.lab.compare.precision import RT_SHARE as RT_SHARE
from perflab.lab.compare.precision import SINGLE_PILOT as SINGLE_PILOT
from perflab.lab.compare.precision import Round as Round
from perflab.lab.compare.precision import iteration_seconds as iteration_seconds
from perflab.lab.compare.precision import most_iterations as most_iterations
from perflab.lab.compare.precision import predicted_time as predicted_time
from perflab.lab.compare.precision import to_precision
from perflab.lab.compare.runs import HEAP_VAR as HEAP_VAR
from perflab.lab.compare.sides import Side as Side
from perflab.lab.compare.sides import build_command_side as build_command_side
from perflab.lab.compare.sides import build_side as build_side
from perflab.lab.compare.sides import code_placement as code_placement
from perflab.lab.compare.sides import digests, linked_dynamically
from perflab.lab.compare.sides import identical as identical
from perflab.lab.compare.sides import objects_side as objects_side
from perflab.lab.compare.sides import program_side as program_side
from perflab.lab.compare.sides import refuse_static as refuse_static
from perflab.lab.compare.verdict import CHANGE as CHANGE
from perflab.lab.compare.verdict import CONFIDENCE as CONFIDENCE
from perflab.lab.compare.verdict import EACH_WAY as EACH_WAY
from perflab.lab.compare.verdict import POWER as POWER
from perflab.lab.compare.verdict import STALLED as STALLED
from perflab.lab.compare.verdict import TOO_FEW as TOO_FEW
from perflab.lab.compare.verdict import TRIM as TRIM
from perflab.lab.compare.verdict import covered as covered
from perflab.lab.compare.verdict import fewest_pairs as fewest_pairs
from perflab.lab.compare.verdict import half_width as half_width
from perflab.lab.compare.verdict import interval as interval
from perflab.lab.compare.verdict import overall as overall
from perflab.lab.compare.verdict import pair_interval as pair_interval
from perflab.lab.compare.verdict import pairs_needed as pairs_needed
from perflab.lab.compare.verdict import per_setup as per_setup
from perflab.lab.compare.verdict import shown_change as shown_change
from perflab.lab.compare.verdict import steady as steady
from perflab.lab.compare.verdict import steady_states
from perflab.lab.compare.wording import LABELLED_SETUPS as LABELLED_SETUPS
from perflab.lab.compare.wording import SHOWN_SETUPS as SHOWN_SETUPS
from perflab.lab.compare.wording import plot as plot
from perflab.lab.compare.wording import summary as summary
from perflab.lab.link_order.measure import counters_note
from perflab.plan import controls
from perflab.plan.metrics import check as check_metrics
from perflab.running import childruns, lanes
from perflab.running.childruns import value_column as value_column
from perflab.running.progress import ProgressArg
from perflab.store import results
from perflab.store.recording import FLUSH_S, Recording
from perflab.system import provenance

CHUNK_RUNS = childruns.CHUNK_RUNS  # read at each comparison: a test may make chunks smaller

# Where a program's file sits in physical memory is whatever its first reader left (large
# contiguous folios after a copy's write, scattered pages after an exec's faults), the same
# for a whole session unless drawn per layout: two byte-identical copies of brotli read B/A
# 0.987-1.001 here, 7 of 9 below 1, and claimed a difference 3, 10 and 5 times in 40.
PROGRAM_PAGES = "each program's file read afresh into the page cache as its layout starts"


@controls.plan_arguments(ComparePlan, but=("digests",))
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
    metrics: str | Sequence[str] = ("time",),  # a text: one comma list, as --metric
    **params: Any,  # ComparePlan's fields: named by plan_arguments, typed by the plan
) -> pd.DataFrame:
    """Run A and B interleaved, `repeat` pairs in each of `setups` random setups; tidy frame.

    a, b: the two sides (compare.build_side("A", ["-O2"]), compare.objects_side("A", paths)
    or compare.program_side(name, argv)).
    params: any field of ComparePlan (randomize, setups, repeat, per_placement, env_max,
    heap_max, code_max, layout, var, seed, aslr, cpus, inherit_env, timeout, rt, mlock).
    randomize defaults to env-size, with link-order where perflab links A and B, and for two
    build commands' programs to env-size and what code_placement finds both can draw.
    Journaled to `output` when given, and resumable like a sweep: on_start(todo, done) once,
    progress(n) after each batch of n runs (by default a display on stderr or in Jupyter;
    progress=False for none).
    metrics: what the summary decides on besides time's verdict (the table in plan/metrics.py),
    each with its own interval; refused in one line before any run where this machine cannot
    measure one.

    Returns one row per run: setup, its layout (env_size: bytes of padding; link_order;
    heap_offset and code_offset in bytes; aslr; function_order, a seed; -1: left out), side
    ("A"/"B"), rep, then the child-run columns: ticks (TSC ticks, timer cost subtracted),
    outer_ticks, wall_ns, utime_ns, stime_ns, maxrss_kb, faults, context switches, cycles,
    instructions, exit_code, signal, status (docs/env-size.md). per_setup() and overall() turn
    it into B/A ratios with intervals.
    """
    asked = check_metrics(metrics, "compare")
    cpus = params.pop("cpus", None)
    if a.build and b.build and params.get("randomize") is None and not params.get("layout"):
        params["randomize"] = ("env-size", *code_placement(a, b)[0])  # what both relink draw
    plan = ComparePlan.given(asked, bool(a.objects), a=a.label, b=b.label,
                             digests=(digests(a), digests(b)), **params)  # fmt: skip
    plan = lanes.with_cpus(plan, cpus, output if resume else None).check(
        (len(a.objects), len(b.objects))
    )
    recording = Recording(output, resume, discard_bad)
    recording.check()
    if "heap-offset" in plan.varied():
        a, b = linked_dynamically(a), linked_dynamically(b)
    meta = {
        **provenance.metadata(),
        "experiment": "compare",
        **plan.conditions(),
        "a": a.label,
        "b": b.label,
        "randomize": list(plan.randomize),
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
        "metrics": list(asked),
    }
    if "aslr" in plan.varied():  # the setups' own, not --aslr's: say where to read it
        fixed = parse_layout(plan.layout).get("aslr") if plan.layout else None
        meta["aslr"] = fixed or "drawn per setup (column aslr)"
    measure = partial(runs.measure, chunk_runs=CHUNK_RUNS, flush_s=FLUSH_S)
    if plan.precision:
        df = to_precision(a, b, plan, meta, recording, on_start, progress, warn, measure)
    else:
        setups = draw_setups(plan, [o.label for o in a.objects])
        df = measure(a, b, plan, {s: plan.repeat for s in setups}, meta, recording,
                     on_start=on_start, progress=progress, warn=warn)  # fmt: skip
    return _steady_record(df, recording)


def _steady_record(df: pd.DataFrame, recording: Recording) -> pd.DataFrame:
    """A finished comparison whose runs' iterations were classified, with what was found and
    set aside in its metadata (and its file's): the runs of each class, the warm-up dropped."""
    meta = results.metadata(df)
    if "steady_state" not in df or not meta.get("complete"):
        return df
    states = steady_states(df[df["status"] == "ok"])
    results.attach(df, {**meta, "steady_state": states})
    if recording.output is not None:
        results.save(df, recording.output)
    return df
