"""Each experiment's summary of a saved frame: the tables and lines its verb printed when it ran.

One function per experiment, built from that experiment module's own summarize/plot contract, so
`perflab report FILE` shows what the verb showed and a new experiment adds one entry here.
"""

import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from perflab.analysis import stats
from perflab.engine import childruns
from perflab.errors import PerflabError


@dataclass(frozen=True)
class Table:
    """One table of a summary: full in JSON, `shown` (default: the same) in text and pages."""

    name: str
    title: str
    frame: pd.DataFrame
    floatfmt: str = "{:,.2f}"
    shown: pd.DataFrame | None = None

    @property
    def display(self) -> pd.DataFrame:
        """What a reader sees: the shown rows and columns."""
        return self.frame if self.shown is None else self.shown


@dataclass(frozen=True)
class Summary:
    """What an experiment says about its frame: sentences, tables, extra JSON values, a figure."""

    lines: list[str]
    tables: list[Table]
    values: dict[str, Any] = field(default_factory=dict)
    plot: Callable[[Any], Any] | None = None
    notes: list[str] = field(default_factory=list)


def _status(df: pd.DataFrame) -> dict[str, int]:
    return childruns.status_counts(df) if "status" in df else {"ok": len(df)}


def env_size(df: pd.DataFrame, meta: dict) -> Summary:
    """Windows and the slowest sizes, as `perflab sweep env-size` printed them (its -k)."""
    from perflab.lab import env_size as mod
    from perflab.lab.env_size import alias_counters
    from perflab.lab.env_size import windows as explained

    value = mod.value_column(df)
    summary = mod.summarize(df, value)
    windows = mod.detect_windows(summary, k=float(meta.get("window_k", 5.0)))
    predicted, verdicts, why = explained.explain(meta, summary, windows)
    counts = _status(df)
    lines = [f"{len(df)} runs; status: {counts}"]
    title, hidden = "windows", windows.iloc[:0, :0]
    if summary["n"].sum() == 0:
        lines.append(
            "no run ended 'ok': nothing to summarise (see the status and exit_code columns)"
        )
    else:
        overall = summary["median"].describe()
        lines.append(
            f"median {value} per size: min {overall['min']:,.0f}, median {overall['50%']:,.0f}, "
            f"max {overall['max']:,.0f}"
        )
        if windows.empty:
            threshold = windows.attrs.get("threshold", 0)
            lines.append(
                f"no window: no sizes stand out in median (> {threshold:,.0f}) and minimum"
            )
        else:
            title = (
                f"windows (median > {windows.attrs['threshold']:,.0f}; "
                f"baseline {windows.attrs['baseline']:,.0f})"
            )
            hidden = None
    lines += why + alias_counters.summary_lines(meta)
    slow = summary.nlargest(10, "median")
    tables = [
        Table("windows", title, windows, "{:,.3f}", hidden),
        Table("verdicts", "verdicts (excess over the baseline, 95 % CI)", verdicts, "{:+.3f}"),
        Table("sizes", f"10 slowest sizes ({value})", summary, "{:,.0f}", slow),
    ]
    if predicted is not None:
        tables.insert(1, Table("predicted", "predicted windows (from addresses)", predicted, "{}"))
    values = {
        "value": value,
        "runs": len(df),
        "status": counts,
        "baseline": windows.attrs.get("baseline"),
        "threshold": windows.attrs.get("threshold"),
        "explanation": why,
        "alias_check": meta.get("alias_check"),
        **{k: meta[k] for k in ("alias_counter", "alias_event", "alias_counts") if k in meta},
    }
    return Summary(
        lines,
        tables,
        values,
        lambda p: mod.plot(df, p, windows, None, value, summary, predicted),
    )


def link_order(df: pd.DataFrame, meta: dict) -> Summary:
    """Orders by median, the slowest/fastest spread and the alignment features."""
    from perflab.lab import link_order as mod

    counts = _status(df)
    if not (df["status"] == "ok").any():
        return Summary([f"no run ended 'ok' (status: {counts}): nothing to compare"], [])
    value = mod.value_column(df)
    summary = mod.summarize(df, value)
    spread = mod.spread(df, summary, value)
    lay = mod.layout_frame(df)
    effects = mod.alignment_effects(summary, lay)
    cols = ["link_order", "n", "median", "mad", "min", "p95"]
    lines = [
        f"{len(df)} runs of {len(summary)} orders; status: {counts}; "
        f"{meta.get('links', '?')} programs linked",
        f"hardware counters: {meta.get('hardware_counters')}",
        f"spread: slowest {spread['slowest']} / fastest {spread['fastest']} = "
        f"{spread['ratio']:.3f} (95% CI {spread['ci_low']:.3f}-{spread['ci_high']:.3f})",
    ]
    tables = [
        Table("orders", f"orders by median {value}", summary, "{:,.0f}", summary[cols]),
        Table("alignment", "alignment features, best separation first", effects, "{:.3f}",
              effects.head(8)),
        Table("layout", "layout of each linked program", lay, shown=lay.iloc[:0, :0]),
    ]  # fmt: skip
    if effects.empty:
        lines.append("alignment: no feature varies across these orders")
    values = {"value": value, "runs": len(df), "status": counts, "spread": spread}
    values.update({k: meta.get(k) for k in ("hardware_counters", "links", "build_s", "run_s")})
    return Summary(lines, tables, values, lambda p: mod.plot(df, p, summary, effects, value))


def compare(df: pd.DataFrame, meta: dict) -> Summary:
    """B/A per setup and over all setups."""
    from perflab.lab import compare as mod

    value = mod.value_column(df)
    per = mod.per_setup(df, value)
    counts = _status(df)
    lines = [f"A: {meta.get('a')}", f"B: {meta.get('b')}"]
    if meta.get("identical"):
        lines.append("note: A and B are byte-identical programs run with the same arguments")
    lines.append(
        f"{len(df)} runs, status {counts}; randomized: {', '.join(meta.get('randomize', []))}"
    )
    values: dict[str, Any] = {"value": value, "runs": len(df), "status": counts}
    if per.empty:
        lines.append("no setup has ok runs of both A and B: nothing to compare")
        return Summary(lines, [Table("setups", "setups", per)], values)
    summary = mod.overall(df, per, value)
    cols = ["setup", "env_size", "link_order", "median_a", "median_b", "ratio", "ci_low",
            "ci_high", "verdict"]  # fmt: skip
    lines += [
        f"per setup: B/A from {summary['min_ratio']:.3f} to {summary['max_ratio']:.3f}; "
        f"B slower in {summary['b_slower']}, faster in {summary['b_faster']}, "
        f"unclear in {summary['unclear']} of {summary['setups']}",
        summary["conclusion"],
    ]
    title = f"B/A of median {value} per setup (-1: no padding)"
    values["overall"] = summary
    return Summary(
        lines,
        [
            Table(
                "setups",
                title,
                per,
                "{:,.3f}",
                per[cols].astype({"median_a": "int64", "median_b": "int64"}),
            )
        ],
        values,
        lambda p: mod.plot(df, p, per, summary),
    )


def memcpy(df: pd.DataFrame, meta: dict) -> Summary:
    """The small-size table, the cache knees and the peak rate."""
    from perflab.lab import memcpy as mod
    from perflab.system import machine

    knees = mod.detect_knees(df["size"], df["ticks_per_byte"])
    here = meta.get("hostname") == socket.gethostname()
    # The file's own caches; one from another machine that did not record them is not matched.
    if meta.get("caches"):
        caches = pd.DataFrame(meta["caches"])
    else:
        caches = machine.caches() if here else pd.DataFrame(columns=["cache", "size_bytes"])
    report = mod.knee_report(knees, caches)
    small = mod.summarize(df, 32)
    kernel = str(df["kernel"].iloc[0]) if "kernel" in df and len(df) else "?"
    title = "small sizes (Riquadro 3: ticks per copy, ticks per byte)" + (
        f", align {meta['align']}, offset {meta.get('offset', 0)}" if "align" in meta else ""
    )
    tables = [
        Table("small", title, small, "{:.6f}"),
        Table("knees", "cache knees: a copy of S bytes touches 2*S", report),
    ]
    values: dict[str, Any] = {"points": len(df), "kernel": kernel}
    line = f"{len(df)} sizes, {kernel}" + (f", min of {meta['trials']}" if "trials" in meta else "")
    if "gb_per_s" in df and df["gb_per_s"].notna().any():
        peak = df.loc[df["gb_per_s"].idxmax()]
        values["peak"] = {"size": int(peak["size"]), "gb_per_s": float(peak["gb_per_s"])}
        line += f"; peak {peak['gb_per_s']:.2f} GB/s at {int(peak['size']):,} bytes"
    if "mlockall" in meta:
        line += f"; mlockall {'on' if meta['mlockall'] else 'off'}"
    lines = [line] + ([] if len(report) else ["no cache knee found"])
    unmatched = not here and not meta.get("caches")
    notes = ["knees not matched to caches: the file is from another machine"] if unmatched else []
    if "derivative" not in df:
        notes.append("no figure: the file has no derivative column (perflab's memcpy writes one)")
        return Summary(lines, tables, values, None, notes)
    return Summary(lines, tables, values, lambda p: mod.plot(df, p, knees), notes)


def pagefault(df: pd.DataFrame, meta: dict) -> Summary:
    """Ticks per page: first touch, touching again, mlock'ed."""
    from perflab.lab import pagefault as mod

    pages, reps = int(df["pages"].iloc[0]), int(df["rep"].nunique())
    title = f"{pages} pages x {reps} regions (ticks and ns per 4 KiB page)"
    table = mod.summarize(df)
    return Summary([], [Table("per_page", title, table)], {}, lambda p: mod.plot(df, p))


def trig(df: pd.DataFrame, meta: dict) -> Summary:
    """Warm minimum per call, the histogram of values and the running minimum."""
    from perflab.lab import trig as mod

    summ, hist, conv = mod.summarize(df), mod.histogram(df), mod.convergence(df)
    repeat, cold = meta.get("repeat", "?"), meta.get("cold_runs", 0)
    lines = []
    for r in summ.itertuples(index=False):
        tail = (
            f"; cold first call {r.cold_min:,}..{r.cold_median:,.0f} (min..median of {cold})"
            if cold and hasattr(r, "cold_min")
            else ""
        )
        lines.append(f"{r.call} takes {r.warm_min:5d} ticks (warm min of {repeat}){tail}")
    tables = [
        Table("summary", "per call (ticks)", summ, "{:.0f}", summ.iloc[:0, :0]),
        Table("histogram", "sort | uniq -c | sort | tail", hist, "{:.0f}",
              hist.tail(max(3, len(summ)))),
        Table("running_min", "running minimum per repeat", conv, "{:.0f}"),
    ]  # fmt: skip
    return Summary(lines, tables, {}, lambda p: mod.plot(df, p))


def cswitch(df: pd.DataFrame, meta: dict) -> Summary:
    """The three cswitch lines and the per-placement table."""
    from perflab.lab import cswitch as mod

    summ = mod.summarize(df)
    first = df[(df["placement"] == "unpinned") & ~df["realtime"]]
    lines = mod.article_lines(first.iloc[0]) if len(first) else []
    title = "per iteration, median of reps (µs; switches from rusage)"
    return Summary(lines, [Table("table", title, summ, "{:.3f}")], {}, lambda p: mod.plot(df, p))


def syscalls(df: pd.DataFrame, meta: dict) -> Summary:
    """FileGuard's all/trimmed table, with the trim the verb used (else 10) if it leaves samples."""
    from perflab.lab import syscalls as mod

    n = int(df.groupby("call").size().min())
    trim = int(meta.get("trim", 10))
    trim = trim if n > 2 * trim else 0
    fg = mod.summarize(df, trim, hz=meta.get("tsc_hz") or None)
    title = f"{meta.get('trials', n)} trials, ticks as all/without the {trim} best and {trim} worst"
    table = Table("calls", title, fg, shown=mod.fileguard_text(fg))
    return Summary([], [table], {"trim": trim}, lambda p: mod.plot(df, p))


def core_vs_ht(df: pd.DataFrame, meta: dict) -> Summary:
    """The post's lines per placement and the 2-thread/1-thread table."""
    from perflab.lab.threads import core_vs_ht

    loops = int(meta.get("loops", 0))
    summary = core_vs_ht.summarize(df)
    lines = [line for _, line in core_vs_ht.post_lines(df, loops)]
    title = "per placement (ms; ratio = 2 threads / 1 thread)"
    return Summary(
        lines, [Table("placements", title, summary)], {}, lambda p: core_vs_ht.plot(df, p)
    )


def threads(df: pd.DataFrame, meta: dict) -> Summary:
    """Throughput, speedup, efficiency and utilisation per thread count."""
    from perflab.lab.threads import thread_count

    kernel = meta.get("kernel", "?")
    summary = thread_count.summarize(df)
    hidden = [] if kernel == "spin" else ["cas_retries", "retry_pct"]
    if summary["ipc"].isna().all():
        hidden += ["instructions", "ipc"]
    reps = int(df["rep"].nunique())
    title = f"{kernel} kernel, {meta.get('loops', '?')} loops shared, median of {reps}"
    table = Table("scaling", title, summary, shown=summary.drop(columns=hidden))
    return Summary([], [table], {"kernel": kernel}, lambda p: thread_count.plot(df, p))


def fauxplat(df: pd.DataFrame, meta: dict) -> Summary:
    """FauxPlat/sec alone and under each perturbation."""
    from perflab.lab.threads import fauxplat

    summary = fauxplat.summarize(df)
    alone = summary.iloc[0]
    reps = int(df["rep"].nunique()) if "rep" in df else len(df)
    lines = [
        f"{meta.get('loops', '?')} loops of {meta.get('kernel', '?')} "
        f"on cpu {meta.get('cpu', '?')}: "
        f"{alone['median']:.2f} FauxPlat/sec (median of {reps}, loops / CPU second)"
    ]
    title = "FauxPlat/sec per condition (change vs alone in %)"
    return Summary(lines, [Table("fauxplat", title, summary)], {}, lambda p: fauxplat.plot(df, p))


def counters(df: pd.DataFrame, meta: dict) -> Summary:
    """Counts per event, or which events count on the machine that wrote the file."""
    from perflab.lab import counters as mod

    counted = meta.get("counted")
    shown = mod.summarize(df)
    if isinstance(counted, list):
        title = f"counts of {' '.join(counted)} (exit status {meta.get('returncode')})"
    else:
        title = "perf events on that machine (count: a small Python region on this thread)"
        if "kind" in df:
            shown.insert(1, "kind", df["kind"])
    lines = [f"perf_event_paranoid={meta.get('perf_event_paranoid')}"]
    return Summary(lines, [Table("events", title, df, shown=shown)], {}, lambda p: mod.plot(df, p))


def clocks(df: pd.DataFrame, meta: dict) -> Summary:
    """ClockBench's read-cost table from the saved reads (the batch-timed mean is not saved)."""
    from perflab.lab import clocks as mod

    rows = []
    for name, g in df.groupby("method", sort=False):
        s = stats.summary(g["ns"])
        native = g["ticks"] if name in mod.COUNTERS else g["ns"]
        rows.append(
            {"method": name, "samples": s["n"], "min": s["min"], "max": s["max"],
             "avg": s["mean"], "median": s["median"], "stdev": s["stdev"],
             "median_ticks": float(np.median(g["ticks"])),
             "step": stats.quantum(native.round().astype(np.int64)),
             "repeats": float(np.mean(native == 0))}
        )  # fmt: skip
    table = pd.DataFrame(rows)
    title = (
        "ClockBench (ns; median_ticks in TSC ticks; step in ticks for TSC methods, ns for clocks)"
    )
    notes = ["batch_ns (a TSC-timed batch) is measured live by `perflab clocks`, not saved"]
    return Summary([], [Table("cost_ns", title, table)], {}, lambda p: mod.plot(df, p, None), notes)


def campaign(df: pd.DataFrame, meta: dict) -> Summary:
    """A campaign's per-host medians; `perflab report hosts` has the fleet view and its options."""
    from perflab.reports import fleet

    value = "fauxplat_per_s" if "fauxplat_per_s" in df else "ns" if "method" in df else "ticks"
    part = df[df["condition"] == "alone"] if "condition" in df else df
    per_host = fleet.per_host(part, value)
    lines = [f"{len(df)} rows from {df['host'].nunique()} hosts"]
    lines += [f"missing: {m}" for m in meta.get("missing", [])]
    cols = ["host", "n", "min", "median", "mean", "stdev", "mad", "vs_fleet_pct", "outlier"]
    table = Table("hosts", f"per host ({value})", per_host, shown=per_host[cols])
    return Summary(lines, [table], {"value": value}, lambda p: fleet.plot_hosts(per_host, value, p))


# experiment name in the metadata -> (columns its frame must have, summary)
EXPERIMENTS: dict[str, tuple[frozenset[str], Callable[[pd.DataFrame, dict], Summary]]] = {
    "env-size": (frozenset({"env_size", "rep", "status", "ticks"}), env_size),
    "link-order": (frozenset({"link_order", "perm", "rep", "status", "ticks"}), link_order),
    "compare": (frozenset({"setup", "side", "env_size", "status", "ticks"}), compare),
    "memcpy": (frozenset({"kernel", "size", "ticks", "ticks_per_byte"}), memcpy),
    "pagefault": (frozenset({"condition", "pages", "rep", "ticks_per_page"}), pagefault),
    "trig": (frozenset({"call", "mode", "rep", "ticks"}), trig),
    "cswitch": (frozenset({"placement", "realtime", "rt_applied", "alone_us_each"}), cswitch),
    "syscalls": (frozenset({"call", "rep", "ticks", "ns"}), syscalls),
    "core-vs-ht": (frozenset({"placement", "label", "threads", "cpu_ns", "wall_ns"}), core_vs_ht),
    "threads": (frozenset({"threads", "rep", "loops", "release_ns", "end_ns"}), threads),
    "fauxplat": (frozenset({"condition", "fauxplat_per_s", "fauxplat_wall_per_s"}), fauxplat),
    "counters": (frozenset({"event", "count", "status"}), counters),
    "clocks": (frozenset({"method", "ns", "ticks"}), clocks),
    "campaign": (frozenset({"host"}), campaign),
}


def recognise(columns: set[str]) -> str | None:
    """The experiment whose columns a frame without metadata has (most specific first)."""
    fits = [
        (len(cols), name)
        for name, (cols, _) in EXPERIMENTS.items()
        if name != "campaign" and cols <= columns
    ]
    return max(fits)[1] if fits else None


def summarize(experiment: str, df: pd.DataFrame, meta: dict) -> Summary:
    """The summary of `experiment` for this frame; a frame missing its columns is one error."""
    if experiment not in EXPERIMENTS:
        known = ", ".join(sorted(EXPERIMENTS))
        raise PerflabError(f"unknown experiment {experiment!r} (this perflab knows {known})")
    cols, build = EXPERIMENTS[experiment]
    missing = sorted(cols - set(map(str, df.columns)))
    if missing:
        raise PerflabError(
            f"a {experiment} result without column(s) {', '.join(missing)}: "
            "damaged, or not written by perflab"
        )
    if df.empty:
        return Summary([f"no rows: the {experiment} run recorded nothing"], [])
    return build(df, meta)
