"""System-call costs measured: each sample times enough back-to-back calls to last twice
MIN_STEPS timer steps (resolution.py); the rows hold ticks per call and the calls per sample
they were averaged over."""

from __future__ import annotations

import functools
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from perflab.analysis.summary import Summary, Table
from perflab.core import bindings
from perflab.core.lazy import pd
from perflab.errors import PerflabError
from perflab.lab import resolution
from perflab.lab.syscalls import SyscallsPlan
from perflab.plan import controls
from perflab.running import inprocess
from perflab.store import results
from perflab.store.recording import Recording
from perflab.system import machine, provenance

if TYPE_CHECKING:
    from matplotlib.figure import Figure

CALLS = bindings.SYSCALLS
ALIASES = {
    "open": "open+close",
    "close": "open+close",
    "mmap": "mmap+munmap",
    "yield": "sched_yield",
}
IO_BYTES = bindings.SYS_IO_BYTES
COLUMNS = ("call", "rep", "calls", "ticks", "ns")
PROBES = 5  # samples per calibration step


def resolve(names: Iterable[str]) -> list[str]:
    """Canonical call names; unknown -> one-line error listing the known ones."""
    out = []
    for name in names:
        canon = ALIASES.get(name.lower(), name.lower())
        if canon not in CALLS:
            raise PerflabError(f"unknown call {name!r}; known: {', '.join(CALLS)}")
        if canon not in out:
            out.append(canon)
    return out


def _scratch_file(directory: str | None) -> Path:
    """A 4 KiB file to open, stat, read and write (its filesystem is part of the cost)."""
    where = Path(directory or tempfile.gettempdir())
    if not where.is_dir() or not os.access(where, os.W_OK):
        raise PerflabError(f"{where}: not a writable directory (--dir)")
    fd, name = tempfile.mkstemp(prefix="perflab-syscalls-", dir=where)
    with os.fdopen(fd, "wb") as f:
        f.write(b"\x5a" * IO_BYTES)
    return Path(name)


def time_call(call: str, n: int, path: Path, calls: int = 1) -> np.ndarray:
    """n samples of `calls` back-to-back calls in ticks, the timer's cost subtracted."""
    return bindings.syscall_time(CALLS[call], str(path), calls, n, f"time {call}")


def calls_per_sample(call: str, path: Path) -> int:
    """Back-to-back calls that make a sample last twice min_sample_ticks()."""
    return resolution.calls_per_sample(lambda calls: time_call(call, PROBES, path, calls))


@controls.typed_arguments
def run(
    calls: Iterable[str] = SyscallsPlan.calls,
    trials: int = SyscallsPlan.trials,
    trim: int = SyscallsPlan.trim,
    directory: str | None = SyscallsPlan.directory,
    *,
    recording: Recording | None = None,
) -> pd.DataFrame:
    """One row per call per trial (a sample of `calls` calls): ticks and ns per call; `trim`
    is how the summary reads them (recorded, not a parameter a resume must repeat).

    recording: where the rows go (a .parquet/.csv journal written in chunks of trials as they
    are measured, resumed if asked: inprocess.measure) and the progress that counts them."""
    names = resolve(calls)
    SyscallsPlan(tuple(names), trials, trim, directory).check()
    controls.check_rows(
        {"--trials": trials}, len(names), controls.CALL_S, controls.PLANNED_ROW_BYTES
    )
    hz, _ = machine.tsc_hz()
    path = _scratch_file(directory)
    meta = {
        **provenance.metadata(),
        "experiment": "syscalls",
        "trials": trials,
        "io_bytes": IO_BYTES,
        "directory": str(path.parent),
        "timer_overhead_ticks": bindings.timer_overhead_ticks(),
        "min_sample_steps": resolution.MIN_STEPS,
        "trim": trim,
    }
    keys = pd.DataFrame(
        {"call": np.repeat(names, trials), "rep": np.tile(np.arange(trials), len(names))}
    )
    params = {"calls": names, "trials": trials, "directory": str(path.parent)}
    plan = inprocess.RowSchedule("syscalls", keys, COLUMNS, params, meta, phase=("call",))
    per: dict[str, int] = {}
    try:
        return inprocess.measure(plan, functools.partial(_timed, path=path, hz=hz, per=per),
                                 recording)  # fmt: skip
    finally:
        path.unlink(missing_ok=True)


def _timed(keys: pd.DataFrame, path: Path, hz: float, per: dict[str, int]) -> pd.DataFrame:
    """The rows of a chunk of trials: each call sampled as many times as it has rows here, its
    calls per sample calibrated the first time."""
    frames = []
    for call, g in keys.groupby("call", sort=False):
        name = str(call)
        if name not in per:
            per[name] = calls_per_sample(name, path)
        ticks = time_call(name, len(g), path, per[name]) / per[name]
        frames.append(g.assign(calls=per[name], ticks=ticks, ns=ticks / hz * 1e9))
    return pd.concat(frames, ignore_index=True)


def summarize(
    df: pd.DataFrame, trim: int = 10, hz: float | None = None, step: int | None = None
) -> pd.DataFrame:
    """Per call: n, calls per sample, min/max/mean (ticks per call), the same with `trim`
    dropped from each end, and in µs; a figure from a sample under MIN_STEPS timer steps is
    NaN and `unresolved` counts such samples."""
    hz = hz or machine.tsc_hz()[0]
    sample = df["ticks"] * df.get("calls", 1)
    step = step or resolution.recorded_step(results.metadata(df), sample)
    rows = []
    for call, g in df.groupby("call", sort=False):
        calls = g["calls"] if "calls" in g else pd.Series(1, index=g.index)
        s = resolution.figures(g["ticks"], g["ticks"] * calls, step, trim=trim)
        row = {"call": call, "n": s["n"], "n_trimmed": s["n"] - 2 * trim,
               "calls": int(calls.max())}  # fmt: skip
        for k in ("min", "max", "mean"):
            row[k] = s[k]
            row[f"trimmed_{k}"] = s[f"trimmed_{k}"] if trim else s[k]
        row["median"] = s["median"]
        row["unresolved"] = s["unresolved"]
        for k in ("min", "mean", "trimmed_mean", "median"):
            row[f"{k}_us"] = row[k] / hz * 1e6
        rows.append(row)
    return pd.DataFrame(rows)


fileguard = summarize  # its earlier name


def fileguard_text(table: pd.DataFrame) -> pd.DataFrame:
    """The Polish tables' layout: one column per call, rows min/max/mean as 'all/trimmed (µs)'."""

    def num(v: float, form: str) -> str:
        return format(v, form) if np.isfinite(v) else "unresolved"

    def cell(r: Any, k: str) -> str:
        return f"{num(r[k], ',.0f')}/{num(r['trimmed_' + k], ',.0f')}"

    out = {"": ["calls per sample", "minimum", "maximum", "mean", "mean µs", "median µs"]}
    for _, r in table.iterrows():
        out[r["call"]] = [
            f"{int(r.get('calls', 1)):,}",
            cell(r, "min"),
            cell(r, "max"),
            cell(r, "mean"),
            f"{num(r['mean_us'], '.3f')}/{num(r['trimmed_mean_us'], '.3f')}",
            num(r["median_us"], ".3f"),
        ]
    return pd.DataFrame(out)


def plot(df: pd.DataFrame, path: Any = None) -> Figure:
    """Distribution of each call's ticks, log scale: the long tail FileGuard warned about."""
    from perflab.analysis import plot as plt

    fig, ax = plt.figure()
    names = list(dict.fromkeys(df["call"]))
    data = [df.loc[df["call"] == n, "ticks"].clip(lower=1).to_numpy() for n in names]
    ax.boxplot(data, orientation="horizontal", tick_labels=names, flierprops={"markersize": 2})
    ax.set_xscale("log")
    ax.set_xlabel("TSC ticks per call (a sample's over its calls, timer cost subtracted)")
    ax.invert_yaxis()
    return plt.save(fig, path, title=f"System-call costs, {int(df['rep'].max()) + 1} trials each")


def summary(frame: pd.DataFrame, meta: dict[str, Any]) -> Summary:
    """FileGuard's all/trimmed table, with the run's --trim (else 10) if it leaves samples."""
    n = int(frame.groupby("call").size().min())
    trim = int(meta.get("trim", 10))
    trim = trim if n > 2 * trim else 0
    step = resolution.recorded_step(meta, frame["ticks"] * frame.get("calls", 1))
    calls = summarize(frame, trim, hz=meta.get("tsc_hz") or None, step=step)
    trials = meta.get("trials", n)
    title = (f"{trials} samples, ticks per call as all/without the {trim} best and {trim} "
             "worst")  # fmt: skip
    table = Table("calls", title, calls, shown=fileguard_text(calls))
    lines = []
    if calls["unresolved"].any():
        lines.append(resolution.unresolved_note(int(calls["unresolved"].sum()), "samples", step))
    values = {"trials": trials, "trim": trim, "timer_step_ticks": step}
    return Summary(lines, [table], values, lambda p: plot(frame, p))
