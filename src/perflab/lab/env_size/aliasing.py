"""Does this CPU pay for 4K aliasing? The same loads and stores, aliased mod 4096 or not.

Why a CPU shows env-size windows or none: the windows come from a stack slot meeting a
static modulo 4096 (see windows.py), and whether that costs anything is the CPU's affair.
Two kernels (csrc/alias.c), each timed with its load 8192 bytes after its store (same low
12 bits) and 8256 bytes after it (another line, other low bits), in interleaved trials.
"""

from dataclasses import asdict, dataclass

import numpy as np

from perflab.core import bindings

ALIASED = 2 * 4096
DISTINCT = ALIASED + 64
# A penalty counts when three trials in four show at least this much: a lone preempted
# trial on a shared machine must not make a CPU look affected.
SHOWS = 0.05
KERNELS = {
    "store-load": "a store, then an independent load",
    "loop": "the paper's loop, &inc ≡ &i and &g ≡ &j mod 4096",
}


@dataclass(frozen=True)
class AliasCheck:
    """One kernel's verdict: ticks per iteration aliased and not, and the penalty's spread."""

    kernel: str
    aliased_ticks: float
    distinct_ticks: float
    penalty: float  # median over trials of aliased/distinct - 1
    low: float  # first quartile of the same
    high: float  # third quartile
    shows: bool

    def sentence(self) -> str:
        """One line a newcomer can read."""
        what = "pays" if self.shows else "does not pay"
        return (
            f"{KERNELS[self.kernel]}: {self.aliased_ticks:.2f} vs {self.distinct_ticks:.2f} "
            f"ticks/iteration aliased vs not, per-iteration cost {self.penalty:+.0%} "
            f"(IQR {self.low:+.0%}..{self.high:+.0%}): this CPU {what} for 4K aliasing here"
        )


def check(kernel: str, iterations: int = 65536, trials: int = 21) -> AliasCheck:
    """Time one kernel aliased and not, `trials` interleaved pairs of `iterations` each."""
    a, d = bindings.alias_time(kernel, ALIASED, DISTINCT, iterations, trials)
    ratio = a.astype(float) / np.maximum(d.astype(float), 1) - 1
    low, med, high = np.percentile(ratio, [25, 50, 75])
    return AliasCheck(
        kernel,
        float(np.median(a)) / iterations,
        float(np.median(d)) / iterations,
        float(med),
        float(low),
        float(high),
        bool(low >= SHOWS),
    )


def check_all(iterations: int = 65536, trials: int = 21) -> list[dict]:
    """Both kernels, as records for a result's metadata."""
    return [asdict(check(k, iterations, trials)) for k in KERNELS]
