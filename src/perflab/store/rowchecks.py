"""What a journal's rows must be (Expect) and the checks that hold every chunk to it: a resume
refuses rows of other columns, keys outside the plan or repeated, and values out of range."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from perflab.core.lazy import pd


@dataclass(frozen=True)
class Expect:
    """What every journaled row must be: its columns, its key planned and unique, values in range.

    planned: one row per planned key (the journal's key columns), or None when the plan is open
    (a campaign learns its hosts as it runs); unique: key columns that name one row.
    """

    columns: tuple[str, ...] = ()
    planned: pd.DataFrame | None = None
    unique: tuple[str, ...] = ()
    ranges: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    categories: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


class PlannedKeys:
    """The keys seen so far, checked against the plan in O(rows) per chunk."""

    def __init__(self, expect: Expect):
        self.cols = list(expect.unique)
        self.planned = None
        if expect.planned is not None and self.cols:
            self.planned = pd.MultiIndex.from_frame(expect.planned[self.cols])
            self.count = np.zeros(len(self.planned), dtype=np.int64)
        self.seen: set[tuple] = set()

    def problem(self, df: pd.DataFrame) -> str | None:
        """Why these rows cannot join the ones already seen (None: they can)."""
        if not self.cols:
            return None
        if self.planned is None:
            keys = list(df[self.cols].itertuples(index=False, name=None))
            if len(set(keys)) != len(keys) or self.seen.intersection(keys):
                return "repeats runs recorded already"
            return None
        try:
            pos = self.planned.get_indexer(pd.MultiIndex.from_frame(df[self.cols]))
        except (TypeError, ValueError):
            return f"its {', '.join(self.cols)} values are not of the planned types"
        if (pos < 0).any():
            return f"{int((pos < 0).sum())} rows outside the plan"
        if np.unique(pos).size != pos.size or self.count[pos].any():
            return "repeats runs recorded already"
        return None

    def add(self, df: pd.DataFrame) -> None:
        if not self.cols:
            return
        if self.planned is None:
            self.seen.update(df[self.cols].itertuples(index=False, name=None))
        else:
            self.count[self.planned.get_indexer(pd.MultiIndex.from_frame(df[self.cols]))] += 1

    def missing(self) -> int:
        """Planned keys with no row (0 when the plan is open)."""
        return 0 if self.planned is None else int((self.count == 0).sum())


def rows_problem(df: pd.DataFrame, expect: Expect, columns: list[str] | None) -> str | None:
    """Why a frame's rows are not the journal's (None: they are): columns and value ranges."""
    want = list(expect.columns) or columns
    if want is not None and sorted(map(str, df.columns)) != sorted(want):
        return f"its columns ({', '.join(map(str, df.columns)) or 'none'}) are not the journal's"
    for col, (lo, hi) in expect.ranges.items():
        try:
            v = pd.to_numeric(df[col], errors="raise").to_numpy(dtype=np.float64, na_value=np.nan)
        except (TypeError, ValueError):
            return f"column {col} is not numeric"
        bad = ~(np.isnan(v) | ((v >= lo) & (v <= hi)))
        if bad.any():
            return f"{int(bad.sum())} values of {col} outside [{lo:g}, {hi:g}] (e.g. {v[bad][0]:g})"
    for col, allowed in expect.categories.items():
        bad = ~df[col].astype(str).isin(allowed)
        if bad.any():
            return f"unknown {col} {df[col][bad].iloc[0]!r}"
    return None
