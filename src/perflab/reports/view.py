"""A result as a notebook shows it: the experiment's summary, its conditions and its figure.

perflab.show(df) wraps a result frame; Jupyter renders it through _repr_html_, and the plain
DataFrame stays in .frame. The experiment is read from the frame's metadata.
"""

import base64
import html
from functools import cached_property
from typing import TYPE_CHECKING, Any

from perflab.engine import results
from perflab.lab import registry

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

# What the reader needs to judge a number: where it was measured and under which conditions.
CONDITIONS = (
    "experiment", "hostname", "cpu_model", "online_cpus", "kernel", "hypervisor", "clocksource",
    "tsc_hz", "aslr", "aslr_system", "cpus", "governor", "hardware_counters", "rt_granted",
    "command",
)  # fmt: skip


class Result:
    """A result frame with its summary, conditions and figure; shown whole in Jupyter."""

    def __init__(self, frame: "pd.DataFrame") -> None:
        self.frame = frame
        self.meta = results.metadata(frame)
        known = registry.EXPERIMENTS.get(str(self.meta.get("experiment", "")))
        self.module = known.load() if known else None

    def conditions(self) -> dict[str, Any]:
        """The metadata a reader needs beside the numbers."""
        return {k: self.meta[k] for k in CONDITIONS if k in self.meta}

    @cached_property
    def summary(self) -> "pd.DataFrame | None":
        """The experiment's own summary table (compare: B/A per setup)."""
        if self.module is None:
            return None
        if self.module.__name__ == "perflab.lab.compare":
            return self.module.per_setup(self.frame)
        return self.module.summarize(self.frame)

    @cached_property
    def figure(self) -> "Figure | None":
        """The experiment's figure of this frame."""
        if self.module is None:
            return None
        if self.module.__name__ == "perflab.lab.compare":
            per = self.summary
            return self.module.plot(self.frame, None, per, self.module.overall(self.frame, per))
        return self.module.plot(self.frame)

    def _repr_html_(self) -> str:
        from perflab.analysis.plot import png

        name = html.escape(str(self.meta.get("experiment", "result")))
        parts = [f"<h4>perflab {name}: {len(self.frame):,} rows</h4>"]
        rows = "".join(
            f"<tr><th style='text-align:left'>{html.escape(k)}</th>"
            f"<td style='text-align:left'>{html.escape(str(v))}</td></tr>"
            for k, v in self.conditions().items()
        )
        parts.append(f"<details><summary>conditions</summary><table>{rows}</table></details>")
        table = self.frame if self.summary is None else self.summary
        parts.append(table.to_html(max_rows=30, float_format="{:,.4g}".format))
        if self.figure is not None:
            data = base64.b64encode(png(self.figure)).decode("ascii")
            parts.append(f"<img src='data:image/png;base64,{data}'/>")
        return "\n".join(parts)

    def __repr__(self) -> str:
        return f"<perflab result: {self.meta.get('experiment', '?')}, {len(self.frame)} rows>"


def show(frame: "pd.DataFrame") -> Result:
    """The result as Jupyter shows it: summary table, conditions and figure; .frame is the data."""
    return Result(frame)
