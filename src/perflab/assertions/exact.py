"""Assertions decided on instructions-exact: each program's instructions counted under
Valgrind (lab/compare/exact.py) in the environment its timed runs would have, twice, so that a
count that does not repeat widens the ratio's interval instead of passing unseen. A count is
blind to layout and to the machine's load: the same verdict in every run."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from perflab.assertions.verdicts import FAIL
from perflab.errors import PerflabError
from perflab.running import timing


def measure(
    targets: Sequence[timing.Target],
    decide: Callable[[float, float], tuple[str | None, str]],
    confidence: float,
) -> dict[str, Any]:
    """What claims._measure returns, from two counts of each program: the ratio of the second
    target's count to the first's, its interval the counts' own spread (none when they repeat)."""
    from perflab.lab.compare import exact

    programs = [t for t in targets if isinstance(t, timing.ProgramTarget)]
    if len(programs) != len(targets):
        raise PerflabError(
            "metric instructions-exact counts programs: give perflab.program(argv), not a "
            "Python callable (its instructions are the interpreter's)"
        )
    t0 = time.monotonic()
    counts = [
        np.array(
            [exact.count(t.argv, t.env or {}, t.options.timeout).instructions for _ in range(2)],
            float,
        )
        for t in programs
    ]
    lo, hi = counts[1].min() / counts[0].max(), counts[1].max() / counts[0].min()
    estimate = float(np.median(counts[1])) / float(np.median(counts[0]))
    verdict, reason = decide(lo, hi)
    if verdict is None:  # an exact ratio on the threshold: it does not lie below or above it
        verdict, reason = FAIL, f"{reason}: the counts are exact, no more runs can move it"
    return dict(
        samples=tuple(counts), raw=tuple(c.astype(np.uint64) for c in counts),
        cpu=(), round_of=np.zeros(2, dtype=np.int64), estimate=estimate, ci=(lo, hi),
        level=confidence, verdict=verdict, reason=f"instructions under valgrind: {reason}",
        rounds=1, runs=2, metric="instructions-exact", seconds=time.monotonic() - t0,
        lock_wait=0.0, floor=0.0, within_floor=False,
    )  # fmt: skip
