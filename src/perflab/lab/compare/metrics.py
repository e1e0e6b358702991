"""How a comparison decides on a metric besides time (the table of them: plan/metrics.py): each
is read from the columns every child run records and gets its own B/A, interval and verdict by
the same rules as time (verdict.py); a metric whose runs repeat to the unit in every layout has
an interval of zero width, so its B/A is stated exactly."""

from __future__ import annotations

import math
from typing import Any

from perflab.core.lazy import pd
from perflab.lab.compare.verdict import CHANGE, CONFIDENCE, overall, per_setup
from perflab.plan.metrics import METRICS, Metric
from perflab.running.childruns import metric_column
from perflab.store import results


def decide(
    frame: pd.DataFrame,
    name: str,
    confidence: float = CONFIDENCE,
    change: float = CHANGE,
) -> dict[str, Any]:
    """One metric's B/A over the setups with its interval, its verdict in its own words, and
    whether it is exact (every run of a side repeats its value in its setup)."""
    metric = METRICS[name]
    if name == "instructions-exact":
        return _decide_counts(metric, results.metadata(frame).get("instructions_exact"), confidence)
    frame, col = metric_column(frame, metric)
    ok = frame[frame["status"] == "ok"]
    if col not in ok or ok[col].isna().all():
        return {"metric": name, "unit": metric.unit, "conclusion": f"{name}: {metric.absent}"}
    ok = ok[ok[col].notna()]
    per = per_setup(ok, col, confidence)
    if per.empty or not (per["pairs"] > 0).any():
        return {"metric": name, "unit": metric.unit,
                "conclusion": f"{name}: no setup holds a pair of A and B runs"}  # fmt: skip
    total = overall(ok, per, col, confidence, change)
    runs = ok.groupby(["setup", "side"])[col]
    exact = bool(((runs.nunique() == 1) & (runs.size() > 1)).all())  # one run repeats nothing
    ratio, lo, hi = total["ratio"], total["ci_low"], total["ci_high"]
    if exact and per["ratio"].nunique() == 1:
        lo = hi = ratio
    return {
        "metric": name,
        "unit": metric.unit,
        "column": col,
        "ratio": ratio,
        "ci_low": lo,
        "ci_high": hi,
        "exact": exact,
        "setups": int(total["setups"]),
        "pairs": int(per["pairs"].sum()),
        "median_a": float(ok.loc[ok["side"] == "A", col].median()),
        "median_b": float(ok.loc[ok["side"] == "B", col].median()),
        "components": total["components"],
        "conclusion": _said(metric, ratio, lo, hi, exact, confidence, int(total["setups"])),
    }


def _decide_counts(metric: Metric, counted: Any, confidence: float) -> dict[str, Any]:
    """instructions-exact from its counts, one per setup and side (compare/exact.py): each
    setup's B/A, their geometric mean, and Student's t over the setups where they differ;
    exact when every setup's B/A is the same and the count made twice repeated. A difference
    no larger than what start-up alone moves a count (a page more of environment, or the
    setups' own spread) is no difference: two copies of a program at paths of other lengths
    differ by an instruction or two of the loader's."""
    import numpy as np

    from perflab.analysis.trimmed import trimmed_interval

    scopes = sorted({str(c.get("scope", "the whole program")) for c in counted or []})
    base = {"metric": metric.name, "unit": metric.unit, "column": metric.column,
            "counted": " and ".join(scopes)}  # fmt: skip
    if not counted:
        return {**base, "conclusion": f"{metric.name}: {metric.absent}"}
    df = pd.DataFrame(counted).reindex(columns=["setup", "side", "instructions", "again", "moved"])
    counts = df.pivot(index="setup", columns="side", values="instructions").astype(float)
    logs = np.log(counts["B"] / counts["A"]).to_numpy()
    again = df["again"].notna()
    repeats = bool((df.loc[again, "again"] == df.loc[again, "instructions"]).all())
    moved = df["moved"].notna()
    startup = int(max([0, *(df.loc[moved, "moved"] - df.loc[moved, "instructions"]).abs(),
                       *(counts.max() - counts.min())]))  # fmt: skip
    same = bool(((counts["B"] - counts["A"]).abs() <= startup).all())
    exact = repeats and np.unique(logs).size == 1
    if exact or logs.size < 2:
        mean = lo = hi = float(logs.mean())
        lo, hi = (lo, hi) if exact else (-math.inf, math.inf)
    else:
        mean, lo, hi = trimmed_interval(logs, confidence)
    ratio = math.exp(mean)
    low, high = (math.exp(v) if math.isfinite(v) else math.nan for v in (lo, hi))
    if same and repeats and (counts["B"] == counts["A"]).all():
        said = f"{metric.name}: B/A 1 exactly (every setup's counts equal): B the same"
    elif same and repeats:
        said = (f"{metric.name}: B/A {ratio:.6f}: B the same, within the {startup} instructions "
                "start-up alone moves a count here (more environment, a longer path)")  # fmt: skip
    else:
        why = "its count repeats, and every setup's B/A is the same"
        said = _said(metric, ratio, low, high, exact, confidence, int(logs.size), why)
    if base["counted"] != "the whole program":
        said = said.replace(f"{metric.name}: ", f"{metric.name} ({base['counted']}): ", 1)
    return {
        **base,
        "ratio": ratio,
        "ci_low": low,
        "ci_high": high,
        "exact": exact,
        "repeats": repeats,
        "startup_instructions": startup,
        "same": bool(same and repeats),  # no difference beyond start-up's few instructions
        "setups": int(logs.size),
        "counts": len(df),
        "median_a": float(counts["A"].median()),
        "median_b": float(counts["B"].median()),
        "conclusion": said,
    }


def _said(metric: Metric, ratio: float, lo: float, hi: float, exact: bool, confidence: float,
          setups: int, why: str = "every run repeats its value") -> str:  # fmt: skip
    """The metric's verdict in one line, in its own words."""
    if exact and lo == hi:
        way = "the same" if ratio == 1 else metric.more if ratio > 1 else metric.less
        return f"{metric.name}: B/A {ratio:.6f} exactly ({why}, in {setups} setups): B {way}"
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return f"{metric.name}: B/A {ratio:.3f}, too few setups for an interval"
    digits = 6 if hi - lo < 1e-3 else 3  # a count's B/A moves in the loader's few instructions
    span = (f"B/A {ratio:.{digits}f} ({confidence:.0%} interval {lo:.{digits}f}-{hi:.{digits}f}, "
            f"{setups} setups)")  # fmt: skip
    if lo > 1:
        return f"{metric.name}: {span}: B {metric.more}"
    if hi < 1:
        return f"{metric.name}: {span}: B {metric.less}"
    return f"{metric.name}: {span}: no difference shown"
