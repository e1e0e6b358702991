"""The link-order experiment of Mytkowicz et al.: link every order once, run each, explain why.

Each permutation of the object files is linked once (cached by content), its hot functions
and loops located in the symbol table, then run `repeat` times in a seeded random order under
the env-size sweep's controls. Every program's path has the same length, so with an empty
environment and ASLR off the stack starts at the same address for every order: only the code
layout differs.
"""

from __future__ import annotations

import os
import shlex
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from perflab import errors
from perflab.analysis import disturbance, stats
from perflab.analysis.summary import Summary, Table
from perflab.core.lazy import pd
from perflab.errors import PerflabError
from perflab.lab.link_order import MAX_PERMUTATIONS as MAX_PERMUTATIONS
from perflab.lab.link_order import LinkOrderPlan
from perflab.lab.link_order import orders as orders
from perflab.lab.link_order import parse_permutations as parse_permutations
from perflab.plan import controls
from perflab.running import childruns, lanes
from perflab.running.childruns import value_column as value_column
from perflab.running.progress import ProgressArg
from perflab.store import results
from perflab.store.recording import FLUSH_S, Recording
from perflab.system import compiler, pmu, provenance
from perflab.system.binlayout import MODULI as MODULI
from perflab.system.binlayout import functions, layout
from perflab.system.binlayout import records as results_records

if TYPE_CHECKING:
    from matplotlib.figure import Figure

KEY = ("perm", "rep")
BUILTIN_HOT = ("lo_drive", "lo_a", "lo_b", "lo_c")
CHUNK_RUNS = 64  # ~0.1 s of link-order runs per C call (read at each sweep)
# Each order's binary is read afresh into the page cache before its first run: one linked now
# sits in large contiguous folios, one from the cache that exec read back in scattered pages,
# and that difference between two copies of one binary reads as 1 % (docs/rigorous-compare.md).
PROGRAM_PAGES = "each program's file read afresh into the page cache before its first run"


@dataclass(frozen=True)
class Source:
    """What is permuted and how it is linked: objects, linker, and the symbols to locate."""

    objects: tuple[compiler.Object, ...]
    linker: compiler.Linker
    symbols: tuple[str, ...]
    meta: dict

    @property
    def labels(self) -> tuple[str, ...]:
        return tuple(o.label for o in self.objects)


def builtin_source(
    cflags: Sequence[str] = compiler.LINKORDER_CFLAGS, cc: str | None = None
) -> Source:
    """perflab's own multi-object workload, compiled with cflags (each .o cached)."""
    argv = compiler.check_compiler(cc)
    objects = tuple(compiler.linkorder_objects(tuple(cflags), argv))
    meta = {
        "workload": "built-in link-order workload",
        "compiler": compiler.compiler_version(tuple(argv)),
        "cflags": " ".join(cflags),
    }
    return Source(objects, compiler.builtin_linker(argv), BUILTIN_HOT, meta)


def user_source(
    objects: Sequence[str | os.PathLike],
    cc: str | None = None,
    ldflags: str = "",
    template: str | None = None,
    symbols: Sequence[str] = (),
) -> Source:
    """The user's objects, linked by cc + ldflags or by a command template; located: symbols
    (default: every function the objects define)."""
    if len(objects) < 2:
        raise PerflabError("give at least two object files to permute")
    objs = tuple(compiler.Object.of(o) for o in objects)
    labels = [o.label for o in objs]
    if len(set(labels)) != len(labels):
        raise PerflabError(f"object names must be distinct on a link order: {', '.join(labels)}")
    if template is not None:
        linker = compiler.Linker(template=tuple(compiler.link_template(template)))
    else:
        cc_argv = tuple(compiler.check_compiler(cc))
        linker = compiler.Linker(cc=cc_argv, ldflags=tuple(_split(ldflags)))
    meta = {
        "workload": " ".join(str(o.path) for o in objs),
        "link": " ".join(linker.template) or " ".join([*linker.cc, "{objects}", *linker.ldflags]),
    }
    return Source(objs, linker, tuple(symbols) or functions(objs), meta)


def _split(text: str) -> list[str]:
    try:
        return shlex.split(text)
    except ValueError as exc:
        raise PerflabError(f"--ldflags {text!r}: {exc}") from None


def link_all(
    source: Source,
    perms: Sequence[tuple[int, ...]],
    progress: Callable[[int], None] | None = None,
) -> list[compiler.Program]:
    """One program per order, linked only when the cache does not already hold it."""
    out = []
    for perm in perms:
        out.append(compiler.link([source.objects[i] for i in perm], source.linker))
        if progress:
            progress(1)
    return out


def counters_note() -> str:
    """What the cycles/instructions columns hold on this machine."""
    if pmu.hardware_counters():
        return "cycles and instructions from perf_event (user mode)"
    return "not supported here (no perf_event hardware counters): cycles/instructions are NaN"


@controls.plan_arguments(LinkOrderPlan)
def sweep(
    objects: Sequence[str | os.PathLike] = (),
    *,
    cc: str | None = None,
    cflags: Sequence[str] = compiler.LINKORDER_CFLAGS,
    ldflags: str = "",
    template: str | None = None,
    symbols: Sequence[str] = (),
    output: str | os.PathLike | None = None,
    resume: bool = False,
    discard_bad: bool = False,
    on_build: Callable[[int], Callable[[int], None] | None] | None = None,
    on_start: Callable[[int, int], None] | None = None,
    progress: ProgressArg = None,
    warn: Callable[[str], None] = errors.warn,
    **params: Any,  # LinkOrderPlan's fields: named by plan_arguments, typed by the plan
) -> pd.DataFrame:
    """Link every chosen order once, run each `repeat` times, return the tidy frame.

    objects: object files (.o) to link in every order; () uses the built-in four-object
    workload compiled with `cflags`. cc, ldflags, template ("gcc {objects} -o {output}") and
    symbols say how to link them and which symbols' layout to record.
    params: any field of LinkOrderPlan (permutations, seed, repeat, aslr, cpus, order, inherit_env,
    timeout, rt, mlock, args). Its metadata holds the per-program layout ('layout': symbol
    addresses and alignments) and the build/run times. on_build(n) returns a per-program
    callback for the link progress; on_start(todo, done) and progress(n) are the run's
    (progress: by default a display on stderr or in Jupyter; False for none).

    Returns one row per run: link_order ("c,a,b,main"), perm, rep, then the columns of every
    child run: ticks (probed region, TSC ticks, timer cost subtracted), outer_ticks, wall_ns,
    utime_ns, stime_ns, maxrss_kb, minflt, majflt, nvcsw, nivcsw, cycles, instructions (NaN
    where not counted), exit_code, signal, status, child_errno, strays (docs/env-size.md).
    """
    recording = Recording(output, resume, discard_bad)
    recording.check()
    objects = controls.typed_value(objects, tuple[str | os.PathLike, ...], "objects")
    args = controls.typed_value(params.pop("args", ()), tuple[str, ...], "args")
    cpus = params.pop("cpus", None)
    probe = LinkOrderPlan(
        args=args, **params
    )  # refuses unknown parameters before anything is built
    orders(len(objects) or len(compiler.LINKORDER_SOURCES), probe.permutations, probe.seed)
    t0 = time.perf_counter()
    if objects:
        source = user_source(objects, cc, ldflags, template, symbols)
    else:
        source = builtin_source(tuple(cflags), cc)
        source = Source(source.objects, source.linker, tuple(symbols) or BUILTIN_HOT, source.meta)
    plan = replace(
        probe,
        labels=source.labels,
        digests=tuple(o.digest for o in source.objects),
        link=source.linker.key().replace("\0", " "),
    )
    plan = lanes.with_cpus(plan, cpus, output if resume else None).check()
    perms = orders(len(source.objects), plan.permutations, plan.seed)
    links_before = compiler.BUILDS["link"]
    programs = link_all(source, perms, on_build(len(perms)) if on_build else None)
    build_s = time.perf_counter() - t0
    lay = pd.concat(
        [layout(p, source.symbols).assign(perm=i, link_order=",".join(p.order))
         for i, p in enumerate(programs)],
        ignore_index=True,
    )  # fmt: skip
    layout_s = time.perf_counter() - t0 - build_s
    meta = {
        **provenance.metadata(),
        **run_conditions(plan),
        **source.meta,
        "objects": list(source.labels),
        "symbols": list(source.symbols),
        "hardware_counters": counters_note(),
        "links": compiler.BUILDS["link"] - links_before,
        "build_s": build_s,
        "layout_s": layout_s,
        "layout": results_records(lay),
        "program_paths": [str(p.path) for p in programs],
        "program_pages": PROGRAM_PAGES,
    }
    perm, rep = plan.pairs(len(programs))
    names = np.array([",".join(p.order) for p in programs], dtype=object)
    runs = childruns.Runs(
        programs=[(str(p.path), *plan.args) for p in programs],
        prog=perm,
        labels={"link_order": names[perm], "perm": perm.astype(np.int32),
                "rep": rep.astype(np.int32)},
        key=KEY,
        env=childruns.base_env(plan.inherit_env),
        layout=perm,
    )  # fmt: skip
    t1 = time.perf_counter()
    df = lanes.measure(
        runs, plan, meta, recording, chunk_runs=CHUNK_RUNS, flush_s=FLUSH_S,
        on_start=on_start, progress=progress, warn=warn,
    )  # fmt: skip
    df["link_order"] = df["link_order"].astype(str)
    return results.attach(df, {**results.metadata(df), "run_s": time.perf_counter() - t1})


def run_conditions(plan: LinkOrderPlan) -> dict:
    """The run conditions every result of this sweep records next to provenance.metadata()."""
    return {
        "experiment": "link-order",
        **plan.conditions(),
        "order": plan.order,
        "permutations": plan.permutations,
        "repeat": plan.repeat,
        "args": list(plan.args),
    }


def summarize(df: pd.DataFrame, value: str | None = None) -> pd.DataFrame:
    """stats.describe of each order's ok runs (and median cycles and IPC where counted),
    fastest median first."""
    value = value or value_column(df)
    ok = df[df["status"] == "ok"]
    out = stats.describe(ok, ["perm", "link_order"], value)
    if ok["cycles"].notna().any():  # where perf_event counts: core cycles and IPC per order
        counted = ok.groupby("perm")[["cycles", "instructions"]].median()
        out = out.join(counted.add_suffix("_median"), on="perm")
        out["ipc"] = out["instructions_median"] / out["cycles_median"]
    return out.sort_values("median", ignore_index=True)


def spread(df: pd.DataFrame, summary: pd.DataFrame, value: str | None = None) -> dict:
    """Slowest over fastest median, with a bootstrap CI from those two orders' runs."""
    value = value or value_column(df)
    fast, slow = summary.iloc[0], summary.iloc[-1]
    ok = df[df["status"] == "ok"]
    a = ok.loc[ok["perm"] == fast["perm"], value]
    b = ok.loc[ok["perm"] == slow["perm"], value]
    ratio, lo, hi = stats.ratio_bootstrap_interval(a, b)
    return {
        "fastest": fast["link_order"],
        "fastest_median": float(fast["median"]),
        "slowest": slow["link_order"],
        "slowest_median": float(slow["median"]),
        "ratio": ratio,
        "ci_low": lo,
        "ci_high": hi,
    }


def features(lay: pd.DataFrame) -> pd.DataFrame:
    """One row per program, one column per alignment feature ('lo_a loop % 64', ...)."""
    cols = {}
    for sym, g in lay.groupby("symbol", sort=False):
        g = g.set_index("perm")
        for m in MODULI:
            cols[f"{sym} % {m}"] = g[f"mod{m}"]
            if (g["loop_head"] >= 0).all():
                cols[f"{sym} loop % {m}"] = g[f"loop_mod{m}"]
        if (g["loop_head"] >= 0).all():
            for m in (32, 64):
                cols[f"{sym} loop {m}B lines"] = g[f"loop_lines{m}"]
    return pd.DataFrame(cols)


def alignment_effects(
    summary: pd.DataFrame, lay: pd.DataFrame, n_perm: int = 999, seed: int = 0
) -> pd.DataFrame:
    """How well each alignment feature separates fast from slow orders, best first.

    score: adjusted eta² of the orders' median ranks grouped by the feature's value (the share
    of the rank variance it explains, discounted for its number of levels); p: the chance a
    random relabelling of orders explains as much; rho: Spearman correlation with the median.
    Features that split the orders identically cannot be told apart by this data: they share
    one row, the others named in `same_split` (only a new layout would separate them).
    """
    feats = features(lay).reindex(summary["perm"].to_numpy())
    y = summary["median"].to_numpy(dtype=float)
    n = y.size
    ranks = pd.Series(y).rank().to_numpy()
    rng = np.random.default_rng(seed)
    shuffled = np.vstack([ranks, *[rng.permutation(ranks) for _ in range(n_perm)]])
    total = ((ranks - ranks.mean()) ** 2).sum()
    rows = []
    for name, col in feats.items():
        codes, levels = pd.factorize(col)
        k = levels.size
        if k < 2 or k >= n or total == 0:
            continue
        onehot = np.eye(k)[codes]
        counts = onehot.sum(axis=0)
        between = ((shuffled @ onehot) ** 2 / counts).sum(axis=1) - n * ranks.mean() ** 2
        eta2 = between / total
        adj = 1 - (1 - eta2[0]) * (n - 1) / (n - k)
        by_level = pd.Series(y).groupby(codes).median()
        rows.append(
            {
                "split": tuple(codes),
                "feature": name,
                "levels": int(k),
                "score": float(adj),
                "eta2": float(eta2[0]),
                "p": float((eta2 >= eta2[0] - 1e-12).sum() / (n_perm + 1)),
                "rho": stats.spearman(col.to_numpy(), y),
                "fast_value": int(levels[by_level.idxmin()]),
                "slow_value": int(levels[by_level.idxmax()]),
                "slow_over_fast": float(by_level.max() / by_level.min()),
            }
        )
    cols = ["feature", "levels", "score", "eta2", "p", "rho", "fast_value", "slow_value",
            "slow_over_fast", "same_split"]  # fmt: skip
    if not rows:
        return pd.DataFrame(columns=cols)
    out = pd.DataFrame(rows).sort_values(
        ["score", "levels"], ascending=[False, True], kind="stable"
    )
    groups = out.groupby("split", sort=False)
    out = groups.head(1).assign(
        same_split=groups["feature"].transform(lambda f: ", ".join(f.iloc[1:]))
    )
    return out[cols].reset_index(drop=True)


def layout_frame(df: pd.DataFrame) -> pd.DataFrame:
    """The per-program layout a sweep recorded in its metadata."""
    return pd.DataFrame(results.metadata(df).get("layout", []))


def plot(
    df: pd.DataFrame,
    path: str | os.PathLike | None = None,
    summary: pd.DataFrame | None = None,
    effects: pd.DataFrame | None = None,
    value: str | None = None,
) -> Figure:
    """Each order's runs as a box, sorted by median, coloured by the best alignment feature."""
    from matplotlib.patches import Patch
    from matplotlib.ticker import StrMethodFormatter

    from perflab.analysis import plot as plt

    value = value or value_column(df)
    summary = summarize(df, value) if summary is None else summary
    lay = layout_frame(df)
    if effects is None:
        effects = alignment_effects(summary, lay) if not lay.empty else pd.DataFrame()
    ok = df[df["status"] == "ok"]
    data = [ok.loc[ok["perm"] == p, value].to_numpy() for p in summary["perm"]]
    fig, ax = plt.figure(figsize=(max(8, 0.28 * len(data) + 3), 5.6))
    box = ax.boxplot(data, patch_artist=True, showfliers=True, widths=0.6,
                     flierprops={"markersize": 2, "alpha": 0.5})  # fmt: skip
    handles = []
    if not effects.empty:
        best = effects.iloc[0]
        feat = features(lay)[best["feature"]].reindex(summary["perm"].to_numpy()).to_numpy()
        values = sorted(set(feat.tolist()))
        colour = {v: plt.COLORS[i % len(plt.COLORS)] for i, v in enumerate(values)}
        for patch, v in zip(box["boxes"], feat, strict=True):
            patch.set_facecolor(colour[v])
            patch.set_alpha(0.6)
        handles = [Patch(color=colour[v], alpha=0.6, label=f"{best['feature']} = {v}")
                   for v in values]  # fmt: skip
        title_feat = f"; colour: {best['feature']} (score {best['score']:.2f}, p {best['p']:.3f})"
    else:
        title_feat = ""
    for median in box["medians"]:
        median.set_color("black")
    # Preempted runs 3x the rest must not flatten 24 boxes: the axis spans the whiskers and the
    # legend's room above them; the runs beyond are counted, not drawn.
    reach = np.concatenate([w.get_ydata() for w in box["whiskers"]])
    low, high = float(np.nanmin(reach)), float(np.nanmax(reach))
    pad = (high - low) * 0.05 or abs(high) * 0.01
    top = high + pad + (high - low) * 0.25
    ax.set_ylim(low - pad, top)
    ax.yaxis.set_major_formatter(StrMethodFormatter("{x:,.0f}"))
    off = sum(int((d > top).sum()) for d in data)
    if off:
        runs = "run" if off == 1 else "runs"
        handles.append(Patch(color="white", label=f"{off} slow {runs} off the top"))
    ax.set_xticks(range(1, len(data) + 1), summary["link_order"], rotation=90, fontsize=7)
    ax.set_xlabel("link order (sorted by median)")
    ax.set_ylabel(f"{value} per run")
    if handles:
        ax.legend(handles=handles, loc="upper left", fontsize=8, ncol=2)
    meta = results.metadata(df)
    title = (f"Link order vs {value}: {len(data)} orders, ASLR {meta.get('aslr', '?')}"
             f"{title_feat}")  # fmt: skip
    return plt.save(fig, path, title=title)


def _short(names: str) -> str:
    """The first two confounded features and how many more (all of them are in JSON)."""
    parts = [p for p in names.split(", ") if p]
    return ", ".join(parts[:2]) + (f" (+{len(parts) - 2})" if len(parts) > 2 else "")


def summary(frame: pd.DataFrame, meta: dict[str, Any]) -> Summary:
    """Orders by median, the slowest/fastest spread, the alignment features that separate fast
    from slow orders, and each program's layout (JSON only)."""
    counts = childruns.status_counts(frame)
    if not (frame["status"] == "ok").any():
        return Summary([f"no run ended 'ok' (status: {counts}): nothing to compare"], [],
                       {"runs": len(frame), "status": counts})  # fmt: skip
    value = value_column(frame)
    orders = summarize(frame, value)
    gap = spread(frame, orders, value)
    lay = layout_frame(frame)
    effects = alignment_effects(orders, lay)
    build = f" in {meta['build_s']:.2f} s" if meta.get("build_s") is not None else ""
    lines = [
        f"{len(frame)} runs of {len(orders)} orders; status: {counts}; "
        f"{meta.get('links', '?')} programs linked{build}",
        f"hardware counters: {meta.get('hardware_counters')}",
        f"spread: slowest {gap['slowest']} / fastest {gap['fastest']} = "
        f"{gap['ratio']:.3f} (95% CI {gap['ci_low']:.3f}-{gap['ci_high']:.3f})",
    ]
    if effects.empty:
        lines.append("alignment: no feature varies across these orders")
    else:
        best = effects.iloc[0]
        verdict = "separates" if best["p"] < 0.05 else "does not clearly separate"
        lines.append(
            f"best: {best['feature']} {verdict} fast from slow orders (score {best['score']:.2f}, "
            f"p {best['p']:.3f}; fast at {best['fast_value']}, slow at {best['slow_value']})"
        )
    lines += lanes.describe(meta.get("interference", {})) + disturbance.lines(meta)
    cols = ["link_order", "n", "median", "mad", "min", "p95"]
    shown = effects.head(8).assign(same_split=effects["same_split"].head(8).map(_short))
    tables = [
        Table("orders", f"orders by median {value}", orders, "{:,.0f}", orders[cols]),
        Table("alignment", "alignment features, best separation first", effects, "{:.3f}",
              shown),
        Table("layout", "layout of each linked program", lay, shown=lay.iloc[:0, :0]),
    ]  # fmt: skip
    values = {"value": value, "runs": len(frame), "status": counts, "spread": gap}
    values.update({k: meta.get(k) for k in ("hardware_counters", "links", "build_s", "run_s")})
    values["interference"] = meta.get("interference")
    values["disturbed"] = meta.get("disturbed")
    return Summary(lines, tables, values, lambda p: plot(frame, p, orders, effects, value))
