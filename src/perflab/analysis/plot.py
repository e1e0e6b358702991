"""One gnuplot-like matplotlib style for every figure: boxed axes, inward ticks, log scales.

Figures are built with matplotlib's object API and changed by no global setting: importing or
drawing never touches the backend or rcParams, so a notebook keeps its inline backend, and a
file is written through the figure's own canvas (no display needed). matplotlib itself is
imported by the first figure, not by `import perflab.analysis.plot`, so the CLI starts fast.
"""

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from perflab.analysis.style import COLORS as COLORS
from perflab.analysis.style import DPI as DPI
from perflab.analysis.style import FORMATS as FORMATS
from perflab.analysis.style import STYLE as STYLE
from perflab.analysis.style import png as png
from perflab.analysis.style import style as style
from perflab.core import files, terminal

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def check_plot_path(path: str | os.PathLike) -> Path:
    """Refuse, before measuring, a plot path with an unknown format or an unwritable directory."""
    return files.check_new(path, FORMATS, "plot")


def figure(
    nrows: int = 1, ncols: int = 1, *, figsize: Any = None, **subplots: Any
) -> tuple["Figure", Any]:
    """A figure and its axes in perflab's style; not registered with pyplot, so nothing leaks.

    The figure shows inline when it is a notebook cell's value or passed to display().
    """
    from perflab.analysis.inline import InlineFigure

    with style():
        fig = InlineFigure(figsize=figsize)
        return fig, fig.subplots(nrows, ncols, **subplots)


def log_axes(ax: Any, x: bool = False, y: bool = True) -> None:
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
    _escaped(fig)
    with style():
        fig.tight_layout()
        if path is not None:
            _write(fig, path)
    return fig


def _escaped(fig: "Figure") -> None:
    """Every text of the figure escaped before it is laid out or drawn: a host label from a
    file may hold ESC or BEL, which matplotlib would draw as a missing glyph and name, raw, in
    a warning on the terminal."""
    from matplotlib.text import Text

    for text in fig.findobj(Text):
        shown = text.get_text()
        if terminal.CONTROLS.search(shown):
            text.set_text(terminal.escape(shown))


def _write(fig: "Figure", path: str | os.PathLike) -> None:
    """The figure written beside its name, then renamed: never through a link planted there."""
    p = check_plot_path(path)
    files.atomic(p, lambda tmp: fig.savefig(tmp, format=p.suffix[1:]))


def stamp(fig: "Figure", label: str, path: str | os.PathLike | None = None) -> "Figure":
    """Name in the figure's corner where and with what its data was measured, so a figure
    shown apart from its output still says which machine it describes; write it if asked."""
    if label:
        fig.text(0.995, 0.004, label, ha="right", va="bottom", fontsize=6.5, color="0.35")
    _escaped(fig)
    with style():
        fig.tight_layout(rect=(0, 0.025 if label else 0, 1, 1))
        if path is not None:
            _write(fig, path)
    return fig
