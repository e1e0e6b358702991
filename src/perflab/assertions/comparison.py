"""What a perf assertion measured and decided (Comparison), as plain numbers and tidy rows."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from perflab.assertions import table as report_table
from perflab.assertions.verdicts import DISTURBED, FAIL, INCONCLUSIVE, PASS
from perflab.core.lazy import pd
from perflab.running import timing

__all__ = ["DISTURBED", "FAIL", "INCONCLUSIVE", "PASS", "Comparison"]


@dataclass(frozen=True)
class Comparison:
    """What a perf assertion measured and decided: medians, ratio, its CI, runs, verdict."""

    assertion: str
    claim: str
    verdict: str
    reason: str
    roles: tuple[str, ...]
    names: tuple[str, ...]
    medians: tuple[float, ...]
    estimate: float
    ci: tuple[float, float]
    threshold: float
    confidence: float
    level: float
    runs: int
    rounds: int
    calls: tuple[int, ...]
    overheads: tuple[float, ...]
    resolutions: tuple[float, ...]
    step: int
    floor: float
    floor_note: str
    floor_kind: str
    within_floor: bool
    seconds: float
    lock_wait: float
    budget: str
    disturbed: tuple[float, ...]
    load: float
    samples: tuple[np.ndarray, ...] = field(repr=False, compare=False)
    raw: tuple[np.ndarray, ...] = field(repr=False, compare=False)
    round_of: np.ndarray = field(repr=False, compare=False)
    cpu: tuple[np.ndarray, ...] = field(default=(), repr=False, compare=False)
    lanes: tuple[int, ...] = ()
    metric: str = "time"  # instructions-exact: ticks and ticks_per_call hold instruction counts
    # a Python callable's runs classified (analysis/warmup.py; "" for other targets): each
    # side's class and steady start (None: no steady state), the leading runs of each dropped
    warmup: tuple[str, ...] = ()
    steady_starts: tuple[int | None, ...] = ()
    dropped: int = 0
    no_steady: tuple[str, ...] = ()  # the roles that reached no steady state

    @property
    def passed(self) -> bool:
        return self.verdict == PASS

    @property
    def ratio(self) -> float | None:
        """The ratio of medians a two-target comparison decided on (None for ticks_below)."""
        return self.estimate if len(self.roles) == 2 else None

    def table(self) -> str:
        """The readable report, what a failing assertion prints (assertions/table.py)."""
        return report_table.render(self)

    def summary(self) -> dict[str, Any]:
        """Plain numbers, for test reports and the saved file's metadata."""
        return {
            "assertion": self.assertion,
            "verdict": self.verdict,
            "claim": self.claim,
            **{f"{r}_name": n for r, n in zip(self.roles, self.names, strict=True)},
            **{f"{r}_median_ticks": m for r, m in zip(self.roles, self.medians, strict=True)},
            "estimate": self.estimate,
            "ratio": self.ratio,
            "ci_lo": self.ci[0],
            "ci_hi": self.ci[1],
            "threshold": self.threshold,
            "confidence": self.confidence,
            "level": self.level,
            "runs": self.runs,
            "timer_step_ticks": self.step,
            "placement_floor": self.floor,
            "placement_floor_note": self.floor_note,
            "placement_floor_kind": self.floor_kind,
            "within_placement_floor": self.within_floor,
            **{f"{r}_resolution": q for r, q in zip(self.roles, self.resolutions, strict=True)},
            "rounds": self.rounds,
            "seconds": self.seconds,
            "budget": self.budget,
            **{f"{r}_disturbed": d for r, d in zip(self.roles, self.disturbed, strict=True)},
            "load": self.load,
            **{f"{r}_warmup": c for r, c in zip(self.roles, self.warmup, strict=False) if c},
            **{
                f"{r}_steady_start": st
                for r, st, c in zip(self.roles, self.steady_starts, self.warmup, strict=False)
                if c
            },
            "dropped_warmup_runs": self.dropped,
            "no_steady_state": list(self.no_steady),
            "jobs": max(len(self.lanes), 1),
            "lane_cpus": list(self.lanes),
        }

    def frame(self) -> pd.DataFrame:
        """Tidy rows, one per run of each target: raw ticks per run, net ticks per call, and
        whether the claim was decided on it (steady: past the runs dropped as warm-up)."""
        parts = []
        for i, role in enumerate(self.roles):
            parts.append(
                pd.DataFrame(
                    {
                        "assertion": self.assertion,
                        "role": role,
                        "target": self.names[i],
                        "rep": np.arange(self.runs),
                        "round": self.round_of,
                        "cpu": self.cpu[i] if self.cpu else timing.NOT_PINNED,
                        "calls": self.calls[i],
                        "ticks": self.raw[i],
                        "ticks_per_call": self.samples[i],
                        "steady": np.arange(self.runs) >= self.dropped,
                        "metric": self.metric,
                        "verdict": self.verdict,
                    }
                )
            )
        return pd.concat(parts, ignore_index=True)
