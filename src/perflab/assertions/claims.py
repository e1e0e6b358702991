"""Performance assertions decided by statistics on interleaved runs, not by wall-clock thresholds.

Runs grow in rounds (20, 40, 80, ... per side) until a confidence interval decides the claim
or the budget (seconds and runs) is spent; an undecided claim fails as inconclusive. The
intervals are distribution-free (order statistics of each side's median, ties included) and
widened by the timer step per call: a bootstrap of medians collapses to a point on quantized
samples (20-tick TSC steps) and then declares one-step differences between identical code.
Looking after every round would inflate the false-claim rate, so each look uses the interval
at level 1 - (1 - confidence) / looks, looks being the most rounds the runs budget allows
(Bonferroni): the whole sequential test keeps its error rate below 1 - confidence.
Between two distinct C functions the ratio's interval is also widened by this machine's
placement floor (running/placement.py, measured once and cached): their relative speed depends on
where their code lies, which no run count averages away, by an amount each CPU has its own of;
between two distinct Python callables by the interpreter's own floor (measured once a process).

A Python callable's runs are classified at every look as warmup_stats classifies an
execution's iterations (analysis/warmup.py): the claim is decided on the runs from the latest
steady start of the two sides (the same runs of each, so the interleaving still pairs them),
and not at all while a side reaches no steady state; if none is reached before the budget is
spent the claim is inconclusive, saying which side.
"""

from __future__ import annotations

import math
import numbers
import os
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from perflab.analysis import stats
from perflab.analysis import warmup as steady_state
from perflab.assertions import exact, table
from perflab.assertions.comparison import DISTURBED, FAIL, INCONCLUSIVE, PASS, Comparison
from perflab.assertions.lock import measuring_lock
from perflab.errors import PerflabError, WrongType
from perflab.plan import metrics
from perflab.running import placement, timing

DEFAULT_CONFIDENCE = 0.95
FIRST_ROUND = placement.SHORT_RUNS
MIN_ROUND = 5
# A measured floor for C beyond this: identical code at two addresses differs more than most
# changes under test, and a floor read off a dozen placements cannot stand for where two
# distinct functions lie (a Zen 5 guest ran the suite's twins 1.24-1.65x apart in spells of a
# few milliseconds, which the floor's short timings read as up to 55 %): a claim between
# distinct C functions is then undecidable, not made.
UNDECIDABLE_FLOOR = 0.25


@dataclass(frozen=True)
class Budget:
    """What one assertion may spend: wall seconds and runs (samples) per side."""

    seconds: float = 5.0
    runs: int = 2000

    @classmethod
    def parse(cls, text: str) -> Budget:
        """'2s', '500', '500runs', '2s,500': unset parts keep their defaults."""
        seconds, runs = cls.seconds, cls.runs
        for part in filter(None, (p.strip() for p in str(text).split(","))):
            m = re.fullmatch(r"(\d+(?:\.\d*)?|\.\d+)\s*(s|runs)?", part)
            if not m:
                raise PerflabError(
                    f"bad budget {part!r}: use SECONDS followed by 's' and/or a number of runs, "
                    "e.g. '2s', '500runs' or '2s,500'"
                )
            if m[2] == "s":
                seconds = float(m[1])
            else:
                runs = int(float(m[1]))
        return cls(seconds=seconds, runs=runs)

    def __post_init__(self) -> None:
        if not 0 < self.seconds < math.inf or self.runs < FIRST_ROUND:
            raise PerflabError(
                f"budget {self}: need a finite number of seconds > 0 and at least "
                f"{FIRST_ROUND} runs"
            )

    def looks(self) -> int:
        """The most rounds (and so decisions) the runs budget allows when runs double."""
        return 1 + math.ceil(math.log2(self.runs / FIRST_ROUND))

    def __str__(self) -> str:
        return f"{self.seconds:g}s,{self.runs}runs"


BudgetLike = Budget | str | None


def as_budget(budget: BudgetLike) -> Budget:
    """Accept a Budget, its text form, or None for the default."""
    if budget is None:
        return Budget()
    return budget if isinstance(budget, Budget) else Budget.parse(budget)


class PerfAssertionError(AssertionError):
    """A perf claim that failed or could not be decided; carries the Comparison."""

    def __init__(self, comparison: Comparison) -> None:
        super().__init__(table.render(comparison))
        self.comparison = comparison


# A statistic maps the per-call samples to (estimate, lo, hi) at a level; a decision maps
# the interval to a verdict (PASS/FAIL decided, None undecided) and the reason in words.
Statistic = Callable[[list[np.ndarray], float, list[float]], tuple[float, float, float]]
Decision = Callable[[float, float], tuple[str | None, str]]


class Steady(NamedTuple):
    """The runs' classes at one look: each side's ("" where not classified: C functions and
    programs), its steady start (None: none), the runs of each dropped before deciding, and
    the sides with no steady state."""

    classes: tuple[str, ...]
    starts: tuple[int | None, ...]
    dropped: int
    missing: tuple[int, ...]


def _steady(targets: Sequence[timing.Target], raws: list[np.ndarray]) -> Steady:
    """Each Python callable's runs classified as they were timed (ticks per call, the
    subtracted overhead left in: a constant that moves no change point and keeps every value
    above 0); the others are kept whole."""
    classes: list[str] = []
    starts: list[int | None] = []
    for t, raw in zip(targets, raws, strict=True):
        if getattr(t, "function", None) is None:
            classes.append("")
            starts.append(0)
            continue
        e = steady_state.classify(raw / t.calls, resolution=t.resolution)
        classes.append(e.classification)
        starts.append(e.steady_start)
    missing = tuple(i for i, s in enumerate(starts) if s is None)
    dropped = 0 if missing else max(s for s in starts if s is not None)
    return Steady(tuple(classes), tuple(starts), dropped, missing)


def _measure(
    targets: Sequence[timing.Target],
    roles: tuple[str, ...],
    statistic: Statistic,
    decide: Decision,
    budget: Budget,
    confidence: float,
    floor: float = 0.0,
    floor_sentence: str = "",
    undecidable: bool = False,
) -> dict[str, Any]:
    """Rounds of interleaved runs until decide() returns a verdict or the budget is spent,
    each decided on the steady runs (_steady: none while a side has no steady state);
    a ratio's interval is widened by the share `floor` each way before deciding, and an
    undecided one the floor alone kept from deciding says so (floor_sentence); an undecidable
    floor ends it undecided after its first round."""
    if not 0 < confidence < 1:
        raise PerflabError(f"confidence must be between 0 and 1, not {confidence}")
    level = 1 - (1 - confidence) / budget.looks()
    raws: list[list[np.ndarray]] = [[] for _ in targets]
    nets: list[list[np.ndarray]] = [[] for _ in targets]
    cpus: list[list[np.ndarray]] = [[] for _ in targets]
    rounds, total, size, last = 0, 0, FIRST_ROUND, False
    with measuring_lock(wait_s=budget.seconds) as waited:
        t0 = time.monotonic()
        timing.calibrate(*targets)
        while True:
            if len(targets) == 2:
                ra, na, ca, rb, nb, cb = timing.sample_pair_tagged(targets[0], targets[1], size)
                got = [(ra, na, ca), (rb, nb, cb)]
            else:
                got = [timing.sample_tagged(targets[0], size)]
            for i, (raw, net, cpu) in enumerate(got):
                raws[i].append(raw)
                nets[i].append(net)
                cpus[i].append(cpu)
            rounds, total = rounds + 1, total + size
            samples = [np.concatenate(n) for n in nets]
            steady = _steady(targets, [np.concatenate(r) for r in raws])
            kept = [x[steady.dropped :] for x in samples]
            est, lo, hi = statistic(kept, level, [t.resolution for t in targets])
            unwidened_decides = decide(lo, hi)[0] is not None and not steady.missing
            lo, hi = lo / (1 + floor), hi * (1 + floor)
            verdict, reason = decide(lo, hi)
            if steady.missing:
                verdict = None
                reason = "no steady state in " + " and ".join(
                    f"{roles[i]}'s {total} runs ({targets[i].name})" for i in steady.missing
                )
            elapsed = time.monotonic() - t0
            within_floor = False
            if undecidable and not steady.missing:  # no run narrows what placement spans
                verdict, within_floor = INCONCLUSIVE, True
                reason = (
                    f"{reason}; {floor_sentence}: beyond {UNDECIDABLE_FLOOR:.0%}, where no "
                    "floor measured on a few placements can stand for where two distinct "
                    "functions lie, claims between them are undecidable on this CPU (compare "
                    "two calls of one function, or pass placement_floor=)"
                )
                break
            if verdict is not None:
                break
            size = min(total, budget.runs - total)
            affordable = int((budget.seconds - elapsed) * total / max(elapsed, 1e-9))
            if affordable < size:
                size, last = affordable, True
            if size <= 0 or (last and size < MIN_ROUND):
                verdict = INCONCLUSIVE
                reason = f"{reason}; budget spent ({total} runs, {elapsed:.2f} s) before deciding"
                within_floor = unwidened_decides and floor > 0
                if within_floor:
                    reason += f"; it would decide without the placement floor, but {floor_sentence}"
                break
    round_of = np.concatenate([np.full(len(r), i) for i, r in enumerate(raws[0])])
    return dict(
        samples=tuple(samples),
        kept=tuple(kept),
        warmup=steady.classes,
        steady_starts=steady.starts,
        dropped=steady.dropped,
        no_steady=tuple(roles[i] for i in steady.missing),
        raw=tuple(np.concatenate(r) for r in raws),
        cpu=tuple(np.concatenate(c) for c in cpus),
        round_of=round_of,
        estimate=est,
        ci=(lo, hi),
        level=level,
        verdict=verdict,
        reason=reason,
        rounds=rounds,
        runs=total,
        seconds=elapsed,
        lock_wait=waited,
        floor=floor,
        within_floor=within_floor,
    )


def _ratio(
    samples: list[np.ndarray], level: float, resolutions: list[float]
) -> tuple[float, float, float]:
    """median(second)/median(first) with its interval (stats.ratio_order_interval)."""
    first, second = samples
    for x in samples:
        if np.median(x) <= 0:
            raise PerflabError(
                "a target's median is <= 0 ticks per call once the call overhead is "
                "subtracted: it does too little to compare; give it more work per call"
            )
    return stats.ratio_order_interval(first, second, level, (resolutions[0], resolutions[1]))


def _median(
    samples: list[np.ndarray], level: float, resolutions: list[float]
) -> tuple[float, float, float]:
    return stats.median_order_interval(samples[0], level, resolutions[0])


def _below(threshold: float, what: str) -> Decision:
    """PASS when the interval lies below threshold, FAIL when above."""

    def decide(lo: float, hi: float) -> tuple[str | None, str]:
        if hi < threshold:
            return PASS, f"{what} is below {threshold:.4g} (CI upper bound {hi:.4g})"
        if lo > threshold:
            return FAIL, f"{what} is above {threshold:.4g} (CI lower bound {lo:.4g})"
        return None, f"CI [{lo:.4g}, {hi:.4g}] still contains {threshold:.4g}"

    return decide


def _above(threshold: float, what: str) -> Decision:
    """PASS when the interval lies above threshold, FAIL when below."""

    def decide(lo: float, hi: float) -> tuple[str | None, str]:
        if lo > threshold:
            return PASS, f"{what} is above {threshold:.4g} (CI lower bound {lo:.4g})"
        if hi < threshold:
            return FAIL, f"{what} is below {threshold:.4g} (CI upper bound {hi:.4g})"
        return None, f"CI [{lo:.4g}, {hi:.4g}] still contains {threshold:.4g}"

    return decide


def _disturbed(raw: np.ndarray) -> float:
    """Share of runs slower than DISTURBED times the fastest: preempted, interrupted, stolen."""
    return float(np.mean(raw > DISTURBED * raw.min()))


def _record(
    assertion: str,
    claim: str,
    roles: tuple[str, ...],
    targets: Sequence[timing.Target],
    threshold: float,
    budget: Budget,
    confidence: float,
    out: dict[str, Any],
    basis: FloorBasis,
) -> Comparison:
    """The Comparison of what _measure (or exact.measure) returned; its medians are of the
    runs decided on, from the steady start on."""
    out = dict(out)
    kept = out.pop("kept", out["samples"])
    return Comparison(
        floor_note=basis.note,
        floor_kind=basis.kind,
        lanes=getattr(targets[0], "lanes", ()),
        disturbed=tuple(_disturbed(r) for r in out["raw"]),
        load=os.getloadavg()[0],
        assertion=assertion,
        claim=claim,
        roles=roles,
        names=tuple(t.name for t in targets),
        medians=tuple(float(np.median(s)) for s in kept),
        calls=tuple(t.calls for t in targets),
        overheads=tuple(t.overhead for t in targets),
        resolutions=tuple(t.resolution for t in targets),
        step=timing.timer_step(),
        threshold=threshold,
        confidence=confidence,
        budget=str(budget),
        **out,
    )


class FloorBasis(NamedTuple):
    """The placement floor a ratio is widened by: its share, what it means, where it came
    from, and whose it is ("c", "python", or "" when the targets share their code)."""

    share: float
    sentence: str
    note: str
    kind: str
    given: bool = False  # placement_floor= named it: the user's to answer for

    @property
    def undecidable(self) -> bool:
        """A measured C floor beyond UNDECIDABLE_FLOOR: claims between distinct C functions
        are not made."""
        return self.kind == "c" and self.share >= UNDECIDABLE_FLOOR and not self.given


NO_FLOOR = FloorBasis(0.0, "", "", "")  # one target, or targets that share their code


def _placement_floor(
    targets: Sequence[timing.Target], given: float | None, wait_s: float = math.inf
) -> FloorBasis:
    """The floor for a ratio of these targets: none unless they are distinct C functions or
    distinct Python callables; then `given`, else the machine's floor for C (measured under
    the lock on first use and cached) or this interpreter's for Python (measured once per
    process)."""
    python = timing.distinct_callables(*targets)
    if not (python or timing.distinct_code(*targets)):
        return NO_FLOOR
    kind = "python" if python else "c"
    if given is not None:
        if not 0 <= given < math.inf:
            raise PerflabError(f"placement_floor must be a share >= 0, not {given}")
        if given == 0:
            return FloorBasis(0.0, "", "code placement trusted (placement_floor=0)", kind, True)
        return FloorBasis(float(given), f"placement_floor={given:g} was given",
                          "placement floor as given", kind, True)  # fmt: skip
    with measuring_lock(wait_s=wait_s):
        floor, cached = placement.python_floor() if python else placement.floor()
    when = f"measured {floor.measured_at}" if cached else f"measured now in {floor.seconds:.1f} s"
    if floor.disturbed:
        when += f" on a busy machine ({floor.disturbed} timings disturbed)"
    again = (
        "kept for this process"
        if python
        else "cached; `perflab machine --remeasure-floor` measures it again"
    )
    return FloorBasis(floor.share, floor.sentence(), f"{floor.sentence()} ({when}, {again})", kind)


def _finite(**thresholds: float) -> None:
    """Refuse a threshold that is not a number, or is NaN or infinite: no interval can decide
    against it, so the claim would spend its whole budget (NaN) or be settled before any run
    (infinity)."""
    for name, value in thresholds.items():
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise WrongType(f"{name} must be a finite number, not {value!r}")
        if not math.isfinite(value):
            raise PerflabError(f"{name} must be a finite number, not {value}")


def check_faster(
    fast: Any,
    slow: Any,
    min_ratio: float = 1.0,
    confidence: float = DEFAULT_CONFIDENCE,
    budget: BudgetLike = None,
    placement_floor: float | None = None,
    metric: str = "time",
) -> Comparison:
    """Decide whether median(slow)/median(fast) > min_ratio, without raising.

    placement_floor: the share a ratio between two distinct C functions is widened by (None:
    this machine's measured floor; 0 trusts code placement). metric: time (ticks), or
    instructions-exact (two programs' instructions under Valgrind: assertions/exact.py); any
    other is refused in plan/metrics.py's one line."""
    _finite(min_ratio=min_ratio, confidence=confidence)
    (metric,) = metrics.check(metric, "assertions")
    if min_ratio <= 0:
        raise PerflabError(
            f"min_ratio must be above 0, not {min_ratio:g}: a ratio of two medians of times is "
            "positive, so the claim could never fail"
        )
    budget = as_budget(budget)
    targets = (timing.as_target(fast), timing.as_target(slow))
    claim = f"median(slow)/median(fast) > {min_ratio:g}"
    if metric == "instructions-exact":
        out = exact.measure(targets, _above(min_ratio, "slow/fast"), confidence)
        return _record("assert_faster", claim.replace("median", "instructions"), ("fast", "slow"),
                       targets, min_ratio, budget, confidence, out, NO_FLOOR)  # fmt: skip
    basis = _placement_floor(targets, placement_floor, budget.seconds)
    out = _measure(
        targets, ("fast", "slow"), _ratio, _above(min_ratio, "slow/fast"), budget, confidence,
        basis.share, basis.sentence, basis.undecidable,
    )  # fmt: skip
    return _record(
        "assert_faster", claim, ("fast", "slow"), targets, min_ratio, budget, confidence, out, basis
    )


def check_no_slower(
    candidate: Any,
    baseline: Any,
    tolerance: float = 0.05,
    confidence: float = DEFAULT_CONFIDENCE,
    budget: BudgetLike = None,
    placement_floor: float | None = None,
    metric: str = "time",
) -> Comparison:
    """Decide whether median(candidate)/median(baseline) < 1 + tolerance, without raising
    (placement_floor and metric as in check_faster)."""
    _finite(tolerance=tolerance, confidence=confidence)
    (metric,) = metrics.check(metric, "assertions")
    if tolerance < 0:
        raise PerflabError(f"tolerance must be >= 0, not {tolerance}")
    budget = as_budget(budget)
    targets = (timing.as_target(baseline), timing.as_target(candidate))
    limit = 1 + tolerance
    claim = f"median(candidate)/median(baseline) < {limit:g}"
    if metric == "instructions-exact":
        out = exact.measure(targets, _below(limit, "candidate/baseline"), confidence)
        return _record("assert_no_slower", claim.replace("median", "instructions"),
                       ("baseline", "candidate"), targets, limit, budget, confidence, out,
                       NO_FLOOR)  # fmt: skip
    basis = _placement_floor(targets, placement_floor, budget.seconds)
    out = _measure(
        targets, ("baseline", "candidate"), _ratio, _below(limit, "candidate/baseline"), budget,
        confidence, basis.share, basis.sentence, basis.undecidable,
    )  # fmt: skip
    return _record(
        "assert_no_slower",
        claim,
        ("baseline", "candidate"),
        targets,
        limit,
        budget,
        confidence,
        out,
        basis,
    )


def check_ticks_below(
    fn: Any, limit: float, confidence: float = DEFAULT_CONFIDENCE, budget: BudgetLike = None
) -> Comparison:
    """Decide whether fn's median net ticks per call is below limit, without raising."""
    _finite(limit=limit, confidence=confidence)
    budget = as_budget(budget)
    targets = (timing.as_target(fn),)
    claim = f"median ticks per call < {limit:g}"
    out = _measure(
        targets, ("target",), _median, _below(limit, "median ticks/call"), budget, confidence
    )
    return _record(
        "assert_ticks_below", claim, ("target",), targets, limit, budget, confidence, out,
        NO_FLOOR,
    )  # fmt: skip


def _enforce(comparison: Comparison) -> Comparison:
    __tracebackhide__ = True
    if not comparison.passed:
        raise PerfAssertionError(comparison)
    return comparison


def assert_faster(
    fast: Any,
    slow: Any,
    min_ratio: float = 1.0,
    confidence: float = DEFAULT_CONFIDENCE,
    budget: BudgetLike = None,
    placement_floor: float | None = None,
    metric: str = "time",
) -> Comparison:
    """Pass only when the CI of median(slow)/median(fast) lies entirely above min_ratio."""
    __tracebackhide__ = True
    return _enforce(
        check_faster(fast, slow, min_ratio, confidence, budget, placement_floor, metric)
    )


def assert_no_slower(
    candidate: Any,
    baseline: Any,
    tolerance: float = 0.05,
    confidence: float = DEFAULT_CONFIDENCE,
    budget: BudgetLike = None,
    placement_floor: float | None = None,
    metric: str = "time",
) -> Comparison:
    """Pass only when the CI of median(candidate)/median(baseline) lies below 1 + tolerance."""
    __tracebackhide__ = True
    return _enforce(
        check_no_slower(candidate, baseline, tolerance, confidence, budget, placement_floor, metric)
    )


def assert_ticks_below(
    fn: Any, limit: float, confidence: float = DEFAULT_CONFIDENCE, budget: BudgetLike = None
) -> Comparison:
    """Pass only when the CI of fn's median net ticks per call lies below limit."""
    __tracebackhide__ = True
    return _enforce(check_ticks_below(fn, limit, confidence, budget))
