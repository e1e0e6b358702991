"""What a comparison's summary says: its lines, its table of setups and its figure."""

from __future__ import annotations

import math
import os
from typing import TYPE_CHECKING, Any

import numpy as np

from perflab.analysis import levels, repetitions
from perflab.analysis.steady import RUN_CLASSES
from perflab.analysis.summary import Summary, Table
from perflab.analysis.warmup import MIN_ITERATIONS
from perflab.core import constants
from perflab.core.lazy import pd
from perflab.errors import PerflabError
from perflab.lab.compare import metrics
from perflab.lab.compare.layouts import LAYOUT, NO_PADDING
from perflab.lab.compare.plan import parse_layout
from perflab.lab.compare.precision import MIN_PAIRS
from perflab.lab.compare.verdict import (
    CHANGE,
    POWER,
    STALLED,
    TOO_FEW,
    TRIM,
    fewest_pairs,
    overall,
    pairs_needed,
    per_setup,
    shown_change,
    steady,
)
from perflab.plan.metrics import METRICS
from perflab.running import childruns, lanes
from perflab.running.childruns import value_column
from perflab.store import results

if TYPE_CHECKING:
    from matplotlib.figure import Figure


SHOWN_SETUPS = 30  # setups a printed summary lists

LABELLED_SETUPS = 40  # setups a figure names one by one; more are drawn ranked by B/A


def _undecided_line(setups: pd.DataFrame, total: dict, change: float) -> list[str]:
    """How many pairs the setups without a verdict would need to show a `change` (from the
    pairs' spread this comparison measured), or that they had enough; nothing where the
    setups together have shown more than that change already."""
    open_ = setups[setups["verdict"].isin(("unclear", TOO_FEW))]
    if open_.empty or not total["pair_variance"] > 0 or shown_change(total, change):
        return []
    need = pairs_needed(total["pair_variance"], change)
    have = int(open_["pairs"].median())
    what = f"a {change * 100:g}% change"
    strength = f"{POWER:.0%} power, from the spread of this comparison's pairs"
    if need > have:
        return [
            f"{len(open_)} setups without a verdict would each need about {need:,} pairs to show "
            f"{what} ({strength}; they have {have:,})"
        ]
    return [
        f"the {len(open_)} setups without a verdict had pairs enough to show {what} "
        f"({strength}): a layout's effect there is likely smaller"
    ]


def _per_setup_line(per: pd.DataFrame, total: dict, confidence: float = 0.95) -> str:
    """The setups one by one, and where some cannot decide alone what they read as a group
    (how many put B/A above 1 and below), which the interval over them all weighs together."""
    n, few = total["setups"], total["too_few_pairs"]
    head = (
        f"per setup: B/A, the median of its pairs' ratios, from {total['min_ratio']:.3f} to "
        f"{total['max_ratio']:.3f}; "
    )
    if few:
        have = per.loc[per["verdict"] == TOO_FEW, "pairs"]
        least, most = int(have.min()), int(have.max())
        pairs = f"{least}-{most}" if least != most else f"{most}"
        why = (
            f"{pairs} pair{'s' * (most != 1)} each, where an interval of its own at "
            f"{confidence:.0%} needs {fewest_pairs(confidence)}"
        )
    if few == n:
        head += f"no setup can decide alone ({why})"
    else:
        head += (
            f"B slower in {total['b_slower']}, faster in {total['b_faster']}, unclear in "
            f"{total['unclear']}" + (f", too few pairs in {few} ({why})" if few else "")
            + f" of {n}"
        )  # fmt: skip
    head += _pairless(per)
    if not (few or total["unclear"]):
        return head
    ratios = per.loc[per["pairs"] > 0, "ratio"]
    above, below = int((ratios > 1).sum()), int((ratios < 1).sum())
    counted = f"all {len(ratios)}" if len(ratios) in (above, below) else ""
    if counted:
        group = f"{counted} read B/A {'above' if above else 'below'} 1"
    else:
        group = f"B/A reads above 1 in {above} of {len(ratios)} and below in {below}"
    weighs = "weighs them together" if math.isfinite(total["ci_low"]) else "needs more pairs"
    return f"{head}; as a group {group}, and the interval over them all {weighs}:"


def _pairless(setups: pd.DataFrame) -> str:
    """'; 1 more setup without a pair of ok runs (left out)', or nothing."""
    n = int((setups["pairs"] == 0).sum())
    return f"; {n} more setup{'s' if n != 1 else ''} without a pair of ok runs (left out)" * bool(n)


def _components_line(shares: dict[str, float] | None) -> list[str]:
    """What share of B/A's variance the layout holds, the rest being the runs' own (and their
    iterations', where they ran several)."""
    if not shares or any(math.isnan(v) for v in shares.values()):
        return []
    pairs = shares["pairs"]
    at = f"at {pairs:g} pair{'' if pairs == 1 else 's'} a setup"
    runs = f"its runs {shares['run']:.0%}"
    if "iteration" in shares:
        runs += f", the iterations within them {shares['iteration']:.0%}"
        at += f" and {shares['iterations']:.3g} iterations a run"
    elif "within" in shares:
        runs += (f" with their {shares['within']:.3g} iterations each (runs of one count of "
                 "iterations cannot tell the two apart)")  # fmt: skip
    layout = f"the layout explains {shares['setup']:.0%}"
    if "code placement" in shares and shares["setup"] > 0:
        layout += (f" (its code placement {shares['code placement']:.0%}, the environment's "
                   f"layout {shares['environment']:.0%})")  # fmt: skip
    return [
        f"{layout} of the variance of a setup's B/A here, "
        f"{runs} (variance components of a setup's median of its pairs' log B/A, {at})"
    ]


def _single_pairs(setups: pd.DataFrame) -> list[str]:
    """Setups whose B/A is one A/B pair: one run disturbed (a neighbour's burst) is then that
    setup's B/A, where a median of four pairs or more outvotes it."""
    if setups.empty or not (setups["pairs"] == 1).any():
        return []
    n = int((setups["pairs"] == 1).sum())
    which = "every setup has" if n == len(setups) else f"{n} of {len(setups)} setups have"
    return [
        f"note: {which} one A/B pair: one disturbed run decides such a setup's B/A "
        f"(--repeat {MIN_PAIRS} or more lets a median of pairs outvote it)"
    ]


def _failed_by_side(frame: pd.DataFrame) -> list[str]:
    """Which side's runs failed, and how: the pooled status cannot tell a B that fails one run
    in five from both failing now and then. Its pairs drop out of the layouts' medians."""
    bad = frame[frame["status"] != "ok"]
    if bad.empty:
        return []
    sides = []
    for side in ("A", "B"):
        mine = frame["side"] == side
        how = bad.loc[bad["side"] == side, "status"].astype(str).value_counts()
        what = ", ".join(f"{n} {s}" for s, n in how.items())
        sides.append(f"{side} {int(how.sum())} of {int(mine.sum())}"
                     + (f" ({what})" if what else ""))  # fmt: skip
    return [f"runs not ok: {'; '.join(sides)}; a pair missing a run drops out of its layout"]


def _loopless(frame: pd.DataFrame, meta: dict[str, Any]) -> list[str]:
    """Iterations asked of programs whose ok runs never sent more than one probe record."""
    asked = int(meta.get("iterations") or 1)
    ok = frame[frame["status"] == "ok"]
    if asked < 2 or "iterations" not in ok or ok.empty or ok["iterations"].max() >= 2:
        return []
    return [
        f"note: {asked} iterations a run were asked, and the programs sent at most one probe "
        "record a run: without the probe's repeat loop (PERFLAB_PROBE_LOOP) iterations are no "
        "level here"
    ]


def _steady_line(states: dict[str, Any] | None) -> list[str]:
    """What the classification of each run's iterations found and set aside (with
    --iterations 20 or more), or why it could not classify them."""
    if not states:
        return []
    if not states["classified"]:
        return [
            f"steady state: no run sent {MIN_ITERATIONS} iterations or more, which "
            "classifying its warm-up needs: every run's median is of all its iterations"
        ]
    found = ", ".join(f"{states[c]} {c}" for c in RUN_CLASSES[1:4] if states[c])
    dropped, runs = states["warmup_iterations"], states["warmup_runs"]
    line = (
        f"steady state (each run's iterations classified as Barrett et al. do): "
        f"{found or 'none'} of {states['classified']} runs; "
        f"{_counted(dropped, 'warm-up iteration')} of {_counted(runs, 'run')} set aside "
        f"({dropped / max(states['iterations'], 1):.1%} of {states['iterations']:,}): B/A is "
        "of the steady iterations"
    )
    if states["no steady state"]:
        line += f"; no steady state in {_counted(states['no steady state'], 'run')}"
    return [line]


def _counted(n: int, thing: str) -> str:
    """A count in words, singular for one: "1 round", "2 rounds"."""
    return f"{n} {thing}" + "s" * (n != 1)


def _predicted(record: dict) -> str:
    """The time the pilot's plan predicted, with the range its variance estimate leaves."""
    predicted = record.get("predicted_s", math.nan)
    if not math.isfinite(predicted):
        return ""
    lo, hi = record.get("predicted_range_s", [math.nan, math.nan])
    ranged = (
        f", {lo:.1f}-{hi:.1f} s at {record['predicted_confidence']:.0%} from the variance of "
        f"{record['predicted_from_layouts']} layouts"
        if math.isfinite(lo) and math.isfinite(hi)
        else ""
    )
    return f" (the plan made after the pilot predicted {predicted:.1f} s{ranged})"


def _precision_lines(frame: pd.DataFrame, record: dict | None, value: str) -> list[str]:
    """What --precision asked, reached, took and predicted, against a fixed 10 x 10 design."""
    if not record:
        return []
    target, took = record["target"], record["seconds"]
    rounds = record["rounds"]
    head = (
        f"precision: ±{target * 100:.3g}% asked; "
        + (f"reached in {_counted(len(rounds), 'round')}" if record["reached"]
           else f"not reached ({record['stopped']}) after {_counted(len(rounds), 'round')}")
        + f", {took:.1f} s"
        + _predicted(record)
    )  # fmt: skip
    out = [head]
    ok = steady(frame[frame["status"] == "ok"], value)
    costs = record["costs_s"]
    try:
        parts = levels.paired_ratio_components(ok, value, trim=TRIM)
        each = [costs["layout"], costs["pair"], costs.get("iteration", 0.0)]
        looped = len(parts.levels) > 2
        pilot = int(rounds[0].get("iterations", 1)) if rounds else 1
        fixed = repetitions.predict(parts, each[: len(parts.levels)], (10, 10, pilot)[: len(each)]
                                    if looped else (10, 10))  # fmt: skip
    except PerflabError:
        return out
    planned = next((r["planned"] for r in reversed(rounds) if r["planned"]), None)
    if planned:
        loop = f" of {_counted(planned[2], 'iteration')}" if len(planned) > 2 else ""
        most = int(record.get("most_iterations") or constants.MAX_ITERATIONS)
        if loop and planned[2] == most < constants.MAX_ITERATIONS:
            loop += " (the most that keep a real-time run inside the kernel's runtime)"
        priced = f", {costs['iteration'] * 1e3:.3g} ms an iteration of both" if looped else ""
        out.append(f"plan: {planned[0]} layouts of {planned[1]} A/B pairs each{loop} (Kalibera "
                   f"and Jones, from costs of {costs['layout']:.3f} s a layout, "
                   f"{costs['pair']:.3f} s a pair{priced})")  # fmt: skip
    design = f"10 x 10 x {pilot}" if looped else "10 x 10"
    out.append(
        f"a fixed {design} design would take {fixed.time:.1f} s here and reach "
        f"±{fixed.half_width:.1%}"
    )
    return out


def _time_metric(total: dict[str, Any]) -> dict[str, Any]:
    """The time metric's entry in `metrics`: what `overall` holds, in the metrics' keys."""
    keys = ("ratio", "ci_low", "ci_high", "setups", "conclusion")
    return {"metric": "time", "unit": METRICS["time"].unit, "exact": False,
            **{k: total[k] for k in keys}}  # fmt: skip


def _intervals(per: pd.DataFrame) -> list[str]:
    """Each setup's interval as text, or why it has none: never a bare nan."""
    return [
        f"{lo:.3f}-{hi:.3f}" if math.isfinite(lo) else f"none: {n} pair{'s' * (n != 1)}"
        for lo, hi, n in zip(per["ci_low"], per["ci_high"], per["pairs"], strict=True)
    ]


def summary(frame: pd.DataFrame, meta: dict[str, Any]) -> Summary:
    """A and B, B/A per setup with its interval and verdict, and over all setups."""
    value = value_column(frame)
    per = per_setup(frame, value)
    counts = childruns.status_counts(frame)
    randomize = meta.get("randomize", [])
    lines = [f"A: {meta.get('a')}", f"B: {meta.get('b')}"]
    if meta.get("identical"):
        lines.append("note: A and B are byte-identical programs run with the same arguments")
    fixed = f"fixed layout: {meta['layout']}" if meta.get("layout") else ""
    lines.append(f"{len(frame)} runs, status {counts}; "
                 f"{fixed or 'randomized: ' + ', '.join(randomize)}")  # fmt: skip
    lines += _loopless(frame, meta) + _failed_by_side(frame) + _single_pairs(per)
    values: dict[str, Any] = {
        "a": meta.get("a"),
        "b": meta.get("b"),
        "randomize": randomize,
        "value": value,
        "runs": len(frame),
        "status": counts,
        "identical": meta.get("identical"),
        "interference": meta.get("interference"),
        "iterations": int(meta.get("iterations") or 1),
        "precision": meta.get("precision"),
    }
    if per.empty:
        lines.append("no setup has ok runs of both A and B: nothing to compare")
        return Summary(lines, [Table("setups", "setups", per)], values)
    total = overall(frame, per, value, change=float(meta.get("change") or CHANGE))
    lines += [
        _per_setup_line(per, total),
        total["conclusion"],
        *(
            [
                f"{total['stalled']} runs set aside as stalled (over {STALLED:.0f}x their side's "
                "median): the interval and the variance by level are of the others"
            ]
            if total["stalled"]
            else []
        ),
        *_steady_line(total.get("steady_state")),
        *_components_line(total["components"]),
        *_undecided_line(per, total, float(meta.get("change") or CHANGE)),
        *_precision_lines(frame, meta.get("precision"), value),
        *lanes.describe(meta.get("interference", {})),
    ]
    values["overall"] = total
    asked = list(meta.get("metrics") or ["time"])
    values["metrics"] = {m: _time_metric(total) if m == "time" else metrics.decide(
        frame, m, change=float(meta.get("change") or CHANGE)) for m in asked}  # fmt: skip
    if asked != ["time"]:
        lines += ["by metric, each decided alone:",
                  *(f"  {'time: ' * (m == 'time')}{d['conclusion']}"
                    for m, d in values["metrics"].items())]  # fmt: skip
    varied = set(randomize) | set(parse_layout(meta["layout"]) if meta.get("layout") else ())
    layout = ["env_size", "link_order",
              *(c for c in LAYOUT[2:] if c in per and c.replace("_", "-") in varied)]  # fmt: skip
    cols = ["setup", *layout, "median_a", "median_b", "ratio", "interval", "verdict"]
    shown = per.assign(interval=_intervals(per))[cols].astype(
        {"median_a": "int64", "median_b": "int64"}
    )
    title = f"B/A of {value} per setup: the median of its A/B pairs' ratios"
    if len(shown) > SHOWN_SETUPS:  # a --precision run may hold thousands: the file has them all
        shown = shown.head(SHOWN_SETUPS)
        title += f"; the first {SHOWN_SETUPS} of {len(per)}, every one in the saved result"
    sizes = [c for c in layout if c != "link_order"]
    if (shown[sizes] == NO_PADDING).any(axis=None):  # a dimension this layout left out
        title += f" ({NO_PADDING}: no padding)"
    table = Table("setups", title, per, "{:,.3f}", shown)
    return Summary(lines, [table], values, lambda p: plot(frame, p, per, total))


def plot(
    df: pd.DataFrame,
    path: str | os.PathLike[str] | None,
    setups: pd.DataFrame,
    summary: dict[str, Any],
) -> Figure:
    """B/A per setup with its CI (red: B slower, blue: B faster), and the overall band."""
    from perflab.analysis import plot as plt

    many = len(setups) > LABELLED_SETUPS  # a --precision run's hundreds: ranked, unlabelled
    if many:
        setups = setups.sort_values("ratio", kind="stable").reset_index(drop=True)
    fig, ax = plt.figure(figsize=(min(max(7, 0.35 * len(setups) + 3), 14), 5))
    colour = {"B slower": plt.COLORS[0], "B faster": plt.COLORS[1], "unclear": "#888888",
              TOO_FEW: "#888888"}  # fmt: skip
    x = np.arange(len(setups))
    for verdict, g in setups.groupby("verdict"):
        idx = x[setups["verdict"].to_numpy() == verdict]
        r, lo, hi = (g[c].to_numpy(float) for c in ("ratio", "ci_low", "ci_high"))
        ax.errorbar(idx, r, yerr=[r - lo, hi - r], fmt="o", color=colour[verdict],
                    capsize=0 if many else 3, ms=2 if many else 6, lw=0.6 if many else 1.5,
                    label=verdict)  # fmt: skip
    ax.axhline(1.0, color="black", lw=0.8, ls="--")
    ax.axhspan(summary["ci_low"], summary["ci_high"], color=plt.COLORS[2], alpha=0.2, lw=0,
               label=f"over all setups {summary['ratio']:.3f}")  # fmt: skip
    if many:
        ax.set_xlabel(f"{len(setups)} setups, in order of their B/A (each one's layout: the table)")
    else:
        ticks = ["\n".join(_layout_words(r)) or str(r["setup"]) for _, r in setups.iterrows()]
        ax.set_xticks(x, ticks, rotation=90, fontsize=7)
        ax.set_xlabel("setup")
    ax.set_ylabel("B / A (median of its pairs)")
    below = -0.15 if many else -0.3  # under the axis label, or under the layouts' names
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, below), ncol=4, fontsize=8)
    meta = results.metadata(df)
    title = "B/A over random setups" + (
        ": depends on the layout" if summary["depends_on_setup"] else ""
    )
    title += f" ({', '.join(meta.get('randomize', [])) or 'fixed setup'})"
    return plt.save(fig, path, title=title)


def _layout_words(row: pd.Series) -> list[str]:
    """A setup's layout in short words for a figure's axis: what it set, nothing else."""
    words = [f"env {row['env_size']}" if row["env_size"] >= 0 else "", row.get("link_order", "")]
    for column, word in (
        ("heap_offset", "heap"),
        ("code_offset", "code"),
        ("function_order", "functions"),
    ):
        if row.get(column, NO_PADDING) >= 0:
            words.append(f"{word} {row[column]}")
    return [w for w in words if w]
