"""Rubini's trig.c: ticks of libm calls, the first (cold) call apart from the warm minimum."""

import os
import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from perflab.analysis.summary import Summary, Table
from perflab.core import bindings
from perflab.engine import childruns, inprocess
from perflab.engine.progress import OnStart, ProgressArg
from perflab.errors import PerflabError
from perflab.system import machine

if TYPE_CHECKING:
    from matplotlib.figure import Figure

DEFAULT_CALLS = ("sin(1.0)", "tan(1.0)", "sin(0.0)")
COLUMNS = ("mode", "call", "function", "arg", "position", "rep", "ticks", "ns")
MAX_CALLS = 64
# libm functions whose extra argument is a pointer: called as double(double) they would
# write through garbage. Long-double variants (sinl) are refused too: they return on the
# x87 stack and would leave it unbalanced.
POINTER_ARGS = {"frexp", "modf", "sincos", "remquo", "lgamma_r", "nan"}
_CALL = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*(?:\(\s*([^()]*?)\s*\))?\s*$")


def parse_call(text: str) -> tuple[str, float]:
    """'sin(1.0)' -> ('sin', 1.0); a bare name means argument 1.0."""
    m = _CALL.match(text)
    if not m:
        raise PerflabError(f"bad call {text!r}: write NAME or NAME(NUMBER), e.g. 'sin(1.0)'")
    name, arg = m.group(1), m.group(2)
    try:
        value = float(arg) if arg else 1.0
    except ValueError:
        raise PerflabError(f"bad argument in {text!r}: {arg!r} is not a number") from None
    check_function(name)
    return name, value


def _base(name: str) -> str:
    return name[:-1] if name[-1:] in "fl" else name


def check_function(name: str) -> None:
    """A libm function callable as double(double), or a one-line error saying why not."""
    if not bindings.libm_exists(name):
        raise PerflabError(f"unknown libm function {name!r} (not a function in the C math library)")
    if name in POINTER_ARGS or _base(name) in POINTER_ARGS:
        raise PerflabError(f"{name!r} takes a pointer argument; perflab calls double f(double)")
    if name.endswith("l") and len(name) > 1 and bindings.libm_exists(name[:-1]):
        raise PerflabError(f"{name!r} is a long double function; use {name[:-1]!r}")


def _native_calls(calls: list[tuple[str, float]]) -> bindings.LibmCalls:
    """The sequence as the core takes it; too short or too long is refused."""
    if not 1 <= len(calls) <= MAX_CALLS:
        raise PerflabError(f"give between 1 and {MAX_CALLS} calls, not {len(calls)}")
    return bindings.LibmCalls(calls)


def _label(name: str, arg: float) -> str:
    return f"{name}({arg:g})"


def warm(calls: list[tuple[str, float]], repeat: int = 10) -> pd.DataFrame:
    """trig-rep: the sequence `repeat` times in this process, each call timed alone."""
    if repeat < 1:
        raise PerflabError(f"--repeat must be at least 1, not {repeat}")
    return _frame(calls, _native_calls(calls).warm(repeat), "warm")


def cold(
    calls: list[tuple[str, float]], runs: int = 5, progress: Callable[[int], None] | None = None
) -> pd.DataFrame:
    """trig: the sequence once in each of `runs` fresh processes (their first calls fault)."""
    if runs < 1:
        raise PerflabError(f"--cold must be at least 1, not {runs}")
    native = _native_calls(calls)
    out = np.zeros((runs, len(calls)), dtype=np.int64)
    for r in range(runs):
        out[r] = native.cold()
        if progress:
            progress(1)
    return _frame(calls, out, "cold")


def _frame(
    calls: list[tuple[str, float]], ticks: np.ndarray, mode: str, reps: Sequence[int] | None = None
) -> pd.DataFrame:
    rows = []
    for rep, line in zip(range(len(ticks)) if reps is None else reps, ticks, strict=True):
        for pos, ((name, arg), t) in enumerate(zip(calls, line, strict=True)):
            rows.append(
                {
                    "mode": mode,
                    "call": _label(name, arg),
                    "function": name,
                    "arg": arg,
                    "position": pos,
                    "rep": rep,
                    "ticks": int(t),
                }
            )
    return pd.DataFrame(rows)


def run(
    call_texts: Sequence[str] = DEFAULT_CALLS,
    repeat: int = 10,
    cold_runs: int = 0,
    progress: ProgressArg = None,
    *,
    on_start: OnStart | None = None,
    output: str | os.PathLike | None = None,
    resume: bool = False,
    discard_bad: bool = False,
) -> pd.DataFrame:
    """Cold runs first (so this process's warm-up cannot help them), then the warm repeats.

    output: a .parquet/.csv journal, written in chunks of repeats as they are measured;
    resume=True completes an interrupted one (inprocess.measure); progress counts repeats."""
    calls = [parse_call(t) for t in call_texts]
    if repeat < 1:
        raise PerflabError(f"--repeat must be at least 1, not {repeat}")
    if cold_runs < 0:
        raise PerflabError(f"--cold must be at least 0, not {cold_runs}")
    native = _native_calls(calls)
    hz, _ = machine.tsc_hz()
    meta = {
        **machine.metadata(),
        "experiment": "trig",
        "repeat": repeat,
        "cold_runs": cold_runs,
        "timer_overhead_ticks": bindings.timer_overhead_ticks(),
    }
    modes = [("cold", cold_runs), ("warm", repeat)]
    keys = pd.DataFrame(
        [(mode, rep, pos) for mode, n in modes for rep in range(n) for pos in range(len(calls))],
        columns=["mode", "rep", "position"],
    )
    params = {"calls": [_label(*c) for c in calls], "repeat": repeat, "cold_runs": cold_runs}
    plan = inprocess.Plan("trig", keys, COLUMNS, params, meta, unit=("mode", "rep"),
                          phase=("mode",))  # fmt: skip

    def timed(keys: pd.DataFrame) -> pd.DataFrame:
        reps = list(dict.fromkeys(keys["rep"]))
        if keys["mode"].iloc[0] == "cold":
            df = _frame(calls, np.array([native.cold() for _ in reps]), "cold", reps)
        else:
            if reps[0]:
                # One unrecorded pass first: each recorded rep but 0 (the process's first call)
                # then follows a pass of the sequence, as in one long loop, never perflab's own
                # work between chunks (nor, in a resumed process, a first call).
                native.warm(1)
            df = _frame(calls, native.warm(len(reps)), "warm", reps)
        return df.assign(ns=df["ticks"] / hz * 1e9)

    return inprocess.measure(plan, timed, childruns.Recording(output, resume, discard_bad),
                             on_start=on_start, progress=progress)  # fmt: skip


def summarize(df: pd.DataFrame) -> pd.DataFrame:
    """Per call: the first warm-process value, the warm minimum and median, the cold ones."""
    rows = []
    for call, g in df.groupby("call", sort=False):
        w = g[g["mode"] == "warm"]["ticks"]
        c = g[g["mode"] == "cold"]["ticks"]
        row = {
            "call": call,
            "first": int(w.iloc[0]),
            "warm_min": int(w.min()),
            "warm_median": float(np.median(w)),
        }
        if len(c):
            row.update(cold_min=int(c.min()), cold_median=float(np.median(c)))
        rows.append(row)
    return pd.DataFrame(rows)


def histogram(df: pd.DataFrame) -> pd.DataFrame:
    """The article's `sort | uniq -c | sort`: how often each warm value occurs, per call."""
    w = df[df["mode"] == "warm"]
    counts = w.groupby(["call", "ticks"], sort=False).size().reset_index(name="count")
    return counts.sort_values(["count", "call", "ticks"], kind="stable").reset_index(drop=True)[
        ["count", "call", "ticks"]
    ]


def convergence(df: pd.DataFrame) -> pd.DataFrame:
    """Running minimum of each call over the warm repeats: how fast the minimum settles."""
    w = df[df["mode"] == "warm"]
    wide = w.pivot(index="rep", columns="call", values="ticks")[list(dict.fromkeys(w["call"]))]
    return wide.cummin().reset_index()


def plot(df: pd.DataFrame, path: Any = None) -> "Figure":
    """Ticks of each warm repeat and its running minimum, cold first calls as markers at rep -1."""
    from perflab.analysis import plot as plt

    fig, ax = plt.figure()
    conv = convergence(df)
    for i, call in enumerate(c for c in conv.columns if c != "rep"):
        color = plt.COLORS[i % len(plt.COLORS)]
        w = df[(df["mode"] == "warm") & (df["call"] == call)]
        ax.plot(w["rep"], w["ticks"].clip(lower=1), "o", color=color, markersize=3)
        ax.plot(
            conv["rep"], conv[call].clip(lower=1), "-", color=color, label=f"{call} running min"
        )
        c = df[(df["mode"] == "cold") & (df["call"] == call)]
        if len(c):
            ax.plot([-1] * len(c), c["ticks"].clip(lower=1), "x", color=color)
    plt.log_axes(ax, x=False, y=True)
    ax.set_xlabel("repeat (x at -1: first call in a fresh process)")
    ax.set_ylabel("TSC ticks, timer cost subtracted")
    ax.legend()
    return plt.save(fig, path, title="trig: cold first calls vs warm repeats")


def summary(frame: pd.DataFrame, meta: dict[str, Any]) -> Summary:
    """The warm minimum of each call (and its cold first calls), the histogram of warm values
    and the running minimum."""
    calls, hist, conv = summarize(frame), histogram(frame), convergence(frame)
    repeat, cold_runs = meta.get("repeat", "?"), meta.get("cold_runs", 0)
    lines = []
    for r in calls.itertuples(index=False):
        cold = (
            f"; cold first call {r.cold_min:,}..{r.cold_median:,.0f} (min..median of {cold_runs})"
            if cold_runs and hasattr(r, "cold_min")
            else ""
        )
        lines.append(f"{r.call} takes {r.warm_min:5d} ticks (warm min of {repeat}){cold}")
    tables = [
        Table("summary", "per call (ticks)", calls, "{:.0f}", calls.iloc[:0, :0]),
        Table("histogram", "sort | uniq -c | sort | tail", hist, "{:.0f}",
              hist.tail(max(3, len(calls)))),
        Table("running_min", "running minimum per repeat", conv, "{:.0f}"),
    ]  # fmt: skip
    values = {"repeat": meta.get("repeat"), "cold_runs": cold_runs}
    return Summary(lines, tables, values, lambda p: plot(frame, p))
