"""The Figure perflab returns: matplotlib's own, plus the PNG a notebook shows for it.

Kept apart from analysis/plot.py because importing it imports matplotlib.
"""

from matplotlib.figure import Figure


class InlineFigure(Figure):
    """A Figure that shows inline in Jupyter though pyplot never saw it (no inline hook runs)."""

    def _repr_png_(self) -> bytes:
        from perflab.analysis.style import png

        return png(self)
