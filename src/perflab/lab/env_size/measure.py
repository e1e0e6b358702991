"""The environment-size experiment of Mytkowicz et al.: run, summarise, find windows, plot (its
plan and registry entry are the package's light __init__).

A program runs with an environment holding only VAR= padded by 0..N characters (as in
DjiBee's script), each size many times, in a seeded random order; each run is one row.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np

from perflab import errors
from perflab.analysis import disturbance
from perflab.analysis.summary import Summary, Table
from perflab.core.lazy import pd
from perflab.errors import PerflabError
from perflab.lab.env_size import loop_layouts
from perflab.lab.env_size import windows as windows_mod
from perflab.lab.env_size.plan import AUTO, EnvSizePlan
from perflab.lab.env_size.plan import MAX_ARG_STRLEN as MAX_ARG_STRLEN
from perflab.lab.env_size.plan import PARAMS as PARAMS
from perflab.plan import controls
from perflab.running import childruns, lanes, shift, spawn
from perflab.running.childruns import status_counts as status_counts
from perflab.running.childruns import value_column as value_column
from perflab.running.progress import ProgressArg, shown
from perflab.store import journal, results
from perflab.store.recording import FLUSH_S, Recording
from perflab.system import provenance

if TYPE_CHECKING:
    from matplotlib.figure import Figure

KEY = ("env_size", "rep")
COLUMNS = list(KEY) + list(childruns.MEASURED)
CHUNK_RUNS = childruns.CHUNK_RUNS  # read at each sweep: a test may make chunks smaller
SHIFT_CHUNK_POINTS = shift.CHUNK_POINTS  # the shift engine's, likewise


def resolve_program(
    program: Sequence[str],
    opt: str,
    builtin: str = "mytkowicz",
    layout: windows_mod.LoopLayout | None = None,
) -> tuple[tuple[str, ...], dict]:
    """The argv to run and what the metadata says about it: the built-in loop, in its layout
    (default: the header's), when none given."""
    if program:
        path = spawn.check_program(program[0])
        return (path, *program[1:]), {"workload": path, **binary_meta(path)}
    workload = windows_mod.build_loop(builtin, opt, layout or windows_mod.DEFAULT_LAYOUT)
    meta = workload.meta() | {"opt": f"-O{opt}"} | binary_meta(str(workload.path))
    return (str(workload.path),), meta


def binary_meta(path: str) -> dict:
    """Where the measured binary is and its size: execve copies its path onto the stack, so
    the path's length shifts every window."""
    return {
        "workload_path": path,
        "workload_path_bytes": len(os.fsencode(path)),
        "workload_bytes": os.stat(path).st_size,
    }


@controls.plan_arguments(EnvSizePlan)
def sweep(
    program: Sequence[str] = (),
    *,
    output: str | os.PathLike | None = None,
    resume: bool = False,
    discard_bad: bool = False,
    progress: ProgressArg = None,
    on_start: Callable[[int, int], None] | None = None,
    warn: Callable[[str], None] = errors.warn,
    counters: bool = False,
    extra_meta: Mapping[str, Any] | None = None,  # its values free-form: metadata as given
    **params: Any,  # EnvSizePlan's fields: named by plan_arguments, typed by the plan
) -> pd.DataFrame:
    """Run the env-size sweep and return its tidy frame (also journaled to `output` if given).

    program: the argv of the program to run at every size, e.g. ("./a.out", "arg"); () runs
    the built-in Mytkowicz loop (compiled at -O`opt`), whose probe times its hot region.
    params: any field of EnvSizePlan: min_size, max_size, step (bytes of padding in the variable
    `var`, default "A"), repeat (runs per size), aslr ("off", "on", "system"), cpus (None: the
    quietest usable CPU, said in one line), order ("random" or "sequential"), seed,
    inherit_env, opt, timeout (s), rt, mlock, engine ("exec": a fresh child per run; "shift":
    for a built-in loop with ASLR off, one child per CPU with the loop's frame placed where an
    exec'd child's would be, checked before it measures: lab/env_size/shifted.py).
    output: a .parquet/.csv journal, flushed as runs finish; resume=True completes it.
    progress: by default a display that suits where it runs (a line updated in Jupyter, a
    bar in a terminal, a line every 10 s or 5 % in a log), False for none, or a callable
    progress(n) after each chunk of n runs, with on_start(todo, done) once before
    (perflab.progress.Progress supplies both: sweep(..., **Progress("env-size").callbacks)).

    Returns one row per run: env_size (bytes), rep, ticks (TSC ticks of the probed region,
    timer cost subtracted; NaN without a probe), outer_ticks (the whole run seen by the
    parent, ticks), wall_ns, utime_ns, stime_ns (ns), maxrss_kb (KiB), minflt, majflt, nvcsw,
    nivcsw (counts), cycles, instructions (NaN where perf counters are absent), exit_code,
    signal, status ("ok", "exit", "crash", "timeout", ...), child_errno, strays. Metadata
    (machine, ASLR, CPUs, TSC Hz, workload) is in df.attrs["perflab"]; docs/env-size.md says
    how each column is measured and its floor.

    A KeyboardInterrupt leaves `output` complete up to the last run and marked incomplete;
    discard_bad drops damaged journal chunks on resume (their runs are measured again).
    counters=True first counts the CPU's address-alias event in runs inside and outside each
    predicted window (alias_counters.sweep_meta), or records why it cannot. extra_meta joins
    the metadata (the CLI records its -k there, so `perflab report` finds the same windows).
    """
    cpus = params.pop("cpus", None)
    given = controls.typed_value(program, tuple[str, ...], "program")  # not one string's letters
    # The plan as asked, on the CPUs it runs on (their choice reads its --jobs), checked once;
    # then completed once with what the sweep resolved: the layout auto chose and the digest
    # of the loop built in it.
    plan = lanes.with_cpus(EnvSizePlan(program=given, **params), cpus,
                           output if resume else None).check()  # fmt: skip
    recording = Recording(output, resume, discard_bad)
    recording.check()
    layout, layout_meta = loop_layouts.resolve(plan, _recorded_layout(recording))
    if layout_meta.get("survey"):  # a layout perflab chose is said before the sweep starts
        errors.note_once(loop_layouts.described({"loop_layout": layout_meta}))
    argv, workload_meta = resolve_program(plan.program, plan.opt, plan.workload, layout)
    plan = replace(plan, layout=plan.layout if layout is None else str(layout),
                   workload_digest=workload_meta.get("workload_digest", ""))  # fmt: skip
    meta = {**provenance.metadata(), **run_conditions(plan), **workload_meta}
    if layout_meta:
        meta["loop_layout"] = layout_meta
    meta |= windows_mod.explain_meta(argv, plan, childruns.base_env(plan.inherit_env, plan.var))
    if layout is not None:
        meta |= loop_layouts.check(argv, meta, plan)
    if counters:
        meta |= _count_aliasing(argv, plan, meta)
    size, rep = plan.pairs()
    placement = None
    if plan.engine == "shift":
        from perflab.lab.env_size import shifted

        base = childruns.base_env(plan.inherit_env, plan.var)
        placement, placed = shifted.placement(argv, plan, meta, base, size)
        meta |= placed
    meta |= dict(extra_meta or {})
    runs = childruns.Runs(
        programs=[argv],
        prog=np.zeros(size.size, np.int64),
        labels={"env_size": size.astype(np.int32), "rep": rep.astype(np.int32)},
        key=KEY,
        sizes=size,
        var=plan.var,
        env=childruns.base_env(plan.inherit_env, plan.var),
    )
    if placement is not None:
        with shown("env-size", on_start, progress) as (start, step):
            return shift.measure(runs, plan, meta, placement, recording,
                                 chunk_points=SHIFT_CHUNK_POINTS, flush_s=FLUSH_S,
                                 on_start=start, progress=step, warn=warn)  # fmt: skip
    return lanes.measure(
        runs, plan, meta, recording, chunk_runs=CHUNK_RUNS, flush_s=FLUSH_S,
        on_start=on_start, progress=progress, warn=warn,
    )  # fmt: skip


def _recorded_layout(recording: Recording) -> dict | None:
    """The layout an interrupted sweep's journal recorded, which its resume must build again."""
    if not recording.resume or recording.output is None:
        return None
    meta = journal.recorded_meta(recording.output)
    found = meta.get("loop_layout")
    if isinstance(found, dict) and "layout" in found:
        return found
    params = meta.get("params")
    layout = params.get("layout") if isinstance(params, dict) else None
    return {"layout": layout, "why": "the journal's own layout"} if layout else None


def _count_aliasing(argv: Sequence[str], plan: EnvSizePlan, meta: dict) -> dict:
    """The alias counter's runs, before the sweep, on the sweep's first CPU."""
    from perflab.lab.env_size import alias_counters

    with childruns.quiet_options(plan) as options:
        options = replace(options, cpus=options.cpus[:1])
        env = childruns.base_env(plan.inherit_env, plan.var)
        return alias_counters.sweep_meta(argv, meta, plan.sizes(), options, plan.var, env,
                                         plan.seed)  # fmt: skip


def run_conditions(plan: EnvSizePlan) -> dict:
    """The run conditions every result of this sweep records next to provenance.metadata()."""
    return {
        "experiment": "env-size",
        **plan.conditions(),
        "order": plan.order,
        "engine": plan.engine,
        "env_var": plan.var,
        "program": list(plan.program) or "built-in mytkowicz loop",
    }


def campaign_points(min_size: int, max_size: int, step: int, block: int = 64) -> list[dict]:
    """The sweep cut into blocks of `block` sizes: what a campaign hands to a host at a time."""
    EnvSizePlan(min_size=min_size, max_size=max_size, step=step).check()
    starts = range(min_size, max_size + 1, step * block)
    return [{"env_size_from": int(a)} for a in starts]


def sweep_block(
    env_size_from: int, *, max_size: int, step: int, block: int = 64, **options: Any
) -> pd.DataFrame:
    """One block of a campaign's sweep, measured on the host that runs it, kept in memory; in
    the layout given, else the default one: a survey per block could choose a layout per block,
    and the blocks of one sweep must run one binary."""
    if options.get("layout", AUTO) == AUTO and not options.get("program"):
        options["layout"] = str(windows_mod.DEFAULT_LAYOUT)
    upto = min(max_size, env_size_from + (block - 1) * step)
    return sweep(
        min_size=env_size_from, max_size=upto, step=step, output=None, progress=False, **options
    )  # the campaign shows progress per block


def summarize(df: pd.DataFrame, value: str | None = None) -> pd.DataFrame:
    """Per env size: n, min, median, mean, stdev, MAD of the ok runs, and how many failed."""
    value = value or value_column(df)
    ok = df.loc[df["status"] == "ok", ["env_size", value]]  # two columns, not a copy of all
    g = ok.groupby("env_size")[value]
    out = g.agg(n="count", min="min", median="median", mean="mean", stdev="std")
    dev = (ok[value] - g.transform("median")).abs()
    out["mad"] = dev.groupby(ok["env_size"]).median()
    failed = df.loc[df["status"] != "ok", "env_size"].value_counts()
    out = out.reindex(np.unique(df["env_size"]))
    out["failed"] = failed.reindex(out.index, fill_value=0)
    out["n"] = out["n"].fillna(0).astype(int)
    return out.reset_index()


# The kernel aligns the initial stack to 16 bytes, so an effect that comes through the
# stack position holds for 16 consecutive env sizes (the post's 16-point peaks).
STACK_ALIGN = 16


def _outstanding(
    values: np.ndarray, k: float, min_excess: float
) -> tuple[np.ndarray, float, float]:
    """Which values exceed median + k robust sigmas (and min_excess): mask, baseline, threshold."""
    baseline = float(np.median(values))
    spread = 1.4826 * float(np.median(np.abs(values - baseline)))
    threshold = max(baseline + k * spread, baseline * (1 + min_excess))
    return values > threshold, baseline, threshold


def detect_windows(
    summary: pd.DataFrame,
    column: str = "median",
    k: float = 5.0,
    min_excess: float = windows_mod.MIN_EXCESS,
    max_gap: int = 1,
    confirm: str | None = "min",
    min_sizes: int | None = None,
) -> pd.DataFrame:
    """Sizes whose median stands out from all sizes' medians, grouped into windows.

    A size stands out when its value exceeds baseline + k * 1.4826 * MAD (baseline and MAD
    of the per-size values) and baseline * (1 + min_excess), so a flat, quiet sweep finds
    nothing. With confirm="min" its minimum must stand out the same way among the minima:
    on a shared machine interference raises a median now and then, an environment effect
    raises every run. Outstanding sizes at most max_gap grid steps apart form one window;
    windows of fewer than min_sizes sizes are dropped (default: 2 when the grid is fine
    enough to put 2 sizes in one STACK_ALIGN span, else 1). Columns: start, end, width
    (bytes of env spanned), sizes, peak_size, peak, excess (peak/baseline - 1), spacing
    (start minus the previous window's start); attrs hold baseline and threshold.
    """
    s = summary.dropna(subset=[column]).sort_values("env_size")
    sizes, values = s["env_size"].to_numpy(), s[column].to_numpy(dtype=float)
    cols = ["start", "end", "width", "sizes", "peak_size", "peak", "excess", "spacing"]
    if sizes.size == 0:
        return pd.DataFrame(columns=cols)
    hot_mask, baseline, threshold = _outstanding(values, k, min_excess)
    if confirm and confirm in s:
        hot_mask &= _outstanding(s[confirm].to_numpy(dtype=float), k, min_excess)[0]
    step = int(np.min(np.diff(sizes))) if sizes.size > 1 else 1
    if min_sizes is None:
        min_sizes = 2 if 2 * step <= STACK_ALIGN else 1
    hot = np.flatnonzero(hot_mask)
    rows = []
    for group in np.split(hot, np.flatnonzero(np.diff(sizes[hot]) > max_gap * step) + 1):
        if group.size < max(1, min_sizes):
            continue
        peak = group[np.argmax(values[group])]
        start, end = int(sizes[group[0]]), int(sizes[group[-1]])
        rows.append(
            {
                "start": start,
                "end": end,
                "width": end - start + step,
                "sizes": int(group.size),
                "peak_size": int(sizes[peak]),
                "peak": float(values[peak]),
                "excess": float(values[peak] / baseline - 1) if baseline else np.nan,
            }
        )
    out = pd.DataFrame(rows, columns=cols[:-1])
    out["spacing"] = out["start"].diff()
    out.attrs.update(baseline=baseline, threshold=threshold, column=column, k=k)
    return out


def with_clusters(windows: pd.DataFrame, summary: pd.DataFrame) -> pd.DataFrame:
    """detect_windows' windows and every cluster that stands out from its neighbours where the
    global threshold saw none (clusters.local_windows: bimodal runs raise that threshold);
    attrs["clusters"] names the starts found that way."""
    from perflab.lab.env_size import clusters

    found = [
        c for c in clusters.local_windows(summary)
        if not ((windows["start"] <= c["end"]) & (windows["end"] >= c["start"])).any()
    ]  # fmt: skip
    if not found:
        return windows
    attrs = dict(windows.attrs)
    rows = [*windows.drop(columns="spacing").to_dict("records"), *found]
    out = pd.DataFrame(rows, columns=list(windows.columns[:-1])).sort_values("start")
    out = out.reset_index(drop=True).astype({"start": int, "end": int, "width": int})
    out["spacing"] = out["start"].diff()
    out.attrs.update(attrs, clusters=[int(c["start"]) for c in found])
    return out


def _windows_by(parts: Sequence[tuple[str, pd.DataFrame]], key: str, k: float) -> pd.DataFrame:
    """Per part of a sweep: runs, median of the size medians, and the windows found in it."""
    rows = []
    for name, part in parts:
        windows = detect_windows(summary := summarize(part), k=k)
        rows.append(
            {
                key: name,
                "runs": len(part),
                "median": summary["median"].median(),
                "windows": len(windows),
                "starts": " ".join(map(str, windows["start"])) or "-",
                "widths": " ".join(map(str, windows["width"])) or "-",
                "spacing": windows["spacing"].dropna().median(),  # NaN for one window
            }
        )
    return pd.DataFrame(rows)


def spacing_shown(table: pd.DataFrame) -> pd.DataFrame:
    """A windows table as printed: a spacing where there is one ("-": one window or none)."""
    return table.assign(spacing=["-" if pd.isna(v) else f"{v:,.0f}" for v in table["spacing"]])


def per_host_windows(df: pd.DataFrame, k: float = 5.0) -> pd.DataFrame:
    """A campaign's sweep per host: runs, median of the size medians, windows and their spacing."""
    return _windows_by([(str(h), part) for h, part in df.groupby("host")], "host", k)


def parse_zoom(text: str) -> tuple[int, int]:
    """'A:B' as two sizes, A < B."""
    try:
        a, b = (int(x) for x in text.split(":"))
    except ValueError:
        raise PerflabError(f"--zoom {text!r}: expected A:B, two env sizes") from None
    if a >= b or a < 0:
        raise PerflabError(f"--zoom {text!r}: need 0 <= A < B")
    return a, b


def plot(
    df: pd.DataFrame,
    path: str | os.PathLike | None = None,
    windows: pd.DataFrame | None = None,
    zoom: tuple[int, int] | None = None,
    value: str | None = None,
    summary: pd.DataFrame | None = None,
    predicted: pd.DataFrame | None = None,
) -> Figure:
    """Mean (red) and median (blue) ticks vs env size, windows shaded; zoom=(A, B) to look in.

    predicted: windows.predict's windows, hatched, so a reader sees where the addresses
    said a window would be and whether one came."""
    from matplotlib.ticker import StrMethodFormatter

    from perflab.analysis import plot as plt

    value = value or value_column(df)
    if summary is None:
        summary = summarize(df, value)
    if windows is None:
        windows = detect_windows(summary)
    if zoom:
        summary = summary[summary["env_size"].between(*zoom)]
    fig, ax = plt.figure(figsize=(10, 5.6))
    x = summary["env_size"]
    ax.plot(x, summary["mean"], color=plt.COLORS[0], lw=0.7, alpha=0.7, label=f"mean {value}")
    ax.plot(x, summary["median"], color=plt.COLORS[1], lw=0.8, label=f"median {value}", zorder=3)
    _cpu_series(ax, df, value, zoom)
    lo, hi = zoom or (int(x.min()), int(x.max())) if len(x) else (0, 1)
    pad = max(0.5, (hi - lo) / 300)  # a 16-byte window must stay visible on an 8 KiB axis
    shown = windows[(windows["end"] >= lo) & (windows["start"] <= hi)]
    for i, w in enumerate(shown.itertuples()):
        beside = ", or above their neighbours" if windows.attrs.get("clusters") else ""
        label = f"windows (median > {windows.attrs['threshold']:,.0f}{beside})" if i == 0 else None
        ax.axvspan(w.start - pad, w.end + pad, color=plt.COLORS[2], alpha=0.3, lw=0, label=label)
        ax.annotate(
            f"{w.start}-{w.end}\npeak {w.excess:+.0%}",
            (w.end + pad, w.peak),
            xytext=(3, 0),
            textcoords="offset points",
            fontsize=8,
            va="top",
        )
    if predicted is not None:
        windows_mod.hatch(ax, predicted, lo, hi, pad)
    if "baseline" in windows.attrs:
        ax.axhline(windows.attrs["baseline"], color="black", lw=0.6, ls="--", label="baseline")
    ax.set_xlabel(f"environment size (bytes of padding in {_var(df)}=)")
    ax.set_ylabel(f"{value} per run")
    if zoom:
        ax.set_xlim(*zoom)
    if summary["median"].isna().all():
        ax.text(0.5, 0.5, "no run ended 'ok'", transform=ax.transAxes, ha="center", va="center")
        if len(x) > 1:
            ax.set_xlim(int(x.min()), int(x.max()))
    clipped = _robust_ylim(ax, summary)
    ax.yaxis.set_major_formatter(StrMethodFormatter("{x:,.0f}"))
    if clipped:
        sizes = "size" if clipped == 1 else "sizes"
        ax.plot([], [], " ", label=f"means of {clipped} {sizes} off the top (a few slow runs)")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=3, fontsize=8)
    meta = results.metadata(df)
    n = int(summary["n"].median()) if len(summary) else 0
    title = f"Env size vs {value}: ASLR {meta.get('aslr', '?')}, {n} runs per size"
    return plt.save(fig, path, title=title)


def _robust_ylim(ax: Any, summary: pd.DataFrame) -> int:
    """Y range from the medians and the 95th percentile of means, so one preempted run (a
    mean 4x the rest) cannot flatten the windows; returns how many means fall above it."""
    summary = summary.dropna(subset=["median"])
    if summary.empty:  # every run failed: leave matplotlib's default range
        return 0
    top = max(summary["median"].max() * 1.1, summary["mean"].quantile(0.95) * 1.05)
    bottom = min(summary["median"].min(), summary["mean"].min()) * 0.95
    ax.set_ylim(bottom, top)
    return int((summary["mean"] > top).sum())


def _var(df: pd.DataFrame) -> str:
    return results.metadata(df).get("env_var", "A")


def per_cpu_windows(df: pd.DataFrame, k: float = 5.0) -> pd.DataFrame:
    """A parallel sweep per CPU and pooled (CPU a block factor): runs, median of the size
    medians, and the windows found in each (starts, widths, median spacing)."""
    parts = [(str(c), part) for c, part in df.groupby("cpu")] + [("all", df)]
    return _windows_by(parts, "cpu", k)


def _cpu_series(ax: Any, df: pd.DataFrame, value: str, zoom: tuple[int, int] | None) -> None:
    """A parallel sweep: each CPU's median per size, under the pooled one."""
    from perflab.analysis import plot as plt

    if "cpu" not in df:
        return
    for i, (cpu, part) in enumerate(df.groupby("cpu")):
        per = summarize(part, value)
        if zoom:
            per = per[per["env_size"].between(*zoom)]
        color = plt.COLORS[3 + i % (len(plt.COLORS) - 3)]
        ax.plot(per["env_size"], per["median"], color=color, lw=0.5, alpha=0.7,
                label=f"median, CPU {cpu}")  # fmt: skip


# Three figures of one effect sit side by side in a summary (the windows' peak, the verdicts'
# median, the alias check's per-iteration cost): each table names its own.
VERDICTS_TITLE = (
    "verdicts (median_excess: the median of the window's per-size medians over that of the "
    "sizes outside every window, with an interval; over: the level the interval covers)"
)


LAYOUTS_TITLE = (
    "layouts of the paper's loop timed before the sweep (code: the loop's offset in its 64-byte "
    "window; statics: i's in its page; excess: its first predicted window over its neighbours, "
    "interleaved pairs of exec'd runs; spread: IQR/median of the runs beside it)"
)


def summary(frame: pd.DataFrame, meta: dict[str, Any]) -> Summary:
    """Status, the windows (by the sweep's -k) and why they are where they are, the slowest
    sizes, and for a parallel sweep the windows per CPU and the interference check."""
    from perflab.lab.env_size import alias_counters

    value = value_column(frame)
    sizes = summarize(frame, value)
    k = float(meta.get("window_k", 5.0))
    windows = with_clusters(detect_windows(sizes, k=k), sizes)
    predicted, verdicts, why = windows_mod.explain(meta, sizes, windows, runs=frame)
    counts = status_counts(frame)
    lines = [f"{len(frame)} runs; status: {counts}"]
    if placed := loop_layouts.described(meta):
        lines.insert(0, placed)
    title, hidden = "windows", windows.iloc[:0, :0]
    if sizes["n"].sum() == 0:
        lines.append(
            "no run ended 'ok': nothing to summarise (see the status and exit_code columns)"
        )
    else:
        overall = sizes["median"].describe()
        lines.append(
            f"median {value} per size: min {overall['min']:,.0f}, median {overall['50%']:,.0f}, "
            f"max {overall['max']:,.0f}"
        )
        if windows.empty:
            threshold = windows.attrs.get("threshold", 0)
            lines.append(
                f"no window: no sizes stand out in median (> {threshold:,.0f}) and minimum, "
                "and no stack step's sizes stand above their neighbours'"
            )
        elif windows.attrs.get("clusters"):
            starts = ", ".join(map(str, windows.attrs["clusters"]))
            lines.append(
                f"windows at {starts}: their sizes stand above the sizes around them in every "
                f"run's minimum though not above the global threshold "
                f"({windows.attrs['threshold']:,.0f}: the runs switch modes along the sweep)"
            )
        else:
            title = (
                f"windows (median > {windows.attrs['threshold']:,.0f}; "
                f"baseline {windows.attrs['baseline']:,.0f}: the median of the per-size medians; "
                "peak_excess: the window's highest per-size median over the baseline)"
            )
            peak = [f"{e:+.1%}" for e in windows.excess]
            hidden = spacing_shown(windows.assign(excess=peak)).rename(
                columns={"excess": "peak_excess"}
            )
    lines += why + alias_counters.summary_lines(meta) + lanes.describe(meta.get("interference", {}))
    lines += disturbance.lines(meta)
    if meta.get("engine") == "shift":
        checked = len(meta.get("shift_check", {}).get("sizes", []))
        lines.append(
            "engine shift: one child per CPU called the loop with its frame where an exec'd "
            f"child's is (checked against exec'd children at {checked} sizes before measuring)"
        )
    bounds = zip(verdicts.excess, verdicts.ci_low, verdicts.ci_high, strict=True)
    excess = [f"{e:+.1%} [{lo:+.1%}, {hi:+.1%}]" for e, lo, hi in bounds]
    shown = verdicts.assign(median_excess=excess)[
        ["start", "end", "verdict", "median_excess", "over"]
    ]
    tables = [
        Table("windows", title, windows, "{:,.0f}", hidden),
        Table("verdicts", VERDICTS_TITLE, verdicts, "{}", shown),
        Table("sizes", f"10 slowest sizes ({value})", sizes, "{:,.0f}",
              sizes.nlargest(10, "median")),
    ]  # fmt: skip
    if predicted is not None:
        tables.insert(1, Table("predicted", "predicted windows (from addresses)", predicted, "{}"))
    if survey := meta.get("loop_layout", {}).get("survey"):
        layouts = loop_layouts.table(survey)
        timed = loop_layouts.shown(layouts)
        tables.insert(0, Table("layouts", LAYOUTS_TITLE, layouts, "{}", timed))
    if "cpu" in frame:
        cpus = per_cpu_windows(frame, k)
        tables.append(
            Table("per_cpu", "per CPU (all: pooled)", cpus, "{:,.0f}", spacing_shown(cpus))
        )
    values: dict[str, Any] = {
        "value": value,
        "runs": len(frame),
        "status": counts,
        "baseline": windows.attrs.get("baseline"),
        "threshold": windows.attrs.get("threshold"),
        "explanation": why,
        "alias_check": meta.get("alias_check"),
        "loop_layout": meta.get("loop_layout"),
        "window_check": meta.get("window_check"),
        **{
            key: meta[key]
            for key in ("alias_counter", "alias_event", "alias_counts")
            if key in meta
        },
        **({"interference": meta.get("interference")} if "cpu" in frame else {}),
        **({"disturbed": meta["disturbed"]} if "disturbed" in meta else {}),
    }
    return Summary(
        lines, tables, values, lambda p: plot(frame, p, windows, None, value, sizes, predicted)
    )
