"""The env-size sweep on the shift engine: its binary, where each run's frame goes, and the
checks that refuse to measure unless the placement is where an exec'd child's frame is.

The frames come from the stack model the sweep records for its predictions (windows.Layout:
main's frame for the exec'd loop's strings at every size). Before measuring, perflab checks:
- the shift binary keeps every address of the exec'd loop's binary and main's code
  (running/shift.check_layout);
- the shift child's own main, exec'd once, landed where the model puts it for its strings;
- at a sample of sizes, the frame the shift child gives main (seen in what main's prologue
  pushed) is the frame an exec'd twin reports with the same exec strings (windows.probe);
- at sizes whose frames take sixteen successive 16-byte steps, the loop's ticks in the shift
  child are those of exec'd runs, as near as exec'd runs are to each other (check_timing): on
  a Xeon with AMX its medians read 8-14 % above the exec engine's at 21 of 48 sizes, with every
  frame in place, for a reason no check of addresses sees.
"""

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from perflab.core import bindings
from perflab.errors import PerflabError
from perflab.lab.env_size import windows
from perflab.lab.env_size.plan import EnvSizePlan
from perflab.running import childruns, shift, spawn
from perflab.system import compiler

CHECK_SPREAD = 9  # sizes spread over the plan's range, checked
CHECK_STEPS = 16  # and the first STACK_STEP consecutive sizes: every 16-byte rounding
TIMING_FRAMES = 16  # sizes a frame step (16 bytes) apart whose ticks the timing check compares
TIMING_ROUNDS = 9  # rounds of exec'd run, shift call, exec'd run at each of them
AGREE = math.log1p(0.02)  # engines whose medians are this near agree, however near exec's are
# A bias at every size beyond this (and beyond twice exec'd runs' own drift) is refused: the
# check's median over its sizes moves 1-3 % between runs on a quiet Xeon guest.
BIAS = math.log1p(0.05)
# Sizes beyond exec's own agreement, one way, that make the engines differ: a bias of the
# engine moves many sizes one way; the host's noise moves a few, either way.
DIFFER_SHARE = 0.2
DIFFER_LEAST = 3


def check_sizes(plan: EnvSizePlan, least: int) -> np.ndarray:
    """Sizes to check, in the plan's range where it can be: spread over it and a run of
    consecutive ones; none below `least` (the exec'd twin needs that much padding)."""
    lo, hi = max(plan.min_size, least), max(plan.max_size, least)
    spread = np.linspace(lo, hi, CHECK_SPREAD).round().astype(np.int64)
    steps = lo + np.arange(CHECK_STEPS, dtype=np.int64)
    return np.unique(np.concatenate([spread, steps]))


def placement(argv: Sequence[str], plan: EnvSizePlan, meta: Mapping[str, Any], base_env: Mapping,
              sizes: np.ndarray) -> tuple[shift.ShiftedFrames, dict]:  # fmt: skip
    """The shift engine's placement for these planned sizes (run order), checked, and what the
    result records about it; a check that fails is one line and nothing is measured."""
    if "stack_layout" not in meta:
        why = meta.get("stack_layout_error", "no layout recorded")
        raise PerflabError(f"--engine shift needs the loop's stack layout, which failed: {why}")
    layout = windows.Layout.from_meta(meta["stack_layout"])
    loop = plan.loop_layout()
    built = shift.build(compiler.WORKLOADS / windows.BUILTIN[plan.workload][0], plan.opt,
                        loop.flags())  # fmt: skip
    exec_binary = argv[0]
    if not built.static or not meta.get("static"):
        raise PerflabError(
            "--engine shift needs the loop linked statically (its addresses fixed at link time); "
            "this C library has no static archive: use --engine exec"
        )
    shift.check_layout(exec_binary, built.path)
    statics = tuple((a.offset, a.size) for a in layout.accesses if a.where == "static")
    binary = str(built.path)
    checked = check_frames(plan, layout, exec_binary, binary, base_env, statics)
    checked["timing"] = check_timing(plan, layout, argv, binary, base_env, statics)
    frames = layout.frames(sizes)
    meta_out = {
        "engine": "shift",
        "shift_binary": binary,
        "shift_binary_digest": built.digest,
        "shift_check": checked,
    }
    return shift.ShiftedFrames(binary, frames, statics), meta_out


def check_frames(plan: EnvSizePlan, layout: windows.Layout, exec_binary: str, binary: str,
                 base_env: Mapping, statics: tuple[tuple[int, int], ...]) -> dict:  # fmt: skip
    """Refuse unless the shift child puts main's frame where an exec'd child has it: its own
    entry, exec'd, where the model says, and at a sample of sizes the frame an exec'd twin with
    the loop's exec strings reports. Returns what was checked, for the metadata."""
    env = dict(base_env)
    loop = plan.loop_layout()
    twin = str(windows.twin(plan.opt, plan.workload, loop).path)
    # The twin's path is not the loop's: padding that makes its exec strings the loop's.
    pad = windows.env_strings([exec_binary], env, plan.var, 0) - windows.env_strings(
        [twin], env, plan.var, 0
    )
    sizes = check_sizes(plan, max(0, -pad))
    report = windows.probe((sizes + pad).tolist(), plan.var, env, plan.opt, plan.workload, loop)
    exec_frames = report["frame"].to_numpy(np.int64)
    expected = layout.frames(sizes)
    cpus = plan.cpus[:1]
    entry, seen = shift.placed_frames(shift.ShiftedFrames(binary, expected, statics), cpus,
                                      plan.timeout)  # fmt: skip
    own = int(layout.model.frame(windows.exec_strings([binary], [])))
    if entry != own:
        raise PerflabError(
            f"--engine shift: exec'd, the shift child's main frame is at {entry:#x}, not at "
            f"{own:#x} where the stack model puts it; use --engine exec"
        )
    wrong = np.flatnonzero(seen != exec_frames)
    if wrong.size:
        i = int(wrong[0])
        raise PerflabError(
            f"--engine shift: at env size {int(sizes[i])} an exec'd child's main frame is at "
            f"{int(exec_frames[i]):#x} and the shift child's at {int(seen[i]):#x}; use "
            "--engine exec"
        )
    return {"sizes": sizes.tolist(), "frames": [hex(int(f)) for f in seen],
            "entry_frame": hex(entry)}  # fmt: skip


def timing_sizes(plan: EnvSizePlan) -> np.ndarray:
    """TIMING_FRAMES sizes a frame step apart from the plan's first (its range permitting, else
    spread over it), with the plan's last: frames at every 16-byte offset in a 256-byte span."""
    step = windows.STACK_STEP
    lo, hi = plan.min_size, plan.max_size
    if hi - lo >= step * (TIMING_FRAMES - 1):
        sizes = lo + step * np.arange(TIMING_FRAMES, dtype=np.int64)
    else:
        sizes = np.linspace(lo, hi, TIMING_FRAMES).round().astype(np.int64)
    return np.unique(np.r_[sizes, hi])


def agreement(exec_a: np.ndarray, shifted: np.ndarray, exec_b: np.ndarray) -> dict[str, Any]:
    """How far the shift child's median ticks stand from exec'd runs' at each size (columns;
    rounds in rows), against how far exec'd runs' first and second runs of each round stand
    from each other (its own agreement, AGREE at least): sizes beyond it either way."""

    def median(x: np.ndarray) -> np.ndarray:
        return np.nanmedian(np.where(x > 0, x, np.nan), axis=0)

    a, b, s = median(exec_a), median(exec_b), median(shifted)
    both = median(np.vstack([exec_a, exec_b]))
    bound = max(float(np.nanmax(np.abs(np.log(b / a)))), AGREE)
    d = np.log(s / both)
    return {"sizes": int(np.isfinite(d).sum()), "bound": math.expm1(bound),
            "ratio": math.exp(float(np.nanmedian(d))),
            "drift": math.expm1(abs(float(np.nanmedian(np.log(b / a))))),
            "slower": int((d > bound).sum()),
            "faster": int((d < -bound).sum()),
            "beyond": [round(math.expm1(float(x)), 4) for x in d[np.abs(d) > bound]]}  # fmt: skip


def disagreement(found: Mapping[str, Any]) -> str | None:
    """The refusal when the engines differ (agreement's figures): many sizes beyond exec's own
    agreement, the same way, or the median over all sizes beyond BIAS and twice exec'd runs'
    own median drift (a bias at every size, which no one size shows); None when they agree as
    far as exec'd runs can tell."""
    n = found["sizes"]
    ratio, drift = found["ratio"], found.get("drift", 0.0)
    if abs(math.log(ratio)) > max(BIAS, 2 * math.log1p(drift)):
        way = "slower" if ratio > 1 else "faster"
        return (
            f"--engine shift: over {n} sizes its loop ran {abs(ratio - 1):.0%} {way} than exec'd "
            f"runs at the same frames, which drift {drift:.1%} from themselves; use --engine exec"
        )
    way, many = max(("slower", found["slower"]), ("faster", found["faster"]), key=lambda w: w[1])
    if many < max(DIFFER_LEAST, math.ceil(DIFFER_SHARE * n)):
        return None
    sign = 1 if way == "slower" else -1
    moved = [abs(x) for x in found["beyond"] if x * sign > 0]
    low, high = f"{min(moved):.0%}", f"{max(moved):.0%}"
    by = low if low == high else f"{low}-{high}"
    return (
        f"--engine shift: at {many} of {n} sizes its loop ran {by} {way} than exec'd runs at "
        "the same frames, which agree with themselves within "
        f"{found['bound']:.0%}; use --engine exec"
    )


def check_timing(plan: EnvSizePlan, layout: windows.Layout, argv: Sequence[str], binary: str,
                 base_env: Mapping, statics: tuple[tuple[int, int], ...]) -> dict:  # fmt: skip
    """Refuse unless the loop in the shift child takes the ticks exec'd runs take at the same
    frames: in TIMING_ROUNDS rounds, on the plan's first CPU, an exec'd run, a shift call and
    an exec'd run again at each timing size. Returns agreement's figures, for the metadata."""
    sizes = timing_sizes(plan)
    env = dict(base_env)
    overhead = spawn.timer_overhead()
    ticks = {k: np.zeros((TIMING_ROUNDS, sizes.size)) for k in ("exec_a", "shifted", "exec_b")}
    placement = shift.ShiftedFrames(binary, layout.frames(sizes), statics)

    def ran(runs: np.ndarray) -> np.ndarray:
        ok = (runs["status"] == bindings.RUN_OK) & ((runs["flags"] & bindings.RUN_HAS_PROBE) != 0)
        return np.where(ok, runs["probe_ticks"].astype(float) - overhead, np.nan)

    cpus = plan.cpus[:1]
    with childruns.quiet_options(plan) as quiet, \
            shift.started(placement, cpus, plan.timeout, plan.mlock, plan.rt) as child:  # fmt: skip
        options = replace(quiet, cpus=cpus)
        for r in range(TIMING_ROUNDS):
            ticks["exec_a"][r] = ran(spawn.run_env_sizes(argv, sizes, plan.var, env, options))
            called = shift.run_frames(child, placement.frames)
            shift.check_placed(called, placement.frames)
            ticks["shifted"][r] = ran(shift.records(called, sizes))
            ticks["exec_b"][r] = ran(spawn.run_env_sizes(argv, sizes, plan.var, env, options))
    found = agreement(ticks["exec_a"], ticks["shifted"], ticks["exec_b"])
    refusal = disagreement(found)
    if refusal:
        raise PerflabError(refusal)
    return found
