"""The readable report of a Comparison: what a failing assertion prints."""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from perflab.assertions.verdicts import DISTURBED, INCONCLUSIVE


def render(c: Any) -> str:
    """The readable report of a comparison.Comparison (which calls this module, so it is not
    named here), the message of a failing assertion."""
    head = f"perflab.{c.assertion}: {c.verdict.upper()} - {c.reason}"
    lines = [head, f"claim: {c.claim} at {c.confidence:.0%} confidence"]
    width = max(len(n) for n in c.names) + 2
    lines.append(
        f"  {'role':<10}{'target':<{width}}{'median ticks/call':>18}"
        f"{'+/- step/call':>14}{'calls/run':>11}{'overhead/call':>15}{'runs':>7}"
    )
    for role, name, med, res, calls, ovh in zip(
        c.roles,
        c.names,
        c.medians,
        c.resolutions,
        c.calls,
        c.overheads,
        strict=True,
    ):
        lines.append(
            f"  {role:<10}{name:<{width}}{med:>18.1f}{res:>14.3g}{calls:>11}{ovh:>15.1f}{c.runs:>7}"
        )
    what = "ratio" if len(c.roles) == 2 else "median"
    lines.append(
        f"  {what} {c.estimate:.4g}, {c.level:.2%} CI [{c.ci[0]:.4g}, "
        f"{c.ci[1]:.4g}] vs threshold {c.threshold:.4g}"
    )
    kind = "Python callables" if c.floor_kind == "python" else "C functions"
    lines.append(
        f"  basis: order-statistic interval of each median, widened by one timer step "
        f"({c.step} ticks) per run"
        + (
            f", and by the placement floor {100 * c.floor:.2g} % (distinct {kind})"
            if c.floor
            else ""
        )
    )
    if c.floor_note:
        lines.append(f"  {c.floor_note}")
    lines.append(
        f"  {c.rounds} round(s), {c.runs} runs per target, {c.seconds:.2f} s, "
        f"budget {c.budget}"
        + (f", waited {c.lock_wait:.2f} s for other perf tests" if c.lock_wait > 0.1 else "")
    )
    shares = ", ".join(
        f"{role} {share:.0%}" for role, share in zip(c.roles, c.disturbed, strict=True)
    )
    lines.append(
        f"  runs over {DISTURBED}x the target's fastest: {shares}; "
        f"load average {c.load:.1f} on {os.cpu_count()} CPUs"
    )
    if c.lanes and c.cpu:
        lines.append(f"  side by side, one child per CPU {', '.join(map(str, c.lanes))}; "
                     f"median per CPU: {_per_cpu(c)}")  # fmt: skip
    if any(c.warmup):
        lines.append(f"  steady state (warmup_stats' classes of each side's runs): {_steady(c)}")
    if c.within_floor:
        lines.append(
            "  the difference lies within the placement floor: no budget decides it; compare "
            "one function's variants through one pointer, or pass placement_floor=0 to "
            "trust placement"
        )
    elif c.verdict == INCONCLUSIVE and c.no_steady:
        lines.append(
            f"  no steady state: the {' and '.join(c.no_steady)} side's time per run kept "
            "changing to the last runs (a warm-up longer than the budget, a slowdown with no "
            "end, or load that shifts it), so no one speed of it can be claimed"
        )
    elif c.verdict == INCONCLUSIVE:
        lines.append(
            "  the budget ran out before the interval decided: raise --perflab-budget, "
            "lower --perflab-confidence, or quieten the machine"
        )
    return "\n".join(lines)


def _per_cpu(comparison: Any) -> str:
    """Each role's median ticks per call on each lane CPU: a CPU that favours one is seen."""
    parts = []
    for role, s, cpu in zip(comparison.roles, comparison.samples, comparison.cpu, strict=True):
        meds = [f"{c}: {np.median(s[cpu == c]):.1f}" for c in comparison.lanes if (cpu == c).any()]
        parts.append(f"{role} " + ", ".join(meds))
    return "; ".join(parts)


def _steady(c: Any) -> str:
    """Each classified side's class and steady start, and the runs dropped before deciding."""
    sides = []
    for role, cls, start in zip(c.roles, c.warmup, c.steady_starts, strict=True):
        if cls:
            sides.append(f"{role} {cls}" + (f" from run {start}" if start else ""))
    said = ", ".join(sides)
    if c.no_steady:
        return f"{said}; not decided while a side has none"
    if c.dropped:
        return (f"{said}; the first {c.dropped} runs of each dropped as warm-up, decided on "
                f"the {c.runs - c.dropped} after")  # fmt: skip
    return f"{said}; every run kept"
