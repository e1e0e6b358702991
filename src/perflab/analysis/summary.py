"""What a result means, as an experiment states it: sentences, tables, values and a figure, built
once by the experiment's module and rendered alike by its verb, `perflab report`, the exports
and the notebook view."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from perflab.core.lazy import pd


@dataclass(frozen=True)
class Table:
    """One table of a summary: full in JSON, `shown` (default: the same) in text and pages."""

    name: str
    title: str
    frame: pd.DataFrame
    floatfmt: str = "{:,.2f}"
    shown: pd.DataFrame | None = None

    @property
    def display(self) -> pd.DataFrame:
        """What a reader sees: the shown rows and columns."""
        return self.frame if self.shown is None else self.shown


@dataclass(frozen=True)
class Summary:
    """What an experiment says about its frame: sentences, tables, extra JSON values, a figure,
    and notes on what it could not say."""

    lines: list[str]
    tables: list[Table]
    values: dict[str, Any] = field(default_factory=dict)
    plot: Callable[[Any], Any] | None = None
    notes: list[str] = field(default_factory=list)
