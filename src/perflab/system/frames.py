"""The metadata a tidy frame carries: in DataFrame.attrs in memory, in the file on disk."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from perflab.core.lazy import pd

META_KEY = "perflab"


def attach(df: pd.DataFrame, meta: Mapping[str, Any]) -> pd.DataFrame:
    """Attach metadata to a frame (it travels in attrs, then in the file)."""
    df.attrs[META_KEY] = json.loads(json.dumps(dict(meta), default=str))
    return df


def metadata(df: pd.DataFrame) -> dict[str, Any]:
    """The metadata a frame carries (empty when it has none)."""
    return dict(df.attrs.get(META_KEY, {}))
