"""System-call costs in FileGuard's table: min, max, mean, also with k best and k worst dropped."""

import functools
import os
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from perflab.analysis import stats
from perflab.analysis.summary import Summary, Table
from perflab.core import bindings
from perflab.engine import childruns, inprocess
from perflab.engine.progress import OnStart, ProgressArg
from perflab.errors import PerflabError
from perflab.system import machine

if TYPE_CHECKING:
    from matplotlib.figure import Figure

CALLS = bindings.SYSCALLS
DEFAULT_CALLS = ("getpid", "open+close", "read", "write", "stat")
ALIASES = {
    "open": "open+close",
    "close": "open+close",
    "mmap": "mmap+munmap",
    "yield": "sched_yield",
}
IO_BYTES = bindings.SYS_IO_BYTES


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


def time_call(call: str, n: int, path: Path) -> np.ndarray:
    """n timings of one call in ticks, each call alone, the timer's cost subtracted."""
    return bindings.syscall_time(CALLS[call], str(path), n, f"time {call}")


def run(
    calls: Iterable[str] = DEFAULT_CALLS,
    trials: int = 10000,
    directory: str | None = None,
    progress: ProgressArg = None,
    *,
    on_start: OnStart | None = None,
    output: str | os.PathLike | None = None,
    resume: bool = False,
    discard_bad: bool = False,
    extra_meta: Mapping[str, Any] | None = None,
) -> pd.DataFrame:
    """One row per call per trial: ticks and ns.

    output: a .parquet/.csv journal, written in chunks of trials as they are measured;
    resume=True completes an interrupted one (inprocess.measure); progress counts trials.
    extra_meta joins the metadata (the CLI records its --trim there)."""
    names = resolve(calls)
    if trials < 1:
        raise PerflabError(f"--trials must be at least 1, not {trials}")
    hz, _ = machine.tsc_hz()
    path = _scratch_file(directory)
    meta = {
        **machine.metadata(),
        "experiment": "syscalls",
        "trials": trials,
        "io_bytes": IO_BYTES,
        "directory": str(path.parent),
        "timer_overhead_ticks": bindings.timer_overhead_ticks(),
        **(extra_meta or {}),
    }
    keys = pd.DataFrame(
        {"call": np.repeat(names, trials), "rep": np.tile(np.arange(trials), len(names))}
    )
    params = {"calls": names, "trials": trials, "directory": str(path.parent)}
    plan = inprocess.Plan("syscalls", keys, ("call", "rep", "ticks", "ns"), params, meta,
                          phase=("call",))  # fmt: skip
    try:
        return inprocess.measure(plan, functools.partial(_timed, path=path, hz=hz),
                                 childruns.Recording(output, resume, discard_bad),
                                 on_start=on_start, progress=progress)  # fmt: skip
    finally:
        path.unlink(missing_ok=True)


def _timed(keys: pd.DataFrame, path: Path, hz: float) -> pd.DataFrame:
    """The rows of a chunk of trials: each call timed as many times as it has rows here."""
    frames = []
    for call, g in keys.groupby("call", sort=False):
        ticks = time_call(str(call), len(g), path)
        frames.append(g.assign(ticks=ticks, ns=ticks / hz * 1e9))
    return pd.concat(frames, ignore_index=True)


def summarize(df: pd.DataFrame, trim: int = 10, hz: float | None = None) -> pd.DataFrame:
    """Per call: n, min/max/mean, the same with `trim` dropped from each end, and in µs."""
    hz = hz or machine.tsc_hz()[0]
    rows = []
    for call, g in df.groupby("call", sort=False):
        s = stats.summary(g["ticks"], trim=trim)
        row = {"call": call, "n": s["n"], "n_trimmed": s["n"] - 2 * trim}
        for k in ("min", "max", "mean"):
            row[k] = s[k]
            row[f"trimmed_{k}"] = s[f"trimmed_{k}"] if trim else s[k]
        row["median"] = s["median"]
        for k in ("min", "mean", "trimmed_mean", "median"):
            row[f"{k}_us"] = row[k] / hz * 1e6
        rows.append(row)
    return pd.DataFrame(rows)


fileguard = summarize  # its earlier name


def fileguard_text(table: pd.DataFrame) -> pd.DataFrame:
    """The Polish tables' layout: one column per call, rows min/max/mean as 'all/trimmed (µs)'."""

    def cell(r: Any, k: str) -> str:
        return f"{r[k]:,.0f}/{r['trimmed_' + k]:,.0f}"

    out = {"": ["minimum", "maximum", "mean", "mean µs", "median µs"]}
    for _, r in table.iterrows():
        out[r["call"]] = [
            cell(r, "min"),
            cell(r, "max"),
            cell(r, "mean"),
            f"{r['mean_us']:.3f}/{r['trimmed_mean_us']:.3f}",
            f"{r['median_us']:.3f}",
        ]
    return pd.DataFrame(out)


def plot(df: pd.DataFrame, path: Any = None) -> "Figure":
    """Distribution of each call's ticks, log scale: the long tail FileGuard warned about."""
    from perflab.analysis import plot as plt

    fig, ax = plt.figure()
    names = list(dict.fromkeys(df["call"]))
    data = [df.loc[df["call"] == n, "ticks"].clip(lower=1).to_numpy() for n in names]
    ax.boxplot(data, orientation="horizontal", tick_labels=names, flierprops={"markersize": 2})
    ax.set_xscale("log")
    ax.set_xlabel("TSC ticks per call (timer cost subtracted)")
    ax.invert_yaxis()
    return plt.save(fig, path, title=f"System-call costs, {int(df['rep'].max()) + 1} trials each")


def summary(frame: pd.DataFrame, meta: dict[str, Any]) -> Summary:
    """FileGuard's all/trimmed table, with the run's --trim (else 10) if it leaves samples."""
    n = int(frame.groupby("call").size().min())
    trim = int(meta.get("trim", 10))
    trim = trim if n > 2 * trim else 0
    calls = summarize(frame, trim, hz=meta.get("tsc_hz") or None)
    trials = meta.get("trials", n)
    title = f"{trials} trials, ticks as all/without the {trim} best and {trim} worst"
    table = Table("calls", title, calls, shown=fileguard_text(calls))
    return Summary([], [table], {"trials": trials, "trim": trim}, lambda p: plot(frame, p))
