"""What this machine's timer resolves: a figure comes from a sample of MIN_STEPS timer steps or
more (a TSC read in steps of 26 ticks times no single short event), else it is unresolved."""

import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from perflab.analysis import stats
from perflab.errors import PerflabError
from perflab.system import timer

MIN_STEPS = 100  # one step is then at most 1 % of a sample
MAX_CALLS = 1 << 20  # calls per sample, at most


def min_sample_ticks() -> int:
    """The shortest sample a figure may come from here: MIN_STEPS steps of the timer."""
    return MIN_STEPS * timer.timer_step()


def calls_per_sample(probe: Callable[[int], np.ndarray], target: int | None = None) -> int:
    """The fewest power-of-two calls per sample whose shortest probe lasts twice the target
    (min_sample_ticks()): the margin keeps the samples measured after it above the target.
    probe(calls) returns the ticks of a few samples of that many calls."""
    target = min_sample_ticks() if target is None else target
    calls = 1
    while calls < MAX_CALLS and probe(calls).min() < 2 * target:
        calls *= 2
    return calls


def recorded_step(meta: Mapping[str, Any], sample_ticks: ArrayLike) -> int:
    """The timer step a result was measured with: its metadata's, else the step its samples'
    ticks move in (a file from before perflab recorded the step)."""
    if meta.get("timer_step_ticks"):
        return int(meta["timer_step_ticks"])
    t = np.asarray(sample_ticks, dtype=float)
    t = np.sort(np.round(t[np.isfinite(t)]).astype(np.int64))
    return max(1, stats.quantum(np.diff(t)))


def resolved(sample_ticks: ArrayLike, step: int) -> np.ndarray:
    """Which samples lasted MIN_STEPS steps of a timer of this step or more."""
    return np.asarray(sample_ticks, dtype=float) >= MIN_STEPS * step


def unresolved_note(count: int, what: str, step: int) -> str:
    """The sentence a summary says of the values it leaves out or marks."""
    return (
        f"{count} {what} lasted less than {MIN_STEPS} timer steps ({MIN_STEPS * step:,} ticks, "
        f"one step {step}): unresolved, no figure comes from them"
    )


def figures(
    values: ArrayLike, sample_ticks: ArrayLike, step: int, trim: int = 0
) -> dict[str, float]:
    """n, min, max, mean and median of values (and, with `trim`, trimmed_min/max/mean without
    the trim smallest and largest), each NaN where a sample it comes from lasted less than
    MIN_STEPS steps; `unresolved` counts those samples."""
    v = np.asarray(values, dtype=float)
    if trim < 0 or 2 * trim >= v.size:
        raise PerflabError(f"cannot drop {trim} from each end of {v.size} values")
    order = np.argsort(v, kind="stable")
    v, ok = v[order], resolved(np.asarray(sample_ticks, dtype=float)[order], step)
    lo, hi = (v.size - 1) // 2, v.size // 2

    def shown(value: float, good: object) -> float:
        return float(value) if good else math.nan

    out = {
        "n": int(v.size),
        "min": shown(v[0], ok[0]),
        "max": shown(v[-1], ok[-1]),
        "mean": shown(v.mean(), ok.all()),
        "median": shown((v[lo] + v[hi]) / 2, ok[lo] and ok[hi]),
        "unresolved": int((~ok).sum()),
    }
    if trim:
        t, good = v[trim : v.size - trim], ok[trim : v.size - trim]
        out.update(
            trimmed_min=shown(t[0], good[0]),
            trimmed_max=shown(t[-1], good[-1]),
            trimmed_mean=shown(t.mean(), good.all()),
        )
    return out
