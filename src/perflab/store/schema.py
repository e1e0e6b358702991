"""The types and ranges of what perflab writes in a result, checked once when a file is read:
a hand-edited or foreign file (negative or infinite ticks, a status no run ends with, a TSC
rate that is text) is one line naming the column or key, never a number reported as a result
or an exception from deep inside a summary."""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Mapping
from typing import Any

from perflab.core.lazy import pd
from perflab.errors import PerflabError

# Columns that hold a duration, a rate or a count wherever perflab writes them: numbers, never
# negative nor infinite; missing (NaN) where a run did not measure them (no probe, no counter).
# A column absent here (a difference such as cswitch_us_each, a derivative) is not checked.
NON_NEGATIVE = frozenset(
    {
        "ticks", "outer_ticks", "wall_ns", "utime_ns", "stime_ns", "cpu_ns", "ns",
        "lifetime_ns", "blocked_ns", "runq_ns", "user_ns", "system_ns", "steal_ns",
        "alone_ns", "pingpong_ns", "alone_us_each", "roundtrip_us_each", "wall_ms",
        "ticks_per_page", "ns_per_page", "ticks_per_byte", "gb_per_s", "fauxplat_per_s",
        "fauxplat_wall_per_s", "maxrss_kb", "minflt", "majflt", "nvcsw", "nivcsw", "cycles",
        "instructions", "count", "calls", "copies", "passes", "pages", "size", "bytes",
        "loops", "iterations", "env_size", "rep", "threads", "perm", "setup", "n",
    }
)  # fmt: skip
# Where a negative value is a measurement: the step between two reads of a clock that NTP set
# back, an in-process sample less the timer's calibrated cost (its minimum) that came in under it;
# or compare's -1 for a size a setup leaves out (lab/compare/plan.NO_PADDING).
SIGNED = {
    "clocks": frozenset({"ns", "ticks"}),
    "syscalls": frozenset({"ns", "ticks"}),
    "trig": frozenset({"ns", "ticks"}),
    "compare": frozenset({"env_size"}),
}
# What a run's status says besides a child run's (the C core's, running/spawn.py): an
# in-process run's, an event's.
STATUSES = frozenset({"ok", "unavailable", "counts"})
EVENT_STATUS = "not supported here"  # an event's status, followed by why (system/counters.py)


def _number(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _positive(value: Any) -> bool:
    return _number(value) and math.isfinite(value) and value > 0


def _at_least(low: float) -> Callable[[Any], bool]:
    return lambda v: _number(v) and math.isfinite(v) and v >= low


def _whole(low: int) -> Callable[[Any], bool]:
    return lambda v: isinstance(v, numbers.Integral) and not isinstance(v, bool) and int(v) >= low


def _fraction(value: Any) -> bool:
    return _number(value) and 0 < value < 1


def _text(value: Any) -> bool:
    return isinstance(value, str)


def _words(value: Any) -> bool:
    return isinstance(value, str) or (
        isinstance(value, list) and all(isinstance(w, str) for w in value)
    )


def _cpus(value: Any) -> bool:
    return isinstance(value, list) and all(_whole(0)(c) for c in value)


# Metadata keys readers compute with, and what each must be when present (None always may):
# the machine's figures, the saved analysis options (--trim, --small, -k, --change), the
# journal's records.
META: dict[str, tuple[Callable[[Any], bool], str]] = {
    "experiment": (_text, "a text"),
    "perflab_version": (_text, "a text"),
    "hostname": (_text, "a text"),
    "cpu_model": (_text, "a text"),
    "kernel": (_text, "a text"),
    "clocksource": (_text, "a text"),
    "tsc_hz": (_positive, "a positive number of Hz"),
    "timer_step_ticks": (_at_least(0), "a number of ticks >= 0"),
    "online_cpus": (_whole(0), "a whole number >= 0"),
    "cpus": (_cpus, "a list of CPU numbers"),
    "program": (_words, "a text or a list of texts"),
    "params": (lambda v: isinstance(v, dict), "a mapping"),
    "identity": (lambda v: isinstance(v, dict), "a mapping"),
    "complete": (lambda v: isinstance(v, bool), "true or false"),
    "incomplete": (_text, "a text"),
    "trim": (_whole(0), "a whole number >= 0"),
    "small": (_whole(0), "a whole number >= 0"),
    "window_k": (_at_least(0), "a finite number >= 0"),
    "change": (_fraction, "a fraction above 0 and below 1"),
    "repeat": (_whole(1), "a whole number >= 1"),
    "cold_runs": (_whole(0), "a whole number >= 0"),
    "iterations": (_whole(1), "a whole number >= 1"),
    "trials": (_whole(1), "a whole number >= 1"),
}

DAMAGED = "changed after perflab saved it, or not a result perflab wrote"


def check(df: pd.DataFrame, meta: Mapping[str, Any], where: object) -> None:
    """Refuse, in one line, a frame or metadata that breaks the types and ranges perflab
    writes (see NON_NEGATIVE, STATUSES, META)."""
    experiment = str(meta.get("experiment") or "").removesuffix(" campaign")
    problem = meta_problem(meta) or frame_problem(df, SIGNED.get(experiment, frozenset()))
    if problem:
        raise PerflabError(f"{where}: {problem} ({DAMAGED})")


def meta_problem(meta: Mapping[str, Any]) -> str | None:
    """The first metadata key whose value is not of its type or range, said; else None."""
    for key, (fits, what) in META.items():
        value = meta.get(key)
        if value is not None and not fits(value):
            return f"its metadata's {key} is {_shown(value)}, not {what}"
    return None


def frame_problem(df: pd.DataFrame, signed: frozenset[str] = frozenset()) -> str | None:
    """The first column that breaks its type or range (the `signed` ones may be negative),
    said; else None."""
    for col in map(str, df.columns):
        if col in NON_NEGATIVE:
            said = _numbers_problem(df[col], col not in signed)
        elif col == "status":
            said = _status_problem(df[col])
        else:
            continue
        if said:
            return f"column {col} {said}"
    return None


def _numbers_problem(column: pd.Series, non_negative: bool) -> str | None:
    import numpy as np

    if pd.api.types.is_bool_dtype(column) or not pd.api.types.is_numeric_dtype(column):
        return f"holds {column.dtype} values, not numbers"
    x = column.to_numpy(dtype=float, na_value=np.nan)
    infinite, negative = int(np.isinf(x).sum()), int((x < 0).sum())
    if infinite:
        return f"holds {infinite} infinite values"
    if negative and non_negative:
        return f"holds {negative} negative values (lowest {np.nanmin(x):g})"
    return None


def _status_problem(column: pd.Series) -> str | None:
    from perflab.core import bindings  # the C core's names, loaded only for a status column

    known = STATUSES | {bindings.RUN_STATUS[i] for i in range(len(bindings.RUN_STATUS))}
    missing = int(column.isna().sum())
    if missing:
        return f"has {missing} rows without a value"
    for value in pd.unique(column.to_numpy(dtype=object)):
        if not isinstance(value, str) or not (value in known or value.startswith(EVENT_STATUS)):
            return f"holds {_shown(value)}, which is no run's status"
    return None


def _shown(value: Any) -> str:
    """A value as an error quotes it: its repr, cut short."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
