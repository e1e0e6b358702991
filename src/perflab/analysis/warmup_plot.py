"""The figure of a warm-up classification: each execution's iterations, its outliers, change
points and segments, and the steady state with its median and interval, as warmup_stats'
plot_krun_results draws them; matplotlib loaded with the first figure."""

from __future__ import annotations

import math
import os
from typing import TYPE_CHECKING

import numpy as np

from perflab.analysis import plot
from perflab.analysis.warmup import Execution, Executions

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def _panel(ax: object, i: int, e: Execution, unit: str) -> None:
    """One execution: iterations in grey, outliers as crosses, each segment's mean, dashed
    change points, the steady state shaded with its median and interval."""
    x = np.arange(e.iterations)
    ax.plot(x, e.times, color="#9a9a9a", lw=0.6, zorder=1, label="iteration")  # type: ignore[attr-defined]
    out = np.asarray(e.outliers, dtype=np.int64)
    kept = np.setdiff1d(x, out)
    ax.scatter(out, e.times[out], marker="x", s=14, color=plot.COLORS[0], zorder=3,  # type: ignore[attr-defined]
               label="outlier")  # fmt: skip
    for j, s in enumerate(e.segments):
        ax.hlines(s.mean, s.start, s.stop - 1, color=plot.COLORS[1], lw=1.6, zorder=2,  # type: ignore[attr-defined]
                  label=None if j else "segment mean")  # fmt: skip
    for j, c in enumerate(e.changepoints):
        ax.axvline(c, color=plot.COLORS[1], ls="--", lw=0.8, zorder=2,  # type: ignore[attr-defined]
                   label=None if j else "change point")  # fmt: skip
    if e.steady is not None and e.steady_start is not None:
        med, lo, hi = e.steady
        ax.axvspan(e.steady_start, e.iterations - 1, color=plot.COLORS[2], alpha=0.08, lw=0)  # type: ignore[attr-defined]
        span = (e.steady_start, e.iterations - 1)
        if math.isfinite(lo) and math.isfinite(hi):
            ax.fill_between(span, lo, hi, color=plot.COLORS[2], alpha=0.35, lw=0)  # type: ignore[attr-defined]
        ax.hlines(med, *span, color=plot.COLORS[2], lw=1.2, label="steady state's median")  # type: ignore[attr-defined]
    # the kept iterations' 0.5-99.5 % and the segments set the scale: a slow iteration the
    # window could not judge (the first ones) would flatten the rest
    low, high = np.percentile(e.times[kept], [0.5, 99.5])
    means = [s.mean for s in e.segments]
    low, high = min(low, *means), max(high, *means)
    pad = 0.1 * max(high - low, 1e-9 * max(abs(high), 1e-300))
    ax.set_ylim(low - pad, high + pad)  # type: ignore[attr-defined]
    if i == 0:
        ax.legend(fontsize=7, loc="upper right")  # type: ignore[attr-defined]
    start = "" if e.steady_start is None else f", steady from {e.steady_start}"
    ax.set_title(f"execution {i}: {e.classification}{start}", fontsize=9)  # type: ignore[attr-defined]
    ax.set_xlabel("iteration")  # type: ignore[attr-defined]
    ax.set_ylabel(f"time ({unit})" if unit else "time")  # type: ignore[attr-defined]


def plot_executions(
    result: Executions,
    path: str | os.PathLike | None = None,
    unit: str = "",
    most: int = 12,
    title: str | None = None,
) -> Figure:
    """Each execution in a panel of its own (the first `most`), two columns; written to
    `path` if given. The title says the executions' class and how many are drawn."""
    shown = result.executions[:most]
    cols = 1 if len(shown) == 1 else 2
    rows = math.ceil(len(shown) / cols)
    fig, axes = plot.figure(rows, cols, figsize=(6.5 * cols, 2.6 * rows + 0.6), squeeze=False)
    for i, e in enumerate(shown):
        _panel(axes[i // cols][i % cols], i, e, unit)
    for j in range(len(shown), rows * cols):
        axes[j // cols][j % cols].set_visible(False)
    counts = ", ".join(f"{n} {c}" for c, n in result.counts.items() if n)
    drawn = "" if len(shown) == len(result.executions) else f"; the first {len(shown)} drawn"
    heading = title or f"{result.classification}: {counts}{drawn}"
    return plot.save(fig, path, title=heading)
