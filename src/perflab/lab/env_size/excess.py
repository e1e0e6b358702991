"""A window's excess over the baseline, with an interval that names the level it covers.

One sweep's runs are not independent draws of what a repeated sweep would read: the machine's
state drifts over time, and on some CPUs a window's runs fall in two modes (on a Zen 5 guest
most at +15-19 %, a tail at +122 %, so two sweeps a minute apart read +18 % and +124 %). So the
interval resamples blocks of consecutive runs (time) rather than runs, and where the window's
runs have two modes it spans both: a repeated sweep may read either.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from perflab.core.lazy import pd

BLOCKS = 10  # stretches of consecutive runs a sweep is cut into for the time level
BOOT_TIME = 400  # resamples of the blocks (each recomputes every size's median)
BOOT_SIZES = 2000
BAND = float(np.log(1.1))  # a mode: runs within 10 % of each other
MIN_MODE = 0.03  # the smaller mode's least share of the window's runs (and at least 3 runs)
WINDOW_ONLY = 4.0  # how much more often than outside every window its runs fall in that mode
MIN_EXCESS = 0.02  # the least excess over the baseline a window is reported at
# A window pays when its excess is at least this and its interval stays above zero, and does
# not when the interval's top stays below it: the least excess the sweep's window finder
# reports, so that a layout that pays is one whose window a sweep can see.
PAYS = MIN_EXCESS


@dataclass(frozen=True)
class Mode:
    """Runs of a window within one BAND: their share, and their range over the baseline."""

    share: float
    low: float
    level: float
    high: float

    def text(self) -> str:
        """As a verdict states it: '7% at +115%..+130%'."""
        return f"{self.share:.0%} at {self.low:+.0%}..{self.high:+.0%}"


def over_sizes(values: np.ndarray, baseline: float, rng: np.random.Generator) -> tuple:
    """The median of a window's per-size values over the baseline, minus 1, with a bootstrap
    95 % interval over its sizes (all a per-size summary without runs can give)."""
    if values.size == 0 or not baseline:
        return np.nan, np.nan, np.nan
    boot = np.median(rng.choice(values, (BOOT_SIZES, values.size)), axis=1) / baseline - 1
    lo, hi = np.percentile(boot, [2.5, 97.5])
    return float(np.median(values) / baseline - 1), float(lo), float(hi)


class SizeBlocks:
    """A sweep's ok runs by size, each in its block of consecutive runs (row order is run
    order, as the journal records it), sorted for medians of resampled blocks."""

    def __init__(self, frame: pd.DataFrame, value: str, sizes: np.ndarray) -> None:
        """frame: the sweep's rows; sizes: the sorted sizes window masks index (runs of other
        sizes are left out)."""
        block = np.arange(len(frame)) * BLOCKS // max(len(frame), 1)
        ok = (frame["status"] == "ok").to_numpy()
        got = frame[value].to_numpy(dtype=float)
        at = np.minimum(np.searchsorted(sizes, frame["env_size"].to_numpy()), sizes.size - 1)
        keep = ok & np.isfinite(got) & (sizes[at] == frame["env_size"].to_numpy())
        order = np.lexsort((got[keep], at[keep]))
        self.values, self.block = got[keep][order], block[keep][order]
        self.size = at[keep][order]
        self.first = np.searchsorted(self.size, np.arange(sizes.size))
        self.stop = np.searchsorted(self.size, np.arange(sizes.size), side="right")

    def medians(self, weights: np.ndarray) -> np.ndarray:
        """Each size's median with every run counted `weights[its block]` times (NaN: none)."""
        if not self.values.size:
            return np.full(self.first.size, np.nan)
        cum = np.cumsum(weights[self.block])
        at = np.concatenate([[0], cum])
        before, total = at[self.first], at[self.stop] - at[self.first]
        last = self.values.size - 1
        lower = np.minimum(np.searchsorted(cum, before + (total + 1) // 2), last)
        upper = np.minimum(np.searchsorted(cum, before + total // 2 + 1), last)
        return np.where(total > 0, (self.values[lower] + self.values[upper]) / 2, np.nan)

    def over_time(
        self, windows: Sequence[np.ndarray], outside: np.ndarray, rng: np.random.Generator
    ) -> list[tuple[float, float]]:
        """Per window (a mask over sizes), a 95 % interval of its excess over BLOCKS time blocks:
        the blocks resampled, each size's median and the baseline recomputed from them."""
        draws = rng.multinomial(BLOCKS, np.full(BLOCKS, 1 / BLOCKS), size=BOOT_TIME)
        boot = np.full((BOOT_TIME, len(windows)), np.nan)
        with np.errstate(all="ignore"):
            for b, weights in enumerate(draws):
                median = self.medians(weights)
                if not np.isfinite(median[outside]).any():
                    continue
                baseline = np.nanmedian(median[outside])
                for w, inside in enumerate(windows):
                    if np.isfinite(median[inside]).any():
                        boot[b, w] = np.nanmedian(median[inside]) / baseline - 1
        out = []
        for column in boot.T:
            column = column[np.isfinite(column)]
            lo, hi = np.percentile(column, [2.5, 97.5]) if column.size else (np.nan, np.nan)
            out.append((float(lo), float(hi)))
        return out

    def modes(self, inside: np.ndarray, outside: np.ndarray, baseline: float) -> list[Mode]:
        """The window's two modes when its runs have two, else [].

        The main mode is the BAND (of runs over the baseline) holding most of the window's
        runs; a second is the fullest BAND beyond a gap of one BAND from it, counting only the
        runs of sizes that also have runs in the main mode (a size in one mode and its
        neighbour in the other is an uneven window, not a state that comes and goes). It must
        hold MIN_MODE of the runs (3 at least), be WINDOW_ONLY times fuller than the same BAND
        among the runs outside every window (so not the interference every size sees), and
        twice as full as any BAND between the two.
        """
        with np.errstate(all="ignore"):  # a value <= 0 has no ratio: NaN, left out
            ratio = np.log(self.values / baseline)
        finite = np.isfinite(ratio)
        mine = inside[self.size] & finite
        by = np.argsort(ratio[mine])
        d, size = ratio[mine][by], self.size[mine][by]
        control = np.sort(ratio[outside[self.size] & finite])
        if d.size < 3 or control.size == 0:
            return []
        ends = np.searchsorted(d, d + BAND, side="right")
        fill = ends - np.arange(d.size)
        main = int(np.argmax(fill))
        lo, hi = d[main], d[main] + BAND
        both = np.isin(size, size[main : ends[main]])
        mixed = np.concatenate([[0], np.cumsum(both)])
        shared = mixed[ends] - mixed[np.arange(d.size)]  # per BAND: runs of sizes in both
        beyond = (d > hi + BAND) | (d + BAND < lo - BAND)
        if not beyond.any():
            return []
        second = int(np.flatnonzero(beyond)[np.argmax(shared[beyond])])
        count = int(shared[second])
        a, b = d[second], d[second] + BAND
        seen_outside = np.searchsorted(control, b, "right") - np.searchsorted(control, a)
        between = (d > min(hi, b)) & (d + BAND < max(lo, a))
        valley = int(fill[between].max()) if between.any() else 0
        if (
            count < max(3, MIN_MODE * d.size)
            or count / d.size < WINDOW_ONLY * seen_outside / control.size
            or 2 * valley >= count
        ):
            return []
        found = []
        for start in sorted((main, second), key=lambda i: d[i]):
            x = np.exp(d[start : ends[start]]) - 1
            found.append(Mode(x.size / d.size, float(x.min()), float(np.median(x)), float(x.max())))
        return found


@dataclass(frozen=True)
class WindowTiming:
    """A predicted window timed against its neighbours: the pairs' excess and its interval."""

    start: int
    end: int
    inside: tuple[int, ...]  # the sizes timed inside the window
    outside: tuple[int, ...]  # and beside it, outside every predicted window
    pairs: int  # pairs whose two runs both ended ok
    ticks_inside: float  # median ticks of the runs inside
    ticks_outside: float  # and outside
    spread: float  # IQR / median of the runs outside
    excess: float  # exp(median log(inside / outside)) - 1 over the pairs
    ci_low: float
    ci_high: float
    verdict: str  # "pays", "does not pay" or "unclear"

    def text(self) -> str:
        """'+18.0% [+15.1%, +20.9%] over 64 interleaved pairs of exec'd runs at 2310, 2316,
        2324 vs 2260, 2372'."""
        return (
            f"{self.excess:+.1%} [{self.ci_low:+.1%}, {self.ci_high:+.1%}] over {self.pairs} "
            f"interleaved pairs of exec'd runs at {_sizes(self.inside)} vs {_sizes(self.outside)}"
        )


def _sizes(sizes: Sequence[int]) -> str:
    return ", ".join(map(str, sizes))


def verdict_of(excess: float, low: float, high: float) -> str:
    """pays, does not pay, or unclear, as PAYS says."""
    if excess >= PAYS and low > 0:
        return "pays"
    if high < PAYS:
        return "does not pay"
    return "unclear"
