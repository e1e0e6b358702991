"""What a memcpy result shows: the article's small-size table, the knees and the peak rate of
the sizes the timer resolves, the peak memory, and Rubini's figure."""

from __future__ import annotations

import socket
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from perflab.analysis.summary import Summary, Table
from perflab.core.lazy import pd
from perflab.errors import PerflabError
from perflab.lab import resolution
from perflab.lab.memcpy.knees import detect_knees, knee_report, recorded_caches
from perflab.lab.memcpy.sweep import MEMORY_KEYS, human_bytes, rederive
from perflab.store import results
from perflab.system import machine

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def resolved_rows(frame: pd.DataFrame, meta: Mapping[str, Any]) -> tuple[np.ndarray, int]:
    """Which rows' samples lasted MIN_STEPS timer steps, and the step: a file from before
    perflab batched copies has no `copies` (one copy per sample) and may lack the step."""
    copies = frame.get("copies", 1)
    sample = frame["ticks"].to_numpy(dtype=float) * np.asarray(copies, dtype=float)
    step = resolution.recorded_step(meta, sample)
    return resolution.resolved(sample, step), step


def per_size(df: pd.DataFrame) -> pd.DataFrame:
    """One row per size: the median over the sweeps of --repeat (each the minimum of its
    trials), the per-byte figures and the derivative from it; a frame of one sweep as it is."""
    if "repeat" not in df:
        return df
    out = df.drop(columns="repeat").groupby("size", sort=True).median(numeric_only=True)
    out = out.reset_index()
    out.insert(0, "kernel", df["kernel"].iloc[0])
    out["ticks_per_byte"] = out["ticks"] / out["size"]
    out.attrs = dict(df.attrs)
    return rederive(out)


def memory_line(meta: Mapping[str, Any]) -> str:
    """The summary's line on the sweep's peak memory, in MB (10^6 bytes), the resident beside
    the private."""
    mb = 1e6
    private, buffers = meta["peak_private_kib"] * 1024, meta["buffer_bytes"]
    return (
        f"peak memory: {private / mb:.1f} MB private (two buffers of {buffers / mb:.1f} MB each "
        f"+ {(private - 2 * buffers) / mb:.1f} MB), {meta['peak_resident_kib'] * 1024 / mb:.1f} "
        "MB resident with shared libraries"
    )


def small_table(df: pd.DataFrame, upto: int = 64) -> pd.DataFrame:
    """Riquadro 3: size, copies per sample, ticks per copy (red) and per byte (blue) for the
    smallest sizes (a file from before perflab batched copies has no copies column)."""
    cols = [c for c in ("size", "copies", "ticks", "ticks_per_byte") if c in df]
    return df.loc[df["size"] <= upto, cols].reset_index(drop=True)


def summarize(
    df: pd.DataFrame, upto: int = 32, meta: Mapping[str, Any] | None = None
) -> pd.DataFrame:
    """The table the article printed (Riquadro 3): ticks per copy and per byte, small sizes;
    ticks per byte is left blank where the sample was too short for the timer to resolve."""
    keep, _ = resolved_rows(df, results.metadata(df) if meta is None else meta)
    table = small_table(df, upto)
    table["ticks_per_byte"] = table["ticks_per_byte"].where(keep[df["size"].to_numpy() <= upto])
    return table


def rated(df: pd.DataFrame, meta: Mapping[str, Any] | None = None) -> pd.DataFrame:
    """The rows whose samples the timer resolves, their derivative taken between them only:
    every figure of copy time (rate, knees, plot) comes from these."""
    keep, _ = resolved_rows(df, results.metadata(df) if meta is None else meta)
    return rederive(df[keep].reset_index(drop=True))


def plot(
    df: pd.DataFrame,
    path: Any = None,
    knees: pd.DataFrame | None = None,
    meta: Mapping[str, Any] | None = None,
) -> Figure:
    """Rubini's figure: log-log, red ticks per copy, blue ticks per byte, green derivative, of
    the sizes the timer resolves."""
    from matplotlib.ticker import FuncFormatter

    from perflab.analysis import plot as plt

    df = per_size(df)
    shown = rated(df, meta)
    fig, ax = plt.figure(figsize=(9, 5.5))
    red, blue, green = plt.COLORS[:3]
    pos = shown["derivative"] > 0
    ax.plot(shown["size"], shown["ticks"], color=red, label="ticks per copy")
    ax.plot(shown["size"], shown["ticks_per_byte"], color=blue, label="ticks per byte")
    ax.plot(
        shown.loc[pos, "size"],
        shown.loc[pos, "derivative"],
        ".",
        color=green,
        markersize=2,
        label="derivative (point to point)",
    )
    plt.log_axes(ax, x=True, y=True)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: human_bytes(v)))
    for c in recorded_caches(df).itertuples(index=False):
        if c.cache in ("L1d", "L2", "L3") and c.size_bytes / 2 <= df["size"].max():
            ax.axvline(c.size_bytes / 2, color="#777777", linestyle="--", linewidth=0.8)
            ax.annotate(
                f"{c.cache}/2",
                (c.size_bytes / 2, 0.98),
                xycoords=("data", "axes fraction"),
                fontsize=8,
                ha="right",
                va="top",
                rotation=90,
            )
    if knees is not None:
        for k in knees.itertuples(index=False):
            ax.axvline(k.size, color="black", linestyle=":", linewidth=1)
    ax.set_xlabel("bytes copied (S; the copy touches 2·S)")
    ax.set_ylabel("TSC ticks")
    ax.legend(loc="upper left")
    kernel = df["kernel"].iloc[0] if "kernel" in df else "libc"
    hz, _ = machine.tsc_hz()
    left_out = len(df) - len(shown)
    unresolved = f"; {left_out} sizes unresolved, not drawn" if left_out else ""
    return plt.save(
        fig,
        path,
        title=f"memcpy ({kernel}) — TSC {hz / 1e9:.3f} GHz; dashed: cache/2, dotted: knees"
        f"{unresolved}",
    )


def summary(frame: pd.DataFrame, meta: dict[str, Any]) -> Summary:
    """The small-size table (Riquadro 3), the cache knees and the peak rate, of the sizes whose
    samples the timer resolves; of --repeat sweeps, each size's median."""
    sweeps = int(frame["repeat"].nunique()) if "repeat" in frame else 1
    frame = per_size(frame)
    keep, step = resolved_rows(frame, meta)
    fit = rated(frame, meta)
    knees = detect_knees(fit["size"], fit["ticks_per_byte"])
    here = meta.get("hostname") == socket.gethostname()
    # A file from another machine that did not record its caches is not matched to these.
    if meta.get("caches"):
        caches = pd.DataFrame(meta["caches"])
    else:
        caches = machine.caches() if here else pd.DataFrame(columns=["cache", "size_bytes"])
    report = knee_report(knees, caches)
    kernel = str(frame["kernel"].iloc[0])
    place = f", align {meta['align']}, offset {meta.get('offset', 0)}" if "align" in meta else ""
    per = "copies per sample, " if "copies" in frame else ""
    tables = [
        Table("small", f"small sizes (Riquadro 3: {per}ticks per copy, ticks per byte){place}",
              summarize(frame, int(meta.get("small", 32)), meta), "{:.6f}"),
        Table("knees", "cache knees: a copy of S bytes touches 2*S", report),
    ]  # fmt: skip
    values: dict[str, Any] = {"points": len(frame), "kernel": kernel}
    values.update({k: meta[k] for k in ("max_bytes", "trials", "align", "offset") if k in meta})
    values["mlockall"] = meta.get("mlockall")
    values["timer_step_ticks"] = step
    values["unresolved"] = int((~keep).sum())
    line = f"{len(frame)} sizes, {kernel}" + (
        f", min of {meta['trials']}" if "trials" in meta else ""
    )
    if sweeps > 1:
        values["repeat"] = sweeps
        line += f", median of {sweeps} sweeps"
    if "gb_per_s" in fit and fit["gb_per_s"].notna().any():
        peak = fit.loc[fit["gb_per_s"].idxmax()]
        values["peak"] = {"size": int(peak["size"]), "gb_per_s": float(peak["gb_per_s"])}
        line += f"; peak {peak['gb_per_s']:.2f} GB/s at {int(peak['size']):,} bytes"
    if "mlockall" in meta:
        line += f"; mlockall {'on' if meta['mlockall'] else 'off'}"
    lines = [line]
    if "max_from" in meta:
        lines.append(str(meta["max_from"]))
    if "copies" in frame:
        lines.append(
            f"each sample: {int(frame['copies'].min()):,} to {int(frame['copies'].max()):,} "
            f"back-to-back copies, at least {resolution.MIN_STEPS} timer steps "
            f"({resolution.MIN_STEPS * step:,} ticks, one step {step})"
        )
    if "peak_private_kib" in meta:
        values["memory"] = {k: meta[k] for k in MEMORY_KEYS}
        lines.append(memory_line(meta))
    if not keep.all():
        lines.append(resolution.unresolved_note(int((~keep).sum()), "sizes' samples", step))
    if report.empty:
        lines.append("no cache knee found (sweep further with --max, or more --trials)")
    notes = []
    if not here and not meta.get("caches"):
        notes.append("knees not matched to caches: the file is from another machine")
    if "derivative" not in frame:
        notes.append("no figure: the file has no derivative column (perflab's memcpy writes one)")
        return Summary(lines, tables, values, None, notes)
    return Summary(lines, tables, values, lambda p: plot(frame, p, knees, meta), notes)


def every_size(frame: pd.DataFrame, values: Mapping[str, Any], output: str | None) -> list[Table]:
    """What the verb prints before the summary: every size, as moremem does, with --full; a
    sweep whose every sample was too short for the timer is refused as no result."""
    if frame["gb_per_s"].isna().all():
        top = results.metadata(frame).get("max_bytes", "?")
        saved = f" (the {len(frame)} sizes are saved in {output})" if output else ""
        raise PerflabError(
            f"no sample up to {top} B lasted {resolution.MIN_STEPS} steps of the timer{saved}: "
            "nothing to rate; sweep larger sizes with --max (e.g. 64K)"
        )
    if not values.get("full"):
        return []
    every = frame.drop(columns="kernel")
    return [Table("every_size", "every size (moremem's output)", every, "{:.6f}")]
