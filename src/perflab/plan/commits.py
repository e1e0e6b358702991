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

    # 20 layouts of 5 pairs, not 10 of 10: where the code's placement moves B/A (Zen 5: 1.7 %
    # between layouts, 2.3 % between a layout's pairs), the same runs give an interval 0.6x as
    # wide at a bisect's first look (benchmarks/results/2026-12-02-zen5-bisect-design.txt).
    setups: int = option("--setups", 20, "Random layouts per comparison.", least=1,
                         each_bytes=controls.ROW_BYTES)  # fmt: skip
    repeat: int = option("--repeat", 5, "A/B pairs per layout.", least=1,
                         each_bytes=controls.ROW_BYTES)  # fmt: skip
    seed: int = option("--seed", 0, "Seed of the layouts drawn.", within=(0, controls.SEED_MAX))


@dataclass(frozen=True)
class TrackPlan(CommitPlan):
    """track's comparisons: each commit of a range beside the reference, 10 layouts a commit."""

    setups: int = other_default(CommitPlan, "setups", 10)
