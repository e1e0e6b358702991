"""A machine's series over the commits tracked, and where it changes.

Each commit ran in pairs beside one reference commit (the same for the machine's whole
series), in layouts every track draws alike from its seed. Its value is the geometric mean
over its layouts of each layout's ratio of medians to the reference, with the standard error
of that mean: the host's drift between tracks, which moved whole series by up to 35 % on a
cloud guest, cancels in it. The change points are found by PELT (ruptures) on the logs, with a
penalty of 3 sigma^2 log n: sigma is the larger of the commits' own standard error and the
series' noise from one commit to the next (1.4826 MAD of the successive differences over
sqrt 2), so that drift between tracks is not taken for a change. On 400 series of 24 commits
with 1 % normal noise, BIC's 2 sigma^2 log n found a change in 7.8 % of those without one, 3
in 2.8 % (4: 1.0 %); each found a 4 % step at commit 15, and only it, in 90 %, 94 % and 95 %
(tests/test_history.py holds five of them). Each one found is then only a candidate:
history.py confirms or dismisses it with a comparison of the commits on either side.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import numpy as np

from perflab.core.lazy import pd
from perflab.lab.history.store import Entry
from perflab.running.childruns import value_column

MAD_SIGMA = 1.4826  # a normal distribution's sigma per median absolute deviation
PENALTY = 3.0  # sigma^2 log n per change point (see above)


def _when(e: Entry) -> tuple[float, str]:
    """An entry's author time (its date's own offset taken into account), then its sha."""
    try:
        return datetime.fromisoformat(e.date).timestamp(), e.sha
    except ValueError:
        return math.inf, e.sha


def commit_order(entries: Sequence[Entry]) -> list[Entry]:
    """The entries (one per commit) with every commit after its parents among them (author
    time, then sha, between commits that do not descend from each other)."""
    by_sha = {e.sha: e for e in entries}
    waiting = {e.sha: {p for p in e.parents if p in by_sha} for e in entries}
    order: list[Entry] = []
    while waiting:
        ready = sorted((by_sha[s] for s, ps in waiting.items() if not ps), key=_when)
        if not ready:  # a cycle cannot happen in git; a hand-edited index may hold one
            ready = sorted((by_sha[s] for s in waiting), key=_when)[:1]
        first = ready[0]
        order.append(first)
        del waiting[first.sha]
        for ps in waiting.values():
            ps.discard(first.sha)
    return order


def commit_value(runs: pd.DataFrame, unit: str | None = None, side: str | None = None
                 ) -> dict[str, Any]:  # fmt: skip
    """A commit's value from its runs (those of `side` alone, when given): the geometric mean
    over layouts of each layout's median (ok runs) of `unit` (default: the probe's ticks where
    every run has them), its standard error on the log scale (NaN for one layout), and the
    unit."""
    ok = runs[runs["status"] == "ok"]
    if side is not None:
        ok = ok[ok["side"] == side]
    if ok.empty:
        return {"value": math.nan, "log_se": math.nan, "setups": 0, "unit": ""}
    unit = unit or value_column(ok)
    return _geomean(ok.groupby("setup")[unit].median().to_numpy(float)) | {"unit": unit}


def relative(runs: pd.DataFrame, unit: str) -> dict[str, Any]:
    """The commit (side B) against the reference run beside it (side A): the geometric mean
    over layouts of each layout's ratio of medians, and its standard error on the log scale.
    The pairs ran interleaved, so a host that drifts between tracks moves both alike."""
    ok = runs[runs["status"] == "ok"]
    medians = ok.groupby(["setup", "side"])[unit].median().unstack("side")
    if not {"A", "B"} <= set(medians.columns):
        return {"value": math.nan, "log_se": math.nan, "setups": 0}
    ratios = (medians["B"] / medians["A"]).dropna().to_numpy(float)
    return _geomean(ratios)


def _geomean(values: np.ndarray) -> dict[str, Any]:
    logs = np.log(values)
    n = logs.size
    if not n:
        return {"value": math.nan, "log_se": math.nan, "setups": 0}
    se = float(np.std(logs, ddof=1) / math.sqrt(n)) if n > 1 else math.nan
    return {"value": float(np.exp(logs.mean())), "log_se": se, "setups": n}


def noise(logs: np.ndarray, log_se: np.ndarray) -> float:
    """The series' sigma on the log scale: the larger of its commits' median standard error
    and the spread of successive differences (robust: a step moves one difference)."""
    own = float(np.nanmedian(log_se)) if np.isfinite(log_se).any() else 0.0
    diffs = np.diff(logs)
    if diffs.size >= 2:
        mad = float(np.median(np.abs(diffs - np.median(diffs))))
        own = max(own, MAD_SIGMA * mad / math.sqrt(2))
    return own


def change_points(logs: np.ndarray, sigma: float) -> list[int]:
    """Where new segments begin (positions 1..n-1), by PELT with PENALTY; none for a series of
    fewer than three commits, which cannot tell a change from noise."""
    n = logs.size
    if n < 3 or not np.isfinite(logs).all():
        return []
    import ruptures

    pen = PENALTY * max(sigma, 1e-6) ** 2 * math.log(n)
    ends = ruptures.Pelt(model="l2", min_size=1, jump=1).fit(logs.reshape(-1, 1)).predict(pen)
    return [int(k) for k in ends[:-1]]


def steps(series: pd.DataFrame, starts: Sequence[int]) -> list[dict[str, Any]]:
    """Each change point as the commits either side, the position of the one after it, and
    the step between the segments' geometric means (after/before)."""
    logs = np.log(series["value"].to_numpy(float))
    bounds = [0, *starts, len(logs)]
    out = []
    for i, k in enumerate(starts):
        before, after = logs[bounds[i] : k], logs[k : bounds[i + 2]]
        out.append({
            "position": int(series["position"].iloc[k]),
            "before": str(series["sha"].iloc[k - 1]),
            "after": str(series["sha"].iloc[k]),
            "step": float(math.exp(after.mean() - before.mean())),
        })  # fmt: skip
    return out
