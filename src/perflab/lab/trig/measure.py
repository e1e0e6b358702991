"""Rubini's trig.c measured: a warm sample times enough back-to-back calls of one function to
last twice MIN_STEPS timer steps (resolution.py) and records ticks per call; a cold sample is the
first call of a fresh process, alone, and a figure made of one shorter than MIN_STEPS steps is
reported unresolved."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from perflab.analysis.summary import Summary, Table
from perflab.core import bindings
from perflab.core.lazy import pd
from perflab.errors import PerflabError
from perflab.lab import resolution
from perflab.lab.trig import TrigPlan
from perflab.plan import controls
from perflab.running import inprocess
from perflab.store import results
from perflab.store.recording import Recording
from perflab.system import machine, provenance

if TYPE_CHECKING:
    from matplotlib.figure import Figure

COLUMNS = ("mode", "call", "function", "arg", "position", "rep", "calls", "ticks", "ns")
PROBES = 3  # samples per calibration step
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


def calibrate(native: bindings.LibmCalls) -> list[int]:
    """Calls per sample of each function of the sequence, each sample lasting twice
    min_sample_ticks(): the probes also warm every call up."""
    per = [1] * native.n
    for j in range(native.n):

        def probe(calls: int, j: int = j) -> np.ndarray:
            return native.warm(PROBES, [*per[:j], calls, *per[j + 1 :]])[:, j]

        per[j] = resolution.calls_per_sample(probe)
    return per


def warm(calls: list[tuple[str, float]], repeat: int = 10) -> pd.DataFrame:
    """trig-rep: the sequence `repeat` times in this process, a calibrated batch per call."""
    if repeat < 1:
        raise PerflabError(f"--repeat must be at least 1, not {repeat}")
    native = _native_calls(calls)
    per = calibrate(native)
    return _frame(calls, native.warm(repeat, per), "warm", per=per)


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
    calls: list[tuple[str, float]],
    ticks: np.ndarray,
    mode: str,
    reps: Sequence[int] | None = None,
    per: Sequence[int] | None = None,
) -> pd.DataFrame:
    """Rows of samples (repeat, len(calls)) of `per` calls each (None: one): ticks per call."""
    per = per or [1] * len(calls)
    rows = []
    for rep, line in zip(range(len(ticks)) if reps is None else reps, ticks, strict=True):
        for pos, ((name, arg), t, n) in enumerate(zip(calls, line, per, strict=True)):
            rows.append(
                {
                    "mode": mode,
                    "call": _label(name, arg),
                    "function": name,
                    "arg": arg,
                    "position": pos,
                    "rep": rep,
                    "calls": int(n),
                    "ticks": float(t) / n,
                }
            )
    return pd.DataFrame(rows)


@controls.typed_arguments
def run(
    calls: Sequence[str] = TrigPlan.calls,
    repeat: int = TrigPlan.repeat,
    cold_runs: int = TrigPlan.cold_runs,
    *,
    recording: Recording | None = None,
) -> pd.DataFrame:
    """Cold runs first (so this process's warm-up cannot help them), then the warm repeats,
    their calls per sample calibrated before the first; `calls` as NAME or NAME(NUMBER).

    recording: where the rows go (a .parquet/.csv journal written in chunks of repeats as they
    are measured, resumed if asked: inprocess.measure) and the progress that counts them."""
    parsed = [parse_call(t) for t in calls]
    TrigPlan(tuple(calls), repeat, cold_runs).check()
    native = _native_calls(parsed)
    hz, _ = machine.tsc_hz()
    meta = {
        **provenance.metadata(),
        "experiment": "trig",
        "repeat": repeat,
        "cold_runs": cold_runs,
        "timer_overhead_ticks": bindings.timer_overhead_ticks(),
        "min_sample_steps": resolution.MIN_STEPS,
    }
    modes = [("cold", cold_runs), ("warm", repeat)]
    keys = pd.DataFrame(
        [(mode, rep, pos) for mode, n in modes for rep in range(n) for pos in range(len(parsed))],
        columns=["mode", "rep", "position"],
    )
    params = {"calls": [_label(*c) for c in parsed], "repeat": repeat, "cold_runs": cold_runs}
    plan = inprocess.RowSchedule("trig", keys, COLUMNS, params, meta, unit=("mode", "rep"),
                          phase=("mode",))  # fmt: skip

    per: list[int] = []

    def timed(keys: pd.DataFrame) -> pd.DataFrame:
        reps = list(dict.fromkeys(keys["rep"]))
        if keys["mode"].iloc[0] == "cold":
            df = _frame(parsed, np.array([native.cold() for _ in reps]), "cold", reps)
        else:
            # Each recorded rep follows a pass of the sequence (the calibration's, or one
            # unrecorded), as in one long loop, never perflab's own work between chunks.
            if per:
                native.warm(1, per)
            else:
                per.extend(calibrate(native))
            df = _frame(parsed, native.warm(len(reps), per), "warm", reps, per)
        return df.assign(ns=df["ticks"] / hz * 1e9)

    return inprocess.measure(plan, timed, recording)


def _samples(df: pd.DataFrame) -> pd.Series:
    """Ticks of each row's whole sample (a file from before perflab batched calls: one call)."""
    return df["ticks"] * df.get("calls", 1)


def summarize(df: pd.DataFrame, step: int | None = None) -> pd.DataFrame:
    """Per call: calls per warm sample, the warm minimum and median (ticks per call), the cold
    first call's; a figure whose sample lasted less than MIN_STEPS timer steps is NaN."""
    step = step or resolution.recorded_step(results.metadata(df), _samples(df))
    rows = []
    for call, g in df.groupby("call", sort=False):
        w, c = g[g["mode"] == "warm"], g[g["mode"] == "cold"]
        fw = resolution.figures(w["ticks"], _samples(w), step)
        row = {"call": call, "calls": int(w["calls"].max()) if "calls" in w else 1,
               "warm_min": fw["min"], "warm_median": fw["median"]}  # fmt: skip
        if len(c):
            fc = resolution.figures(c["ticks"], _samples(c), step)
            row.update(cold_min=fc["min"], cold_median=fc["median"],
                       cold_unresolved=fc["unresolved"])  # fmt: skip
        rows.append(row)
    return pd.DataFrame(rows)


def _resolved_warm(df: pd.DataFrame, step: int | None = None) -> pd.DataFrame:
    w = df[df["mode"] == "warm"]
    step = step or resolution.recorded_step(results.metadata(df), _samples(df))
    return w[resolution.resolved(_samples(w), step)]


def histogram(df: pd.DataFrame, step: int | None = None) -> pd.DataFrame:
    """The article's `sort | uniq -c | sort`: how often each warm value (ticks per call, to the
    nearest tick) occurs, per call, of the samples the timer resolves."""
    w = _resolved_warm(df, step)
    w = w.assign(ticks=w["ticks"].round().astype(np.int64))
    counts = w.groupby(["call", "ticks"], sort=False).size().reset_index(name="count")
    return counts.sort_values(["count", "call", "ticks"], kind="stable").reset_index(drop=True)[
        ["count", "call", "ticks"]
    ]


def most_frequent(hist: pd.DataFrame, per_call: int = 3) -> pd.DataFrame:
    """The article's `| tail`, per call: each call's most frequent values, so a call with many
    distinct values does not push the others out of the table."""
    order = {call: i for i, call in enumerate(dict.fromkeys(hist["call"]))}
    ranked = hist.assign(rank=hist["call"].map(order)).sort_values(
        ["rank", "count"], ascending=[True, False], kind="stable"
    )
    return ranked.groupby("call", sort=False).head(per_call).drop(columns="rank")


def convergence(df: pd.DataFrame, step: int | None = None) -> pd.DataFrame:
    """Running minimum of each call's ticks per call over the warm repeats the timer resolves:
    how fast the minimum settles."""
    w = _resolved_warm(df, step)
    order = list(dict.fromkeys(df.loc[df["mode"] == "warm", "call"]))
    wide = w.pivot(index="rep", columns="call", values="ticks").reindex(columns=order)
    return wide.cummin().reset_index()


def plot(df: pd.DataFrame, path: Any = None, step: int | None = None) -> Figure:
    """Ticks per call of each warm repeat and its running minimum, cold first calls as markers
    at rep -1: only samples the timer resolves."""
    from perflab.analysis import plot as plt

    step = step or resolution.recorded_step(results.metadata(df), _samples(df))
    fig, ax = plt.figure()
    conv = convergence(df, step)
    w, c = _resolved_warm(df, step), df[df["mode"] == "cold"]
    c = c[resolution.resolved(_samples(c), step)]
    for i, call in enumerate(col for col in conv.columns if col != "rep"):
        color = plt.COLORS[i % len(plt.COLORS)]
        mine = w[w["call"] == call]
        ax.plot(mine["rep"], mine["ticks"], "o", color=color, markersize=3)
        ax.plot(conv["rep"], conv[call], "-", color=color, label=f"{call} running min")
        cold = c[c["call"] == call]
        if len(cold):
            ax.plot([-1] * len(cold), cold["ticks"], "x", color=color)
    plt.log_axes(ax, x=False, y=True)
    ax.set_xlabel("repeat (x at -1: first call in a fresh process)")
    ax.set_ylabel("TSC ticks per call, timer cost subtracted")
    ax.legend()
    floor = f"samples under {resolution.MIN_STEPS} timer steps left out"
    return plt.save(fig, path, title=f"trig: cold first calls vs warm repeats; {floor}")


def summary(frame: pd.DataFrame, meta: dict[str, Any]) -> Summary:
    """The warm minimum of each call (and its cold first calls), the histogram of warm values
    and the running minimum, of the samples the timer resolves."""
    step = resolution.recorded_step(meta, _samples(frame))
    calls, hist, conv = summarize(frame, step), histogram(frame, step), convergence(frame, step)
    repeat, cold_runs = meta.get("repeat", "?"), meta.get("cold_runs", 0)
    floor = resolution.MIN_STEPS * step
    lines = []
    for r in calls.itertuples(index=False):
        warm = f"{r.warm_min:7.1f} ticks per call (warm min of {repeat} samples of {r.calls:,})"
        if not np.isfinite(r.warm_min):
            warm = f"unresolved ticks (warm samples under {floor:,} ticks)"
        cold = ""
        if cold_runs and hasattr(r, "cold_min"):
            lo = f"{r.cold_min:,.0f}" if np.isfinite(r.cold_min) else f"<{floor:,}"
            mid = f"{r.cold_median:,.0f}" if np.isfinite(r.cold_median) else f"<{floor:,}"
            cold = f"; cold first call {lo}..{mid} (min..median of {cold_runs})"
        lines.append(f"{r.call} takes {warm}{cold}")
    if "cold_unresolved" in calls and calls["cold_unresolved"].any():
        lines.append(
            resolution.unresolved_note(
                int(calls["cold_unresolved"].sum()), "cold first calls", step
            )
            + f" (a first call is one event, not to be batched: shown as <{floor:,})"
        )
    tables = [
        Table("summary", "per call (ticks per call; calls per warm sample)", calls, "{:.1f}",
              calls.iloc[:0, :0]),
        Table("histogram", "most frequent warm values of each call (count of samples; ticks "
              "per call, nearest tick)", hist, "{:.0f}", most_frequent(hist)),
        Table("running_min", "running minimum per repeat (ticks per call)", conv, "{:.1f}"),
    ]  # fmt: skip
    values = {"repeat": meta.get("repeat"), "cold_runs": cold_runs, "timer_step_ticks": step}
    return Summary(lines, tables, values, lambda p: plot(frame, p, step))
