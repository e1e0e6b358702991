"""A result as a notebook shows it: the report of its frame (summary, figure, conditions), in
the HTML `perflab report --html` writes.

perflab.show(df) wraps a result frame; Jupyter renders it through _repr_html_, and the plain
DataFrame stays in .frame. The experiment is read from the frame's metadata, else recognised by
its columns, as `perflab report` does.
"""

import sys
from dataclasses import replace
from functools import cached_property
from typing import TYPE_CHECKING, Any

from perflab.core import lazy
from perflab.errors import PerflabError, WrongType
from perflab.reports.report import Report, of_frame
from perflab.store import results

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

    from perflab.analysis.summary import Summary


class Result:
    """A result frame with its report; shown whole in Jupyter."""

    def __init__(self, frame: "pd.DataFrame") -> None:
        self.frame = frame
        self.meta = results.metadata(frame)

    @cached_property
    def report(self) -> Report | None:
        """The frame's report; None for a frame perflab did not write."""
        try:
            return of_frame(self.frame)
        except PerflabError:
            return None

    def conditions(self) -> dict[str, Any]:
        """Where and how it was measured, as the report labels them."""
        return {} if self.report is None else self.report.conditions()

    @property
    def summary(self) -> "Summary | None":
        """The experiment's summary of the frame: sentences, tables, values, figure."""
        return None if self.report is None else self.report.summary

    @cached_property
    def figure(self) -> "Figure | None":
        """The experiment's figure of this frame."""
        if self.summary is None or self.summary.plot is None:
            return None
        return self.summary.plot(None)

    def _repr_html_(self) -> str:
        from perflab.reports import exporters

        if self.report is not None:
            return exporters.HTML.body(self.report)
        head = f"<h2>perflab: {len(self.frame):,} rows (not a result perflab wrote)</h2>"
        return head + self.frame.to_html(max_rows=30, float_format="{:,.4g}".format)

    def text(self) -> str:
        """The summary as `perflab report` prints it, or the frame when perflab did not write it."""
        from perflab.reports import exporters

        if self.report is not None:
            return exporters.TEXT.report(replace(self.report, path=self.report.path or "in memory"))
        return f"perflab: {len(self.frame):,} rows (not a result perflab wrote)\n{self.frame}"

    def __repr__(self) -> str:
        name = self.report.experiment if self.report else "?"
        return f"<perflab result: {name}, {len(self.frame)} rows>"


def show(frame: "pd.DataFrame") -> Result:
    """The result as Jupyter shows it: summary, figure and conditions; .frame is the data.
    Outside IPython nothing would display the returned object, so its text summary is printed."""
    if not isinstance(frame, lazy.pd.DataFrame):
        raise WrongType(f"show: {type(frame).__name__} {frame!r:.60} is not a result's DataFrame")
    result = Result(frame)
    if not _in_ipython():
        print(result.text())
    return result


def _in_ipython() -> bool:
    """Whether an IPython shell (Jupyter's kernel included) runs this: it displays values."""
    ipython = sys.modules.get("IPython")
    return ipython is not None and ipython.get_ipython() is not None
