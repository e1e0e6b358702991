"""perflab's figure style, gnuplot-like, applied inside a block and never globally."""

import contextlib
import io
from collections.abc import Iterator
from typing import TYPE_CHECKING

from cycler import cycler

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


@contextlib.contextmanager
def style() -> Iterator[None]:
    """perflab's style for what is drawn inside the block, restored after it (never global)."""
    import matplotlib

    with matplotlib.rc_context(STYLE):
        yield


def png(fig: "Figure") -> bytes:
    """The figure as PNG bytes, as a notebook shows it."""
    buf = io.BytesIO()
    with style():
        fig.savefig(buf, format="png", bbox_inches="tight")
    return buf.getvalue()
