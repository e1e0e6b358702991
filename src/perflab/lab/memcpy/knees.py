"""The caches' edges in a sweep: where ticks per byte steps up for good (a piecewise-constant
fit of its log), each matched to the declared cache nearest to the bytes it touches."""

from __future__ import annotations

import itertools

import numpy as np
from numpy.typing import ArrayLike

from perflab.core.lazy import pd
from perflab.store import results
from perflab.system import machine


def _segment_costs(y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    c1 = np.concatenate([[0.0], np.cumsum(y)])
    c2 = np.concatenate([[0.0], np.cumsum(y * y)])
    return c1, c2


def segments(y: ArrayLike, penalty: float, min_len: int) -> list[int]:
    """Optimal partition of y into constant segments (least squares + penalty per segment).

    Returns the start index of every segment after the first. Exact dynamic programming,
    O(n^2) with prefix sums: a few hundred points per sweep make this instant.
    """
    y = np.asarray(y, dtype=float)
    n = y.size
    c1, c2 = _segment_costs(y)
    best = np.full(n + 1, np.inf)
    best[0] = -penalty
    prev = np.zeros(n + 1, dtype=int)
    for end in range(min_len, n + 1):
        starts = np.arange(0, end - min_len + 1)
        starts = starts[np.isfinite(best[starts])]
        if starts.size == 0:
            continue
        length = end - starts
        s1 = c1[end] - c1[starts]
        sse = (c2[end] - c2[starts]) - s1 * s1 / length
        total = best[starts] + sse + penalty
        i = int(np.argmin(total))
        best[end], prev[end] = total[i], starts[i]
    cuts, end = [], n
    while end > 0:
        end = int(prev[end])
        if end > 0:
            cuts.append(end)
    return sorted(cuts)


def _noise(y: np.ndarray) -> float:
    """Robust noise level of a series from its first differences (MAD, scaled for a normal)."""
    d = np.diff(y)
    if d.size == 0:
        return 0.0
    return float(1.4826 * np.median(np.abs(d - np.median(d))) / np.sqrt(2))


def running_median(y: np.ndarray, width: int = 5) -> np.ndarray:
    """Median of each point's neighbourhood: one interrupted copy must not make a segment."""
    half = width // 2
    padded = np.pad(y, half, mode="edge")
    windows = np.lib.stride_tricks.sliding_window_view(padded, width)
    return np.median(windows, axis=1)


def detect_knees(
    sizes_copied: ArrayLike,
    ticks_per_byte: ArrayLike,
    min_size: int = 2048,
    min_rise: float = 1.5,
    min_len: int = 12,
    ramp_len: int = 32,
) -> pd.DataFrame:
    """Sizes where ticks per byte steps up for good: the caches' edges.

    Change points of log(ticks per byte) against log size (piecewise-constant fit, penalty
    from the robust noise level), keeping rises of at least `min_rise` between neighbouring
    levels; a rise spread over segments shorter than `ramp_len` points (a gradual edge,
    32 points = one octave) counts once, at its start. Sizes below `min_size` are left
    out: there the call's fixed cost dominates.
    Columns: size (S, bytes copied), touched (2*S, bytes the copy touches), level_before,
    level_after (median ticks per byte of the neighbouring segments), rise.
    """
    size = np.asarray(sizes_copied, dtype=float)
    tpb = np.asarray(ticks_per_byte, dtype=float)
    keep = (size >= min_size) & np.isfinite(tpb) & (tpb > 0)
    size, tpb = size[keep], tpb[keep]
    cols = ["size", "touched", "level_before", "level_after", "rise"]
    if size.size < 2 * min_len:
        return pd.DataFrame(columns=cols)
    raw = np.log(tpb)
    sigma = max(_noise(raw), 1e-3)
    y = running_median(raw)
    cuts = segments(y, penalty=8 * sigma**2 * np.log(y.size), min_len=min_len)
    bounds = [0, *cuts, y.size]
    levels = [float(np.median(tpb[a:b])) for a, b in itertools.pairwise(bounds)]
    rows, i = [], 0
    while i < len(cuts):
        if levels[i + 1] <= levels[i]:
            i += 1
            continue
        j = i
        while (
            j + 1 < len(cuts) and levels[j + 2] > levels[j + 1] and cuts[j + 1] - cuts[j] < ramp_len
        ):
            j += 1
        rise = levels[j + 1] / levels[i]
        if rise >= min_rise:
            s = float(size[cuts[i]])
            rows.append(
                {
                    "size": int(s),
                    "touched": int(2 * s),
                    "level_before": levels[i],
                    "level_after": levels[j + 1],
                    "rise": rise,
                }
            )
        i = j + 1
    return pd.DataFrame(rows, columns=cols)


def recorded_caches(df: pd.DataFrame) -> pd.DataFrame:
    """The caches of the machine that measured df (its metadata), this machine's if unrecorded:
    a file read elsewhere, or here on another CPU, keeps its own cache sizes."""
    saved = results.metadata(df).get("caches")
    return pd.DataFrame(saved) if saved else machine.caches()


def knee_report(knees: pd.DataFrame, caches: pd.DataFrame | None = None) -> pd.DataFrame:
    """Each detected knee beside the declared data cache nearest to the bytes it touches."""
    table = machine.caches() if caches is None else caches
    data = table[table["cache"].isin(["L1d", "L2", "L3", "L4"])] if not table.empty else table
    rows = []
    for k in knees.itertuples(index=False):
        row = {"knee_size": k.size, "touched": k.touched, "rise": k.rise}
        if len(data):
            ratio = np.abs(np.log2(data["size_bytes"].to_numpy() / k.touched))
            near = data.iloc[int(np.argmin(ratio))]
            row.update(cache=near["cache"], cache_bytes=int(near["size_bytes"]))
            row["touched_over_cache"] = k.touched / near["size_bytes"]
        rows.append(row)
    return pd.DataFrame(rows)
