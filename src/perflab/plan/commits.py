"""What the verbs over a git history (bisect, track, history) ask of each comparison of two
commits: its random layouts, its pairs in each and the seed they are drawn from, stated once
with their bounds and help, so the three verbs and their Python functions read one source."""

from __future__ import annotations

from dataclasses import dataclass

from perflab.plan import controls
from perflab.plan.base import Plan, option, other_default


@dataclass(frozen=True)
class CommitPlan(Plan):
    """A comparison of two commits: `setups` random layouts of `repeat` A/B pairs each."""

    setups: int = option("--setups", 10, "Random layouts per comparison.", least=1,
                         each_bytes=controls.ROW_BYTES)  # fmt: skip
    repeat: int = option("--repeat", 10, "A/B pairs per layout.", least=1,
                         each_bytes=controls.ROW_BYTES)  # fmt: skip
    seed: int = option("--seed", 0, "Seed of the layouts drawn.", within=(0, controls.SEED_MAX))


@dataclass(frozen=True)
class TrackPlan(CommitPlan):
    """track's comparisons: each commit of a range beside the reference, 5 pairs a layout."""

    repeat: int = other_default(CommitPlan, "repeat", 5)
