"""One gnuplot-like matplotlib style for every --plot: boxed axes, inward ticks, log scales."""

import os
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from perflab.errors import PerflabError

# Rubini's memcpy figure: red per copy, blue per byte, green derivative; then gnuplot's order.
COLORS = ["#d62728", "#1f4fd6", "#2ca02c", "#9b30d0", "#e08b00", "#00a3a3", "#555555"]
FORMATS = (".png", ".svg", ".pdf")

STYLE = {
    "axes.prop_cycle": matplotlib.cycler(color=COLORS),
    "axes.grid": True,
    "axes.linewidth": 1.0,
    "grid.linestyle": ":",
    "grid.color": "#b0b0b0",
    "xtick.direction": "in",
    "ytick.direction": "in",
    "xtick.top": True,
    "ytick.right": True,
    "xtick.minor.visible": True,
    "ytick.minor.visible": True,
    "legend.frameon": True,
    "legend.edgecolor": "black",
    "legend.fancybox": False,
    "font.family": "DejaVu Sans",
    "font.size": 10,
    "lines.linewidth": 1.2,
    "lines.markersize": 3,
    "savefig.dpi": 120,
    "figure.figsize": (8, 5),
}


def check_plot_path(path: str | os.PathLike) -> Path:
    """Refuse, before measuring, a plot path with an unknown format or an unwritable directory."""
    p = Path(path)
    if p.suffix not in FORMATS:
        raise PerflabError(
            f"{p}: unknown plot format {p.suffix!r}; use one of {', '.join(FORMATS)}"
        )
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir() or not os.access(parent, os.W_OK):
        raise PerflabError(f"{p}: directory {parent} does not exist or is not writable")
    return p


def figure(nrows: int = 1, ncols: int = 1, **kw):
    """A figure and axes drawn in perflab's style."""
    with plt.rc_context(STYLE):
        return plt.subplots(nrows, ncols, **kw)


def log_axes(ax, x: bool = False, y: bool = True) -> None:
    """Log scales for quantities that span decades, with plain-number tick labels on x."""
    if x:
        ax.set_xscale("log", base=2)
    if y:
        ax.set_yscale("log")


def save(fig, path: str | os.PathLike, title: str | None = None) -> Path:
    """Write the figure (format from the suffix) and release it."""
    p = check_plot_path(path)
    if title:
        fig.suptitle(title)
    with plt.rc_context(STYLE):
        fig.tight_layout()
        fig.savefig(p)
    plt.close(fig)
    return p
