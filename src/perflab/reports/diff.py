"""What changed between two results of one experiment: per parameter point the ratio of medians
(after/before) with an interval that holds for all points together, so a sweep of 8 193 env
sizes does not raise 400 false alarms; different conditions are named."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from perflab import errors
from perflab.analysis import repetitions, stats
from perflab.core.lazy import pd
from perflab.errors import PerflabError
from perflab.lab import registry
from perflab.plan import metrics
from perflab.plan.controls import typed_arguments
from perflab.reports import report

if TYPE_CHECKING:
    from matplotlib.figure import Figure


CHANGE = 0.02  # the smallest change of interest unless the user names one (--change)
SPAN = 100  # a numeric parameter from x to SPAN * x or more is drawn on a log axis
MAX_LABELS = 40  # category labels on a diff plot's axis, at most (512 made a black bar)
POWER = 0.8  # how often the runs said to be needed show that change


@dataclass(frozen=True)
class Diff:
    """Two results compared point by point: the table, the verdict, and why to be careful."""

    before: report.Report
    after: report.Report
    table: pd.DataFrame
    params: tuple[str, ...]
    value: str
    confidence: float
    verdict: str
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    change: float = CHANGE  # the change a point without a decision is told the runs to show

    @property
    def flagged(self) -> pd.DataFrame:
        """The points whose interval excludes 1."""
        return self.table[self.table["change"] != ""]

    def plot(self, path: str | os.PathLike | None = None) -> Figure:
        """The ratio along the swept parameter with its interval band, changes marked; the
        Figure is returned (it shows inline in Jupyter) and written to path when one is given."""
        from perflab.analysis import plot as plt

        target = None if path is None else plt.check_plot_path(path)
        t = self.table
        fig, ax = plt.figure(figsize=(10, 5))
        numeric = len(self.params) == 1 and pd.api.types.is_numeric_dtype(t[self.params[0]])
        x = t[self.params[0]].to_numpy() if numeric else np.arange(len(t))
        lo = t["ci_low"].clip(lower=0).replace(np.inf, np.nan)
        hi = t["ci_high"].replace(np.inf, np.nan)
        if numeric:
            ax.fill_between(
                x,
                lo,
                hi,
                color=plt.COLORS[1],
                alpha=0.25,
                lw=0,
                label=f"interval ({self.confidence:.0%} for all points together)",
            )
            ax.plot(x, t["ratio"], color=plt.COLORS[1], lw=0.9, label="after / before")
            ax.set_xlabel(self.params[0])
            if x.size and x.min() > 0 and x.max() >= SPAN * x.min():
                self._log_x(ax)
        else:
            err = [t["ratio"] - lo.fillna(t["ratio"]), hi.fillna(t["ratio"]) - t["ratio"]]
            ax.errorbar(
                x, t["ratio"], yerr=err, fmt="o", color=plt.COLORS[1], label="after / before"
            )
            labels = [" ".join(map(str, r)) for r in t[list(self.params)].itertuples(index=False)]
            every = max(1, math.ceil(len(x) / MAX_LABELS))  # a label each, up to MAX_LABELS
            ax.set_xticks(x[::every], labels[::every], rotation=30, ha="right", fontsize=8)
        hot = t["change"] != ""
        ax.plot(x[hot.to_numpy()], t.loc[hot, "ratio"], "o", color=plt.COLORS[0], label="changed")
        ax.axhline(1.0, color="black", lw=0.6, ls="--")
        ax.set_ylabel(f"ratio of median {self.value} (after / before)")
        ax.legend(fontsize=8)
        names = f"{Path(str(self.after.path)).name} / {Path(str(self.before.path)).name}"
        title = f"{self.before.experiment}: {names}"
        return plt.save(fig, target, title=title)

    def _log_x(self, ax: Any) -> None:
        """A log x axis for a parameter that spans decades (memcpy's sizes: 1 B to a GB), in
        bytes where the parameter is a size."""
        from matplotlib.ticker import FuncFormatter

        from perflab.analysis import plot as plt

        plt.log_axes(ax, x=True, y=False)
        if self.params[0] == "size":
            from perflab.lab.memcpy import human_bytes

            ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: human_bytes(v)))


def _value(experiment: registry.Experiment, df: pd.DataFrame) -> str:
    """The column diff compares: the experiment's, else the frame's own (the probe's ticks, or
    the parent's when the program had no probe)."""
    if experiment.value is not None:
        return experiment.value
    from perflab.running import childruns

    return childruns.value_column(df)


def _metric_column(r: report.Report, metric: str) -> tuple[pd.DataFrame, str]:
    """The result's frame with the metric's column (compare's definition), or one line for a
    result without it."""
    from perflab.running import childruns

    m = metrics.METRICS[metric]
    needed = {"utime_ns", "stime_ns"} if metric == "cpu" else {str(m.column)}
    if not needed <= set(r.frame.columns):
        raise PerflabError(
            f"{r.path}: a {r.experiment} result holds no {' or '.join(sorted(needed))}: "
            f"--metric {metric} compares the runs of a program (env-size, link-order, compare, "
            "threads)"
        )
    return childruns.metric_column(r.frame, m)


def _ok(df: pd.DataFrame, value: str, ok: str) -> pd.DataFrame:
    rows = df[df["status"] == ok] if "status" in df else df
    return rows[np.isfinite(pd.to_numeric(rows[value], errors="coerce").astype(float))]


def conditions_differ(a: dict, b: dict) -> list[str]:
    """One warning per watched condition the two results were measured under differently."""
    out = []
    for key, _, name in report.CONDITIONS:
        va, vb = a.get(key), b.get(key)
        if name is None or va is None or vb is None or va == vb:
            continue
        if key == "tsc_hz" and math.isclose(float(va), float(vb), rel_tol=1e-3):
            continue
        out.append(f"different {name}: {va} before, {vb} after")
    return out


def points_differ(experiment: registry.Experiment, a: dict, b: dict) -> dict[str, tuple]:
    """The run parameters defining what a point measures that the two results recorded with
    different values: name -> (before, after)."""
    pa, pb = a.get("params"), b.get("params")
    if not isinstance(pa, dict) or not isinstance(pb, dict):
        return {}
    return {k: (pa.get(k), pb.get(k)) for k in experiment.defines if pa.get(k) != pb.get(k)}


def conditions_changed(experiment: registry.Experiment, a: dict, b: dict) -> dict[str, tuple]:
    """The run parameters that are conditions of the whole run (memcpy's kernel) the two
    results recorded with different values: name -> (before, after)."""
    pa, pb = a.get("params"), b.get("params")
    if not isinstance(pa, dict) or not isinstance(pb, dict):
        return {}
    return {k: (pa.get(k), pb.get(k)) for k in experiment.conditions if pa.get(k) != pb.get(k)}


def _grid(df: pd.DataFrame, params: tuple[str, ...]) -> set[tuple]:
    return set(map(tuple, df[list(params)].drop_duplicates().to_numpy().tolist()))


def _first(points: set[tuple], n: int = 3) -> str:
    """A few points in order (numbers as numbers), to name what one side lacks."""
    try:
        ordered = sorted(points)
    except TypeError:
        ordered = sorted(points, key=lambda p: tuple(map(str, p)))
    return ", ".join(" ".join(map(str, p)) for p in ordered[:n])


def _check_grids(
    a: pd.DataFrame, b: pd.DataFrame, params: tuple[str, ...], intersect: bool
) -> list[str]:
    """Refuse different parameter grids by name, or (intersect) say what is left out."""
    ga, gb = _grid(a, params), _grid(b, params)
    if ga == gb:
        return []
    only_a, only_b = ga - gb, gb - ga
    what = "/".join(params)
    said = f"{len(only_a)} {what} values only before (e.g. {_first(only_a)})" if only_a else ""
    said_b = f"{len(only_b)} only after (e.g. {_first(only_b)})" if only_b else ""
    detail = "; ".join(x for x in (said, said_b) if x)
    if not ga & gb:
        raise PerflabError(f"different parameter grids, no {what} value in common ({detail})")
    if not intersect:
        raise PerflabError(
            f"different parameter grids: {detail}; --intersect compares the {len(ga & gb)} "
            "values both have"
        )
    return [f"compared the {len(ga & gb)} {what} values both have; {detail}"]


# Resampled values one diff may draw (about a second of numpy); beyond it the bootstrap cannot
# resolve the tail a Bonferroni level asks for, and the order-statistic interval takes over.
BOOT_BUDGET = 100_000_000
MIN_RUNS = 5  # fewer runs a side give no interval worth the name


def boot_count(level: float) -> int:
    """Resamples that put about 20 of them beyond each end of a two-sided interval at level."""
    return max(2000, math.ceil(20 / ((1 - level) / 2)))


def _sorted_groups(df: pd.DataFrame, params: tuple[str, ...], value: str) -> dict:
    """Each point's values, sorted once: medians and order statistics are then lookups."""
    groups = df.groupby(list(params), sort=True)[value]
    return {k: np.sort(v.to_numpy(float)) for k, v in groups}


def _median(x: np.ndarray) -> float:
    """The median of a sorted array."""
    return float((x[(x.size - 1) // 2] + x[x.size // 2]) / 2)


def _order_ratio(
    a: np.ndarray, b: np.ndarray, level: float, steps: tuple[float, float]
) -> tuple[float, float, float]:
    """stats.ratio_order_interval of sorted samples with cached ranks: each median's interval at
    1 - (1 - level)/2."""
    side = 1 - (1 - level) / 2
    xa, xb = a, b
    la, lb = stats.median_rank(xa.size, side), stats.median_rank(xb.size, side)
    ma, mb = _median(xa), _median(xb)
    if ma <= 0:
        raise PerflabError("baseline median is <= 0: a ratio is meaningless")
    if not la or not lb:
        return mb / ma, 0.0, math.inf
    lo = max(xb[lb - 1] - steps[1], 0.0) / (xa[xa.size - la] + steps[0])
    low_a = xa[la - 1] - steps[0]
    return (
        mb / ma,
        float(lo),
        float((xb[xb.size - lb] + steps[1]) / low_a) if low_a > 0 else math.inf,
    )


def _interval(
    a: np.ndarray,
    b: np.ndarray,
    level: float,
    steps: tuple[float, float],
    method: str,
    seed: int,
) -> tuple[float, float, float]:
    """after/before of medians and its interval at this level, by bootstrap or, past the budget,
    by order statistics (distribution-free, widened by one timer step each side since quantised
    ticks put a median up to a step from the true one)."""
    if min(a.size, b.size) < MIN_RUNS:
        ratio = _median(b) / _median(a) if _median(a) else math.nan
        return ratio, 0.0, math.inf
    try:
        if method == "bootstrap":
            return stats.ratio_bootstrap_interval(a, b, level, n_boot=boot_count(level), seed=seed)
        return _order_ratio(a, b, level, steps)
    except PerflabError:  # a baseline median of 0: no ratio
        return math.nan, math.nan, math.nan


def compare_frames(
    before: pd.DataFrame,
    after: pd.DataFrame,
    params: tuple[str, ...],
    value: str,
    confidence: float = 0.95,
    steps: tuple[float, float] = (0.0, 0.0),
    change: float = CHANGE,
    words: tuple[str, str] = ("slower", "faster"),
) -> pd.DataFrame:
    """Per point: runs, medians, after/before with an interval holding for all points together
    (Bonferroni: each at 1 - (1 - confidence)/points), the change where it excludes 1 (words:
    what after is above 1 and below it), and the runs per side that would show a `change` at
    the point's spread (runs_needed).

    The intervals are percentile bootstraps of the ratio of medians while the resamples their
    tails need stay within BOOT_BUDGET; a sweep of thousands of points, whose per-point level
    no affordable bootstrap resolves, gets order-statistic intervals instead (exact, wider)."""
    ga, gb = _sorted_groups(before, params, value), _sorted_groups(after, params, value)
    keys = [k for k in ga if k in gb]
    level = 1 - (1 - confidence) / max(1, len(keys))
    drawn = boot_count(level) * sum(ga[k].size + gb[k].size for k in keys)
    method = "bootstrap" if drawn <= BOOT_BUDGET else "order statistics"
    rows = []
    for i, k in enumerate(keys):
        a, b = ga[k], gb[k]
        ratio, lo, hi = _interval(a, b, level, steps, method, i)
        moved = words[0] if lo > 1 else words[1] if hi < 1 else ""
        key = k if isinstance(k, tuple) else (k,)
        rows.append(
            {**dict(zip(params, key, strict=True)), "n_before": a.size, "n_after": b.size,
             "median_before": _median(a), "median_after": _median(b),
             "ratio": ratio, "ci_low": lo, "ci_high": hi, "change": moved,
             "spread": _spread(a, b)}
        )  # fmt: skip
    cols = [*params, "n_before", "n_after", "median_before", "median_after", "ratio", "ci_low",
            "ci_high", "change", "spread"]  # fmt: skip
    out = pd.DataFrame(rows, columns=cols)
    spread = out.pop("spread").to_numpy(float)
    known = np.isfinite(spread)
    runs = np.zeros(len(out), dtype=np.int64)
    runs[known] = repetitions.runs_for_spreads(spread[known], change, level, POWER, "median")
    out["runs_needed"] = np.where(known, np.maximum(runs, fewest_runs(level, method)), 0)
    out.attrs.update(level=level, confidence=confidence, points=len(keys), method=method,
                     change=change, power=POWER)  # fmt: skip
    return out


def fewest_runs(level: float, method: str) -> int:
    """The fewest runs a side that give a point any interval at this level: MIN_RUNS, and for
    order statistics n with 2^-n <= (1 - side level)/2, the median's interval at the side's."""
    if method == "bootstrap":
        return MIN_RUNS
    tail = (1 - level) / 2  # 1 - the side's level, 1 - (1 - level)/2
    return max(MIN_RUNS, math.ceil(math.log2(2 / tail) - 1e-9))


def _spread(a: np.ndarray, b: np.ndarray) -> float:
    """The robust relative spread of a point's runs, both sides pooled: 1.4826 x the median
    absolute deviation of each value from its side's median, over that median (the spread of
    log values, to first order); nan where a median is not above 0."""
    ma, mb = _median(a), _median(b)
    if ma <= 0 or mb <= 0:
        return math.nan
    return 1.4826 * float(np.median(np.concatenate([np.abs(a - ma) / ma, np.abs(b - mb) / mb])))


def _steps(meta_a: dict, meta_b: dict, value: str, scale: float) -> tuple[float, float]:
    if value not in ("ticks", "outer_ticks"):
        return 0.0, 0.0
    return float(meta_a.get("timer_step_ticks") or 0), float(
        meta_b.get("timer_step_ticks") or 0
    ) * scale


def _pct(x: float) -> str:
    return f"{x * 100:g}%"


def _undecided(t: pd.DataFrame) -> str:
    """What the points without a decision say: how many runs each would need to show the
    change of interest, or that they had enough, so a change there is likely smaller."""
    open_ = t[(t["change"] == "") & (t["runs_needed"] > 0)]
    if open_.empty:
        return ""
    change, power = _pct(t.attrs["change"]), f"{t.attrs['power']:.0%}"
    has = open_[["n_before", "n_after"]].min(axis=1)
    short = open_[open_["runs_needed"] > has]
    parts = []
    if len(short):
        need, now = short["runs_needed"], has[short.index]
        most = f"; up to {need.max():,}" if need.max() > need.median() else ""
        unbounded = int((~np.isfinite(short["ci_high"])).sum())
        few = f", {unbounded} too few for any interval at this many values" if unbounded else ""
        parts.append(
            f"{len(short)} without a decision need about {int(need.median()):,} runs per point "
            f"in each result to show a {change} change ({power} power; they have "
            f"{int(now.median()):,}{few}{most})"
        )
    enough = len(open_) - len(short)
    if enough:
        said = "the other" if parts else "the"
        parts.append(
            f"{said} {enough} without a decision had runs enough to show a {change} change "
            f"({power} power): a change there is likely smaller"
        )
    return "; " + "; ".join(parts)


def _verdict(t: pd.DataFrame, what: str, confidence: float,
             words: tuple[str, str] = ("slower", "faster")) -> str:  # fmt: skip
    """One line: where after is slower or faster (or the metric's words), how sure the whole
    statement is, and the runs the points without a decision would need."""
    n = len(t)
    slower, faster = t[t["change"] == words[0]], t[t["change"] == words[1]]
    sure = f"{confidence:.0%} for all {n} {what} values together, {t.attrs.get('method')} intervals"
    if slower.empty and faster.empty:
        line = f"no change shown at any of {n} {what} values ({sure})"
    else:
        parts = [
            f"{'' if ' ' in label else 'is '}{label} at {len(g)} "
            f"({g['ratio'].min():.3f}-{g['ratio'].max():.3f}x)"
            for label, g in zip(words, (slower, faster), strict=True)
            if len(g)
        ]
        line = f"after {' and '.join(parts)} of {n} {what} values ({sure})"
    return line + _undecided(t)


@typed_arguments
def diff(
    before: str | os.PathLike,
    after: str | os.PathLike,
    confidence: float = 0.95,
    intersect: bool = False,
    force: bool = False,
    change: float = CHANGE,
    metric: str = "time",
) -> Diff:
    """Compare two saved results of one experiment; refuse different experiments or grids, and
    results whose points measure different things (another loop count: force compares them,
    warning first). Every warning is given (errors.warn) and kept in Diff.warnings. Points
    without a decision are told the runs that would show a relative `change` (0.02: 2 %).
    metric: what is compared, as compare's --metric names it (time: the experiment's value;
    cpu, maxrss, instructions and cycles: the child runs' columns)."""
    if not 0 < confidence < 1:
        raise PerflabError(f"confidence must be between 0 and 1, not {confidence}")
    if not 0 < change < 1:
        raise PerflabError(f"the change of interest must be between 0 and 100 %, not {change}")
    (metric,) = metrics.check(metric, "diff")
    ra, rb = report.report(before), report.report(after)
    if ra.experiment != rb.experiment:
        raise PerflabError(
            f"different experiments: {before} is {ra.experiment}, {after} is {rb.experiment}"
        )
    if ra.experiment not in registry.EXPERIMENTS:
        raise PerflabError(f"perflab cannot diff {ra.experiment} results (no parameter points)")
    experiment = registry.get(ra.experiment)
    warned = ra.warnings + rb.warnings  # report() gave them as it read the files
    warnings = []
    differ = points_differ(experiment, ra.meta, rb.meta)
    if differ:
        names = ", ".join(differ)
        detail = ", ".join(f"{k}: {a!r} before, {b!r} after" for k, (a, b) in differ.items())
        if not force:
            raise PerflabError(
                f"{before} and {after} differ in {names} ({detail}), which define what a point "
                "measures: not comparable; --force compares them anyway"
            )
        warnings.append(
            errors.warning("points_differ", before=before, after=after, names=names, detail=detail)
        )
    params = experiment.points
    notes = [
        f"measured with another {k}: {va!r} before, {vb!r} after (the ratios are its effect)"
        for k, (va, vb) in conditions_changed(experiment, ra.meta, rb.meta).items()
    ]
    if metric == "time":
        value = _value(experiment, ra.frame)
        if _value(experiment, rb.frame) != value:
            raise PerflabError(
                f"{before} holds {value}, {after} {_value(experiment, rb.frame)}: not comparable"
            )
        fa, fb = ra.frame, rb.frame
    else:
        (fa, value), (fb, _) = (_metric_column(r, metric) for r in (ra, rb))
    a, b = _ok(fa, value, experiment.ok), _ok(fb, value, experiment.ok)
    if a.empty or b.empty:
        counted = metrics.METRICS[metric].needs == "pmu"  # NaN in every run no PMU counted
        why = " (counters: none where it was measured, no PMU)" if counted else ""
        raise PerflabError(
            f"{before if a.empty else after}: no row with status {experiment.ok!r} and a "
            f"{value}{why}"
        )
    notes += _check_grids(a, b, params, intersect)
    warnings += conditions_differ(ra.meta, rb.meta)
    scale = _tsc_scale(ra.meta, rb.meta, value)
    if scale != 1.0:
        b = b.assign(**{value: b[value] * scale})
        notes.append(
            f"after's {value} scaled by {scale:.6f} (the TSC rates differ): ratios of time"
        )
    for r, when in ((ra, "before"), (rb, "after")):
        if r.partial:
            warnings.append(f"{when} is partial: {r.partial}")
    for line in warnings:
        errors.warn(line)
    steps = _steps(ra.meta, rb.meta, value, scale)
    words = metrics.METRICS[metric].more, metrics.METRICS[metric].less
    table = compare_frames(a, b, params, value, confidence, steps, change, words)
    verdict = _verdict(table, "/".join(params), confidence, words)
    return Diff(ra, rb, table, params, value, confidence, verdict, warned + warnings, notes, change)


def _tsc_scale(a: dict, b: dict, value: str) -> float:
    """Ticks of two TSC rates are different units: after's ticks in before's (1.0 if the same)."""
    ha, hb = a.get("tsc_hz"), b.get("tsc_hz")
    if "ticks" not in value or not ha or not hb or math.isclose(ha, hb, rel_tol=1e-3):
        return 1.0
    return float(ha) / float(hb)


def summary_values(d: Diff) -> dict[str, Any]:
    """The JSON-ready description of a diff (its table goes beside it)."""
    return {
        "experiment": d.before.experiment,
        "before": d.before.path,
        "after": d.after.path,
        "value": d.value,
        "params": list(d.params),
        "confidence": d.confidence,
        "level_per_point": d.table.attrs.get("level"),
        "change": d.change,
        "power": POWER,
        "verdict": d.verdict,
        "warnings": d.warnings,
        "notes": d.notes,
        "flagged": int((d.table["change"] != "").sum()),
        "points": len(d.table),
    }
