"""B/A per setup and over all setups, their intervals, and the verdict they support."""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import NormalDist
from typing import Any

import numpy as np

from perflab.analysis import levels, repetitions, stats
from perflab.analysis.steady import RUN_CLASSES
from perflab.analysis.trimmed import trimmed_interval
from perflab.core.lazy import pd
from perflab.errors import PerflabError
from perflab.lab.compare.layouts import LAYOUT
from perflab.running.childruns import value_column
from perflab.store import results

# The share of layouts B/A over layouts would cut at each end: none. A 20 % trim reads a
# loaded machine's wild layouts (±30 % in A/A runs at load 4) with a tenth of the layouts, but
# where most layouts' medians tie (a loop whose runs take the same ticks), the trimmed mean's
# variance collapses and its interval excluded 1 in 2 of 6 A/A comparisons of byte-identical
# builds; over real A/A data the plain mean's interval missed 2 % of the time, the trimmed 5 %.
TRIM = 0.0

CONFIDENCE = 0.95

# A run this many times its side's median was stalled (preempted, swapped), not moved by a
# layout: no placement effect comes near 10x, and one such run's log would outweigh a hundred.
STALLED = 10.0

# The change a setup without a verdict is weighed against, as diff's --change: how many pairs
# it would need to show one this large (`perflab report FILE --change PCT` asks for another).
CHANGE = 0.02

POWER = 0.8


def steady(ok: pd.DataFrame, value: str) -> pd.DataFrame:
    """The ok runs less the stalled ones (over STALLED times their side's median), which the
    means of logs behind B/A's interval and its variance components cannot absorb."""
    median = ok.groupby("side")[value].transform("median")
    return ok[ok[value] <= STALLED * median]


def half_width(ratio: float, low: float, high: float) -> float:
    """How far B/A's interval reaches from its estimate, on the ratio scale (0.01: 1 %)."""
    return max(high / ratio - 1, 1 - low / ratio)


def interval(
    ok: pd.DataFrame, value: str, confidence: float = CONFIDENCE
) -> tuple[float, float, float]:
    """B/A over the setups: the geometric mean of the setups' B/A (each the median of its A/B
    pairs' ratios, levels.layout_medians; TRIM of each end cut) with Yuen's t interval over the
    setups (at TRIM 0, Student's), the one the plan predicts; where setups share code
    placements (--per-placement), over the placements' means of their setups' B/A. Each setup's
    B/A carries its pairs' noise once: drawing the pairs again as well counts it twice. With
    one setup, the interval is its pairs' median's, from order statistics: an interval of that
    layout."""
    d = levels.pair_log_ratios(ok, value, "setup")
    per = levels.layout_medians(d)
    placed = by_placement(ok, per)
    if placed is not None:  # setups share code placements: those are the independent draws
        per = placed
    if len(per) >= 2:
        centre, lo, hi = trimmed_interval(per["log_ratio"], confidence, TRIM)
        return math.exp(centre), math.exp(lo), math.exp(hi)
    centre, lo, hi = stats.median_order_interval(d, confidence)
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise PerflabError(
            f"one setup of {d.size} pairs: a median's interval at {confidence:.0%} needs "
            f"{fewest_pairs(confidence)}"
        )
    return math.exp(centre), math.exp(lo), math.exp(hi)


def by_placement(ok: pd.DataFrame, per: pd.DataFrame) -> pd.DataFrame | None:
    """The setups' log B/A (layout_medians) averaged within each code placement, with how many
    setups each holds; None where no two setups share one (each setup its own placement, or a
    result from before placements were recorded) or fewer than two placements hold a setup."""
    if "placement" not in ok or len(per) < 2:
        return None
    placement = ok.groupby("setup")["placement"].first().reindex(per.index)
    if placement.nunique() == len(per) or placement.nunique() < 2:
        return None
    by = per["log_ratio"].groupby(placement.to_numpy())
    return pd.DataFrame({"log_ratio": by.mean(), "setups": by.size()})


def covered(ok: pd.DataFrame) -> tuple[str, ...]:
    """The levels interval() covers: code placements where setups share them, setups and
    runs, or with one setup its runs alone, and the iterations within the runs where they ran
    several of the repeat loop."""
    looped = ("iteration",) if "iterations" in ok and (ok["iterations"] >= 2).any() else ()
    shared = "placement" in ok and ok["placement"].nunique() < ok["setup"].nunique()
    levels_ = ("setup", "run") if ok["setup"].nunique() >= 2 else ("run",)
    return (*(("code placement",) if shared else ()), *levels_, *looped)


def pair_interval(d: pd.Series, confidence: float) -> tuple[float, float, float]:
    """A setup's B/A, the median of its A/B pairs' ratios (d: their logs), with the
    distribution-free interval of that median (order statistics: the sign test's); (ratio,
    nan, nan) where the pairs are too few for one at this confidence (4 at 95 %: all four one
    way happen 1 time in 8). A bootstrap of so few reads narrower than any test of them can."""
    if d.empty:
        return math.nan, math.nan, math.nan
    centre, lo, hi = stats.median_order_interval(d, confidence)
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return math.exp(centre), math.nan, math.nan
    return math.exp(centre), math.exp(lo), math.exp(hi)


# A setup's verdict where its pairs are too few for an interval of its own (pair_interval).
TOO_FEW = "too few pairs"


def _verdict(lo: float, hi: float) -> str:
    """Which way a setup's interval points: beyond 1, holding it, or none to point."""
    if lo > 1:
        return "B slower"
    if hi < 1:
        return "B faster"
    return "unclear" if math.isfinite(lo) else TOO_FEW


def per_setup(df: pd.DataFrame, value: str | None = None, confidence: float = 0.95) -> pd.DataFrame:
    """Each setup's B/A, the median of its A/B pairs' ratios, with its interval (pair_interval)
    and which way it points: unclear where the interval holds 1, TOO_FEW without one. Of the
    steady runs, as overall()'s: a run stalled 10x its side's median is no layout's doing."""
    value = value or value_column(df)
    ok = steady(df[df["status"] == "ok"], value)
    layout = [c for c in LAYOUT[1:] if c in ok]  # a file from before a dimension lacks it
    none = pd.Series(dtype=float)
    pairs = (
        dict(iter(levels.pair_log_ratios(ok, value, "setup").groupby(level=0)))
        if {"A", "B"} <= set(ok["side"])
        else {}  # a side with no ok run anywhere: no setup is in the table
    )
    rows = []
    for (setup, size), g in ok.groupby(["setup", "env_size"], sort=True):
        a, b = g.loc[g["side"] == "A", value], g.loc[g["side"] == "B", value]
        if a.empty or b.empty:
            continue
        d = pairs.get(setup, none)
        ratio, lo, hi = pair_interval(d, confidence)  # no pair of both sides: nan, TOO_FEW
        first = g.iloc[0]
        rows.append(
            {
                "setup": int(setup),
                "env_size": int(size),
                **{c: first[c].item() if hasattr(first[c], "item") else first[c] for c in layout},
                "n_a": len(a),
                "n_b": len(b),
                "pairs": int(d.size),
                "median_a": float(a.median()),
                "median_b": float(b.median()),
                "ratio": ratio,
                "ci_low": lo,
                "ci_high": hi,
                "verdict": _verdict(lo, hi),
            }
        )
    return pd.DataFrame(rows)


def overall(
    df: pd.DataFrame,
    setups: pd.DataFrame,
    value: str | None = None,
    confidence: float = CONFIDENCE,
    change: float = CHANGE,
) -> dict:
    """B/A over all setups (the geometric mean of the setups' B/A of pairs) with Student's t
    interval over the setups, whose B/A each carry their pairs' noise: an interval about
    random layouts, not just these ones; and the variance of B/A by level."""
    value = value or value_column(df)
    if setups.empty:
        raise PerflabError("no setup has ok runs of both A and B: nothing to compare")
    ok = df[(df["status"] == "ok") & df["setup"].isin(setups["setup"])]
    stalled = len(ok)
    ok = steady(ok, value)
    stalled -= len(ok)
    setups = setups[setups["pairs"] > 0]  # a setup without an A/B pair has no B/A to average
    if setups.empty:
        raise PerflabError("no setup holds a pair of ok A and B runs: nothing to compare")
    try:
        ratio, lo, hi = interval(ok, value, confidence)
        covers = covered(ok)
    except PerflabError:  # one setup of too few pairs: B/A without an interval
        ratio = float(setups["ratio"].iloc[0])
        lo, hi, covers = math.nan, math.nan, ()
    try:
        parts: levels.Components | None = levels.paired_ratio_components(ok, value, trim=TRIM)
    except PerflabError:
        parts = None  # one setup, or one pair in every setup: no split by level
    counts = setups["verdict"].value_counts()
    slower, faster = int(counts.get("B slower", 0)), int(counts.get("B faster", 0))
    family, sure = _family_verdicts(ok, setups, value, confidence)
    split = _split(ok, value, ratio, parts, confidence, change)
    states = steady_states(ok) if value == "ticks" else None
    conclusion = _conclusion(
        ratio,
        lo,
        hi,
        sure["B slower"],
        sure["B faster"],
        len(setups),
        _over(results.metadata(df), len(setups), covers),
        family,
        split,
    )
    return {
        "ratio": ratio,
        "ci_low": lo,
        "ci_high": hi,
        "confidence": confidence,
        "covers": list(covers),
        "half_width": half_width(ratio, lo, hi),
        "stalled": stalled,
        "setups": len(setups),
        "b_slower": slower,
        "b_faster": faster,
        "unclear": int(counts.get("unclear", 0)),
        "too_few_pairs": int(counts.get(TOO_FEW, 0)),
        "min_ratio": float(setups["ratio"].min()),
        "max_ratio": float(setups["ratio"].max()),
        "depends_on_setup": bool(sure["B slower"] and sure["B faster"]) or split is not None,
        "layouts_each_way": split,
        "family_confidence": family,
        "components": _shares(parts, setups, ok if "iteration" in covers else None)
        | _placement_shares(ok, value, parts, setups)
        if parts is not None
        else None,
        "pair_variance": parts.variances[1] if parts is not None else math.nan,
        "steady_state": states,
        "inconclusive": bool(states and states["no steady state"]),
        "conclusion": _unsettled(states, conclusion) if states else conclusion,
    }


def steady_states(ok: pd.DataFrame) -> dict[str, Any] | None:
    """Where each run's iterations were classified (spawn.STEADY_COLUMNS): the runs of each
    class, and the runs and iterations set aside as warm-up; None where they were not."""
    if "steady_state" not in ok:
        return None
    classes = ok["steady_state"].astype(str)
    counts: dict[str, int] = {c: int((classes == c).sum()) for c in RUN_CLASSES}
    warm = ok["warmup"] > 0
    return {**counts, "runs": len(ok), "classified": len(ok) - counts["unclassified"],
            "warmup_runs": int(warm.sum()), "warmup_iterations": int(ok["warmup"].sum()),
            "iterations": int(ok["iterations"].sum())}  # fmt: skip


def _unsettled(states: dict[str, Any], conclusion: str) -> str:
    """The conclusion, or that there is none where runs reached no steady state: their
    iterations' median is a value of no state the program stays in, and so is B/A over it."""
    n = states["no steady state"]
    if not n:
        return conclusion
    return (
        f"inconclusive: {n} of {states['classified']} runs reached no steady state within their "
        f"iterations (Barrett et al.'s classes), so there is no steady state to compare "
        f"(what the runs' medians read: {conclusion})"
    )


# The share of random layouts that must move B/A past the change of interest each way before
# the conclusion is said to depend on the layout: one layout in ten or more would have shown
# B slower by that much, and one in ten B faster by that much.
EACH_WAY = 0.1


def _split(
    ok: pd.DataFrame,
    value: str,
    ratio: float,
    parts: levels.Components | None,
    confidence: float,
    change: float,
) -> dict[str, float] | None:
    """Where layouts of few pairs cannot be decided one by one (4 pairs never are), whether
    they differ as a whole and point both ways: Kruskal and Wallis's test that the layouts'
    pairs come from one distribution, at confidence, and, from the layouts' own variance
    component (their log B/A normal about the overall one), the share of random layouts that
    make B slower by more than `change` and faster by more than it, each at least EACH_WAY.
    The change keeps a layout effect too small to matter from being called a flip: 12 layouts
    at B/A 1.000 but for one at 1.006 and one at 0.996 differ, and say so at 20 pairs each."""
    if parts is None or not parts.variances[0] > 0 or not ratio > 0:
        return None
    try:
        p = levels.layouts_differ(levels.pair_log_ratios(ok, value, "setup"))
    except PerflabError:
        return None
    sd, centre, bound = math.sqrt(parts.variances[0]), math.log(ratio), math.log1p(change)
    slower = 1 - NormalDist(centre, sd).cdf(bound)
    faster = NormalDist(centre, sd).cdf(-bound)
    if p >= 1 - confidence or min(slower, faster) < EACH_WAY:
        return None
    return {"slower": slower, "faster": faster, "p": p, "change": change}


def _family_verdicts(
    ok: pd.DataFrame, setups: pd.DataFrame, value: str, confidence: float
) -> tuple[float, dict[str, int]]:
    """The setups whose B/A is beyond doubt at confidence over them all (Bonferroni: each at
    1 - (1 - confidence) / n), by direction. Twelve setups of byte-identical programs at 95 %
    each show one "slower" and one "faster" often enough to call the layout decisive when
    nothing differs. A setup is beyond doubt only where its pairs could be: its pairs'
    median's interval at that confidence (pair_interval), which n pairs cannot give below
    2 / 2^n (a bootstrap of 4 runs a side read 7 of 200 setups of identical programs "beyond
    doubt" at 1 - 0.05/200: a new user's trial)."""
    decided = setups[setups["verdict"].isin(("B slower", "B faster"))]
    n = max(int(setups["ci_low"].notna().sum()), 1)
    each = 1 - (1 - confidence) / n
    sure = {"B slower": 0, "B faster": 0}
    for _, row in decided.iterrows():
        d = levels.pair_log_ratios(ok[ok["setup"] == row["setup"]], value, "setup")
        _, lo, hi = pair_interval(d, each)
        if lo > 1 or hi < 1:
            sure["B slower" if lo > 1 else "B faster"] += 1
    return each, sure


def _shares(
    parts: levels.Components, setups: pd.DataFrame, looped: pd.DataFrame | None = None
) -> dict[str, float]:
    """What share of the variance of a setup's B/A its layout holds, and its pairs (with the
    iterations within their runs, where there were several: their own share where runs ran
    two counts of them, else `within`, the iterations a run of `looped` ran), at the median
    number of pairs the setups ran."""
    pairs = float(np.median(setups["pairs"]))
    factor = float(np.mean([levels.median_factor(max(int(n), 1)) for n in setups["pairs"]]))
    var = parts.variances
    per_run = parts.units[2] / (2 * parts.units[1]) if len(var) > 2 else 1.0
    k = max(round(per_run), 1)
    row = parts.row(k) if len(var) > 2 else var[1]  # a run's value: its iterations' median
    iteration = min(var[2] * levels.median_factor(k), row) * factor if len(var) > 2 else 0.0
    layout, runs = var[0], row * factor - iteration
    total = layout + runs + iteration
    if not total > 0:
        return {"setup": math.nan, "run": math.nan, "pairs": pairs}
    shares = {"setup": layout / total, "run": runs / total, "pairs": pairs}
    if len(var) > 2:
        shares |= {"iteration": iteration / total, "iterations": per_run}
    elif looped is not None:
        shares["within"] = float(looped["iterations"].mean())
    return shares


def _placement_shares(
    ok: pd.DataFrame, value: str, parts: levels.Components, setups: pd.DataFrame
) -> dict[str, float]:
    """Where setups share code placements: the layout's share of the variance split into what
    the code placement explains and what the environment's layouts do. One-way random effects
    over the placements: their means vary by the placement's variance plus the variance of
    setups within one over their number; the placement's part of the layout's variance is that
    excess, at most all of it. Nothing where each setup has its own placement."""
    per = levels.layout_medians(levels.pair_log_ratios(ok, value, "setup"))
    placed = by_placement(ok, per)
    if placed is None or int(placed["setups"].sum()) <= len(placed):
        return {}
    placement = ok.groupby("setup")["placement"].first().reindex(per.index).to_numpy()
    spread = per["log_ratio"] - per["log_ratio"].groupby(placement).transform("mean")
    within = float((spread**2).sum()) / (len(per) - len(placed))
    between = float(placed["log_ratio"].var(ddof=1))
    code = max(between - within / float(placed["setups"].mean()), 0.0)
    share = _shares(parts, setups)["setup"]
    layout = parts.variances[0]
    if not math.isfinite(share):
        return {}
    part = min(code / layout, 1.0) if layout > 0 else 0.0
    return {"code placement": share * part, "environment": share * (1 - part)}


def _conclusion(
    ratio: float,
    lo: float,
    hi: float,
    slower: int,
    faster: int,
    n: int,
    over: str,
    each: float = CONFIDENCE,
    split: dict[str, float] | None = None,
) -> str:
    """The plain-language verdict, the layout-dependence first (that is the paper's point),
    then what the interval is over: what was randomized, and the levels it covers."""
    if split is not None and not (slower and faster):
        return (
            f"the conclusion depends on the layout: the layouts' B/A differ beyond their pairs' "
            f"noise (Kruskal-Wallis p {_p(split['p'])}), and an estimated "
            f"{split['slower']:.0%} of random layouts make B slower by over "
            f"{split['change'] * 100:g}%, {split['faster']:.0%} faster by as much (the 'wrong "
            "data' case of Mytkowicz et al.): one layout would have shown either; over all, "
            f"B/A = {ratio:.3f} ({lo:.3f}-{hi:.3f}) {over}"
        )
    if slower and faster:
        return (
            f"the conclusion depends on the layout: B is slower than A in {slower} setups and "
            f"faster in {faster} of {n}, each at {each:.2%} (the 'wrong data' case of "
            "Mytkowicz et al.): "
            f"one layout would have shown either; over all, B/A = {ratio:.3f} "
            f"({lo:.3f}-{hi:.3f}) {over}"
        )
    if math.isnan(lo):
        return f"B/A = {ratio:.3f} {over}: too few pairs for an interval"
    if lo > 1:
        return f"B is slower than A: B/A = {ratio:.3f} ({lo:.3f}-{hi:.3f}) {over}"
    if hi < 1:
        return f"B is faster than A: B/A = {ratio:.3f} ({lo:.3f}-{hi:.3f}) {over}"
    return (
        f"no difference shown: B/A = {ratio:.3f}, its interval {lo:.3f}-{hi:.3f} contains 1, {over}"
    )


def _p(p: float) -> str:
    """'= 0.003', or '< 1e-16' where a float's p-value is only rounding."""
    return f"= {p:.1g}" if p >= 1e-16 else "< 1e-16"


def _over(meta: dict[str, Any], n: int, covers: Sequence[str]) -> str:
    """'over 12 setups randomizing env-size, heap-offset (interval over setups and runs)'."""
    varied = f"fixed layout {meta['layout']}" if meta.get("layout") else (
        "randomizing " + ", ".join(meta.get("randomize") or ()) if meta.get("randomize")
        else "one fixed layout"
    )  # fmt: skip
    covered = f" (the interval covers: {' and '.join(covers)})" if covers else ""
    trimmed = f" ({TRIM:.0%} of them cut at each end)" if TRIM and n >= 1 / TRIM else ""
    return f"over {n} setup{'s' if n != 1 else ''}{trimmed}, {varied}{covered}"


def fewest_pairs(confidence: float) -> int:
    """The fewest pairs whose median can have an interval at this confidence: all n one way
    happen 2 / 2^n of the time by chance."""
    return math.ceil(math.log2(2 / (1 - confidence)) - 1e-9)


def pairs_needed(pair_variance: float, change: float, confidence: float = 0.95) -> int:
    """Pairs a setup would need for its interval (pair_interval) to exclude 1 with probability
    POWER when B is `change` slower, from the variance of one pair's log B/A: the normal
    approximation for a median (repetitions.runs_for_spreads, whose per-side spread is half the
    pair's variance), and never fewer than fewest_pairs."""
    spread = np.array([math.sqrt(pair_variance / 2)])
    need = int(repetitions.runs_for_spreads(spread, change, confidence, POWER, "median")[0])
    return max(need, fewest_pairs(confidence))


def shown_change(total: dict, change: float) -> bool:
    """Whether the interval over all setups already lies beyond a `change` either way: then
    no setup needs more pairs to show that much."""
    return total["ci_low"] > 1 + change or total["ci_high"] < 1 / (1 + change)
