"""The env-size sweep on the shift engine: its binary, where each run's frame goes, and the
checks that refuse to measure unless the placement is where an exec'd child's frame is.

The frames come from the stack model the sweep records for its predictions (windows.Layout:
main's frame for the exec'd loop's strings at every size). Before measuring, perflab checks:
- the shift binary keeps every address of the exec'd loop's binary and main's code
  (engine/shift.check_layout);
- the shift child's own main, exec'd once, landed where the model puts it for its strings;
- at a sample of sizes, the frame the shift child gives main (seen in what main's prologue
  pushed) is the frame an exec'd twin reports with the same exec strings (windows.probe).
"""

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from perflab.engine import shift
from perflab.errors import PerflabError
from perflab.lab.env_size import windows
from perflab.lab.plans.env_size import Plan
from perflab.system import compiler

CHECK_SPREAD = 9  # sizes spread over the plan's range, checked
CHECK_STEPS = 16  # and the first STACK_STEP consecutive sizes: every 16-byte rounding


def check_sizes(plan: Plan, least: int) -> np.ndarray:
    """Sizes to check, in the plan's range where it can be: spread over it and a run of
    consecutive ones; none below `least` (the exec'd twin needs that much padding)."""
    lo, hi = max(plan.min_size, least), max(plan.max_size, least)
    spread = np.linspace(lo, hi, CHECK_SPREAD).round().astype(np.int64)
    steps = lo + np.arange(CHECK_STEPS, dtype=np.int64)
    return np.unique(np.concatenate([spread, steps]))


def placement(argv: Sequence[str], plan: Plan, meta: Mapping[str, Any], base_env: Mapping,
              sizes: np.ndarray) -> tuple[shift.Placement, dict]:  # fmt: skip
    """The shift engine's placement for these planned sizes (run order), checked, and what the
    result records about it; a check that fails is one line and nothing is measured."""
    if "stack_layout" not in meta:
        why = meta.get("stack_layout_error", "no layout recorded")
        raise PerflabError(f"--engine shift needs the loop's stack layout, which failed: {why}")
    layout = windows.Layout.from_meta(meta["stack_layout"])
    built = shift.build(compiler.WORKLOADS / windows.BUILTIN[plan.workload][0], plan.opt)
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
    frames = layout.frames(sizes)
    meta_out = {
        "engine": "shift",
        "shift_binary": binary,
        "shift_binary_digest": built.digest,
        "shift_check": checked,
    }
    return shift.Placement(binary, frames, statics), meta_out


def check_frames(plan: Plan, layout: windows.Layout, exec_binary: str, binary: str,
                 base_env: Mapping, statics: tuple[tuple[int, int], ...]) -> dict:  # fmt: skip
    """Refuse unless the shift child puts main's frame where an exec'd child has it: its own
    entry, exec'd, where the model says, and at a sample of sizes the frame an exec'd twin with
    the loop's exec strings reports. Returns what was checked, for the metadata."""
    env = dict(base_env)
    twin = str(windows.twin(plan.opt, plan.workload).path)
    # The twin's path is not the loop's: padding that makes its exec strings the loop's.
    pad = windows.env_strings([exec_binary], env, plan.var, 0) - windows.env_strings(
        [twin], env, plan.var, 0
    )
    sizes = check_sizes(plan, max(0, -pad))
    report = windows.probe((sizes + pad).tolist(), plan.var, env, plan.opt, plan.workload)
    exec_frames = report["frame"].to_numpy(np.int64)
    expected = layout.frames(sizes)
    cpus = plan.cpus[:1]
    entry, seen = shift.placed_frames(shift.Placement(binary, expected, statics), cpus,
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
