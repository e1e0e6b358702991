"""Windows that stand out from their neighbours, where a global threshold cannot see them.

detect_windows compares every size with the median of all sizes. When a CPU switches between
a fast and a slow mode for stretches of runs, the per-size medians scatter between the modes
all along the sweep and raise that threshold: on an AMD Zen 5 guest two sizes one stack step
apart read +37 % and +36 % under a threshold of 1.38x the baseline, and the sweep said "no
window". A window moves every run of its sizes, the fast mode's too, so its sizes' minima
stand above those of the sizes around it. Here a cluster is the sizes of one stack step
(STACK_STEP bytes of environment) whose every minimum exceeds every minimum of the sizes two
to six stack steps either side (a rank test: by chance, with 8 sizes against 64, about one
in 10^10), by at least MIN_EXCESS in their medians.
"""

from __future__ import annotations

import numpy as np

from perflab.core.lazy import pd
from perflab.lab.env_size.windows import MIN_EXCESS, STACK_STEP

MIN_SIZES = 4  # a cluster needs this many sizes in its stack step: fewer could win by chance
NEAR, FAR = 2 * STACK_STEP, 6 * STACK_STEP  # the neighbours' distance from the cluster


def local_windows(summary: pd.DataFrame) -> list[dict]:
    """Clusters of sizes that stand out from their neighbours in their minima (and medians):
    rows of start, end, width, sizes, peak_size, peak, excess (over the neighbours' median)."""
    s = summary.dropna(subset=["min", "median"]).sort_values("env_size")
    sizes = s["env_size"].to_numpy(np.int64)
    lows, meds = s["min"].to_numpy(float), s["median"].to_numpy(float)
    if sizes.size < 2:
        return []
    step = int(np.min(np.diff(sizes)))
    hot = np.zeros(sizes.size, bool)
    for start in sizes:
        block = (sizes >= start) & (sizes < start + STACK_STEP)
        if block.sum() < MIN_SIZES:
            continue
        d_lo, d_hi = start - sizes, sizes - (start + STACK_STEP - 1)
        near = ((d_lo >= NEAR) & (d_lo <= FAR)) | ((d_hi >= NEAR) & (d_hi <= FAR))
        if near.sum() < 4 * block.sum() or lows[block].min() <= lows[near].max():
            continue
        if np.median(meds[block]) >= np.median(meds[near]) * (1 + MIN_EXCESS):
            hot |= block
    idx = np.flatnonzero(hot)
    rows = []
    for group in np.split(idx, np.flatnonzero(np.diff(sizes[idx]) > step) + 1) if idx.size else []:
        first, last = int(sizes[group[0]]), int(sizes[group[-1]])
        d_lo, d_hi = first - sizes, sizes - last
        near = ((d_lo >= NEAR) & (d_lo <= FAR)) | ((d_hi >= NEAR) & (d_hi <= FAR))
        peak = group[np.argmax(meds[group])]
        rows.append({
            "start": first, "end": last, "width": last - first + step, "sizes": int(group.size),
            "peak_size": int(sizes[peak]), "peak": float(meds[peak]),
            "excess": float(meds[peak] / np.median(meds[near]) - 1),
        })  # fmt: skip
    return rows
