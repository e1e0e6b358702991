"""One gnuplot-like matplotlib style for every figure: boxed axes, inward ticks, log scales.

Figures are built with matplotlib's object API and changed by no global setting: importing or
drawing never touches the backend or rcParams, so a notebook keeps its inline backend, and a
file is written through the figure's own canvas (no display needed). matplotlib itself is
imported by the first figure, not by `import perflab.plot`, so the CLI starts fast.
"""

import contextlib
import io
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cycler import cycler

from perflab.errors import PerflabError

if TYPE_CHECKING:
    from matplotlib.figure import Figure

# Rubini's memcpy figure: red per copy, blue per byte, green derivative; then gnuplot's order.
COLORS = ["#d62728", "#1f4fd6", "#2ca02c", "#9b30d0", "#e08b00", "#00a3a3", "#555555"]
FORMATS = (".png", ".svg", ".pdf")
DPI = 120

STYLE = {
    "axes.prop_cycle": cycler(color=COLORS),
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
    "savefig.dpi": DPI,
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


@contextlib.contextmanager
def style() -> Iterator[None]:
    """perflab's style for what is drawn inside the block, restored after it (never global)."""
    import matplotlib

    with matplotlib.rc_context(STYLE):
        yield


def figure(nrows: int = 1, ncols: int = 1, *, figsize: Any = None, **subplots: Any):
    """A figure and its axes in perflab's style; not registered with pyplot, so nothing leaks.

    The figure shows inline when it is a notebook cell's value or passed to display().
    """
    from perflab._figure import InlineFigure

    with style():
        fig = InlineFigure(figsize=figsize)
        return fig, fig.subplots(nrows, ncols, **subplots)


def log_axes(ax, x: bool = False, y: bool = True) -> None:
    """Log scales for quantities that span decades, with plain-number tick labels on x."""
    if x:
        ax.set_xscale("log", base=2)
    if y:
        ax.set_yscale("log")


def save(
    fig: "Figure", path: str | os.PathLike | None = None, title: str | None = None
) -> "Figure":
    """Title and lay out the figure, write it when a path is given (format from the suffix).

    Returns the figure, so an experiment's plot() can hand it on to a notebook.
    """
    if title:
        fig.suptitle(title)
    with style():
        fig.tight_layout()
        if path is not None:
            fig.savefig(check_plot_path(path))
    return fig


def png(fig: "Figure") -> bytes:
    """The figure as PNG bytes, as a notebook shows it."""
    buf = io.BytesIO()
    with style():
        fig.savefig(buf, format="png", bbox_inches="tight")
    return buf.getvalue()
