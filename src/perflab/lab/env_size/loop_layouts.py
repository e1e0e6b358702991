"""Which layouts of the paper's loop pay for 4K aliasing here, timed as the sweep runs them.

Whether a window shows rests on the CPU and on where the loop sits. On an AMD Zen 5 guest the
same loop ran 134-182 k ticks by its code's offset in a 64-byte window alone, and showed its
windows in some layouts only; an unrelated header edit that moved main 136 bytes took them
away. So the built-in loops are laid out by their source (workloads/perflab_layout.h), and
perflab builds the paper's loop in each layout of LAYOUTS, predicts its windows from that
binary, and times the binary as exec'd children at sizes inside a predicted window and just
outside it, interleaved in pairs: each pair's ticks inside over outside is one draw of the
window's excess under one state of the machine (a CPU that switches speed for stretches of
runs moves both halves), and the median of the pairs' log ratios with an order-statistic
interval says whether this layout pays here. The same timing at every predicted window of the
swept binary is the sweep's "this CPU:" verdict.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace

import numpy as np

from perflab.analysis import stats
from perflab.core import bindings
from perflab.core.lazy import pd
from perflab.errors import PerflabError
from perflab.lab.env_size import excess
from perflab.lab.env_size import windows as windows_mod
from perflab.lab.env_size.plan import AUTO, DEFAULT_LAYOUT, LAYOUTS, EnvSizePlan, LoopLayout
from perflab.running import childruns, spawn
from perflab.system import binlayout

# A layout is steady when its runs outside the window spread (IQR over median) by at most
# this: a window that pays PAYS then stands out of every run, not of a mode's.
STEADY = 0.05
SURVEY_PAIRS = 24  # pairs per layout in the survey: 16 layouts in about 2 s on a 2-vCPU guest
CHECK_PAIRS = 64  # pairs per predicted window in the check of the swept binary
CONFIDENCE = 0.95
SIZES_PER_SIDE = 3  # sizes inside a window, and on each side of it, taken in turn


def time_windows(
    argv: Sequence[str],
    predicted: Sequence[Mapping],
    grid: np.ndarray,
    options: spawn.SpawnOptions,
    var: str,
    base_env: Mapping[str, str],
    pairs: int = CHECK_PAIRS,
    seed: int = 0,
) -> list[excess.WindowTiming]:
    """Each predicted window (windows.predicted_rows) timed in `pairs` interleaved pairs of
    exec'd runs, one inside and one beside it, which goes first drawn per pair; all windows in
    one batch of runs, before pandas is loaded (a sweep's first runs must not wait for it)."""
    grid = np.asarray(grid, dtype=np.int64)
    rng = np.random.default_rng(seed)
    plan: list[tuple[int, int, int]] = []  # (window, size inside, size outside) per pair
    sides = []
    for i, w in enumerate(predicted):
        inside, outside = _beside(w, predicted, grid)
        sides.append((inside, outside))
        if inside and outside:
            plan += [(i, inside[p % len(inside)], outside[p % len(outside)]) for p in range(pairs)]
    order = rng.permutation(len(plan))
    first_inside = rng.random(len(plan)) < 0.5
    sizes = []
    for p in order:
        _, a, b = plan[p]
        sizes += [a, b] if first_inside[p] else [b, a]
    ticks = _ticks(argv, np.asarray(sizes, dtype=np.int64), options, var, base_env)
    ours = np.empty((len(plan), 2))
    for n, p in enumerate(order):
        a, b = ticks[2 * n], ticks[2 * n + 1]
        ours[p] = (a, b) if first_inside[p] else (b, a)
    window = np.array([w for w, _, _ in plan], dtype=np.int64)
    out = []
    for i, w in enumerate(predicted):
        inside, outside = sides[i]
        both = ours[window == i]
        both = both[np.isfinite(both).all(axis=1) & (both > 0).all(axis=1)]
        out.append(_timing(int(w["start"]), int(w["end"]), inside, outside, both))
    return out


def _beside(
    w: Mapping, predicted: Sequence[Mapping], grid: np.ndarray
) -> tuple[list[int], list[int]]:
    """Sizes inside window w, and 2-4 stack steps either side of it outside every window."""
    hot = np.zeros(grid.size, bool)
    for p in predicted:
        hot |= (grid >= p["start"]) & (grid <= p["end"])
    start, end = int(w["start"]), int(w["end"])
    step = windows_mod.STACK_STEP
    inside = grid[(grid >= start) & (grid <= end)]
    below = grid[(grid >= start - 4 * step) & (grid <= start - 2 * step) & ~hot]
    above = grid[(grid >= end + 2 * step) & (grid <= end + 4 * step) & ~hot]

    def spread(sizes: np.ndarray, n: int) -> list[int]:
        if not sizes.size:
            return []
        return [int(sizes[int(j)]) for j in np.unique(np.linspace(0, sizes.size - 1, n).round())]

    return spread(inside, SIZES_PER_SIDE), spread(below, 1) + spread(above, 1)


def _ticks(
    argv: Sequence[str],
    sizes: np.ndarray,
    options: spawn.SpawnOptions,
    var: str,
    base_env: Mapping[str, str],
) -> np.ndarray:
    """The probe's ticks of one exec'd run per size (timer cost subtracted), NaN where a run
    did not end ok; refused when the program reports no probe at all."""
    if not sizes.size:
        return np.zeros(0)
    runs = spawn.run_env_sizes(argv, sizes, var, base_env, options)
    if runs.size < sizes.size:
        raise PerflabError(f"the layout timing stopped after {runs.size} of {sizes.size} runs")
    ticks = spawn.tidy_columns(runs, spawn.timer_overhead())["ticks"]  # the sweep's reading
    return np.where(runs["status"] == bindings.RUN_OK, ticks, np.nan)


def _timing(
    start: int, end: int, inside: list[int], outside: list[int], both: np.ndarray
) -> excess.WindowTiming:
    """The pairs of one window as its excess, interval, levels and verdict."""
    if len(both) < 2:
        nan = math.nan
        return excess.WindowTiming(start, end, tuple(inside), tuple(outside), len(both),
                                   nan, nan, nan, nan, nan, nan, "unclear")  # fmt: skip
    logs = np.log(both[:, 0] / both[:, 1])
    med, lo, hi = stats.median_order_interval(logs, CONFIDENCE)
    q1, mid, q3 = np.percentile(both[:, 1], [25, 50, 75])
    gain, low, high = math.expm1(med), math.expm1(lo), math.expm1(hi)
    return excess.WindowTiming(
        start, end, tuple(inside), tuple(outside), len(both), float(np.median(both[:, 0])),
        float(mid), float((q3 - q1) / mid), gain, low, high, excess.verdict_of(gain, low, high),
    )  # fmt: skip


def placement_of(path: str) -> tuple[int, int]:
    """The loop's first instruction's offset in its 64-byte window and the static i's offset in
    its page, read from the binary: what its layout's flags were to fix."""
    main = None
    statics = None
    for f in binlayout.nm_fields(path, "-S", "--defined-only"):
        if len(f) == 4 and f[3] == "main":
            main = (int(f[0], 16), int(f[0], 16) + int(f[1], 16))
        if len(f) >= 3 and f[-1] == "i":
            statics = int(f[0], 16) % windows_mod.PAGE
    loop = binlayout.loop_spans(path, {"main": main}).get("main") if main else None
    if loop is None or statics is None:
        raise PerflabError(f"{path}: no loop in main or no static i: not a built-in loop")
    return loop[0] % 64, statics


@dataclass(frozen=True)
class LayoutRow:
    """One layout of the survey: where it put the loop, what aliases, and what it paid."""

    layout: str
    code: int  # read from the binary
    statics: int  # likewise
    pairs_named: str  # the pairs its first predicted window names
    window: str  # that window, "start-end"
    baseline_ticks: float
    spread: float
    steady: bool
    excess: float
    ci_low: float
    ci_high: float
    verdict: str
    digest: str


def survey(
    workload: str,
    opt: str,
    grid: np.ndarray,
    options: spawn.SpawnOptions,
    var: str,
    base_env: Mapping[str, str],
    seed: int = 0,
    layouts: Sequence[LoopLayout] = LAYOUTS,
) -> list[LayoutRow]:
    """Every layout built, its first predicted window over `grid` timed in SURVEY_PAIRS pairs;
    none where the first layout has no window among these sizes (the statics' offsets of the
    others differ by less than a stack step, so neither would theirs)."""
    rows: list[LayoutRow] = []
    for n, layout in enumerate(layouts):
        built = windows_mod.build_loop(workload, opt, layout)
        path = str(built.path)
        stack = windows_mod.loop_layout(path, var, base_env, opt, workload, layout)
        predicted = windows_mod.predicted_rows(stack, grid)[:1]
        if not predicted and not rows:
            return []
        code, statics = placement_of(path)
        timed = None
        if predicted:
            (timed,) = time_windows([path], predicted, grid, options, var, base_env,
                                    SURVEY_PAIRS, seed + n)  # fmt: skip
        nan = math.nan
        rows.append(LayoutRow(
            str(layout), code, statics, str(predicted[0]["pair"]) if predicted else "",
            f"{timed.start}-{timed.end}" if timed else "",
            timed.ticks_outside if timed else nan, timed.spread if timed else nan,
            bool(timed and timed.spread <= STEADY), timed.excess if timed else nan,
            timed.ci_low if timed else nan, timed.ci_high if timed else nan,
            timed.verdict if timed else "no window in range", built.digest[:12],
        ))  # fmt: skip
    return rows


def choose(rows: Sequence[LayoutRow]) -> tuple[LoopLayout, str]:
    """The steady layout whose interval's low end pays most; where none pays, the steadiest
    (so that the flat band is the CPU's, not a mode's); with why, one clause."""
    if not rows:
        return DEFAULT_LAYOUT, "the default: no predicted window among the sizes swept"
    paying = [r for r in rows if r.steady and r.verdict == "pays"]
    if paying:
        best = max(paying, key=lambda r: r.ci_low)
        why = (
            f"of {len(rows)} layouts timed, {len(paying)} steady ones pay here; this one's "
            f"interval reaches highest"
        )
    else:
        timed = [r for r in rows if math.isfinite(r.spread)]
        if not timed:
            return DEFAULT_LAYOUT, "the default: no predicted window among the sizes swept"
        best = min(timed, key=lambda r: r.spread)
        why = f"none of {len(rows)} layouts timed is steady and pays here; this is the steadiest"
    return LoopLayout.parse(best.layout), why


def table(rows: Sequence[Mapping]) -> pd.DataFrame:
    """The survey as recorded (LayoutRow's fields; NaN may read back as None) as a frame."""
    frame = pd.DataFrame(list(rows), columns=list(LayoutRow.__dataclass_fields__))
    numbers = ["baseline_ticks", "spread", "excess", "ci_low", "ci_high"]
    return frame.astype(dict.fromkeys(numbers, float))


def shown(frame: pd.DataFrame) -> pd.DataFrame:
    """The survey as printed: excess with its interval, the statics' offset in hex."""
    cols = ["layout", "code", "statics", "window", "baseline_ticks", "spread", "excess", "verdict"]
    out = frame.assign(
        statics=[f"{s:#x}" for s in frame["statics"]],
        spread=[f"{s:.1%}" if s == s else "-" for s in frame["spread"]],
        baseline_ticks=[f"{b:,.0f}" if b == b else "-" for b in frame["baseline_ticks"]],
        excess=[
            f"{e:+.1%} [{lo:+.1%}, {hi:+.1%}]" if e == e else "-"
            for e, lo, hi in zip(frame["excess"], frame["ci_low"], frame["ci_high"], strict=True)
        ],
        verdict=[v + ("" if s else ", not steady") if v != "no window in range" else v
                 for v, s in zip(frame["verdict"], frame["steady"], strict=True)],
    )  # fmt: skip
    return out[cols]


def resolve(plan: EnvSizePlan, recorded: Mapping | None) -> tuple[LoopLayout | None, dict]:
    """The layout a sweep builds its loop in, and what its metadata says of the choice: none
    for a user's program; the one given; the one a resumed journal recorded; the default for
    the split loop or with ASLR on (no window to time); else the survey's choice."""
    if plan.program:
        return None, {}
    if plan.layout != AUTO:
        layout = LoopLayout.parse(plan.layout)
        return layout, {"layout": str(layout), "how": "given", "why": "--layout"}
    if recorded and "layout" in recorded:
        layout = LoopLayout.parse(recorded["layout"])
        return layout, {**recorded, "how": "resumed", "why": "the journal's own layout"}
    if plan.workload != "mytkowicz" or plan.aslr != "off":
        why = (
            "the default: the split loop's page split does not follow the layout"
            if plan.workload != "mytkowicz"
            else "the default: with ASLR on no window can be predicted to time"
        )
        return DEFAULT_LAYOUT, {"layout": str(DEFAULT_LAYOUT), "how": "default", "why": why}
    base = childruns.base_env(plan.inherit_env, plan.var)
    with childruns.quiet_options(plan) as options:
        options = replace(options, cpus=options.cpus[:1])
        rows = survey(plan.workload, plan.opt, plan.sizes(), options, plan.var, base, plan.seed)
    layout, why = choose(rows)
    return layout, {"layout": str(layout), "how": "auto", "why": why,
                    "survey": [asdict(r) for r in rows]}  # fmt: skip


def check(argv: Sequence[str], meta: Mapping, plan: EnvSizePlan) -> dict:
    """The swept binary timed at every predicted window (CHECK_PAIRS pairs each): what the
    sweep's "this CPU:" line says; nothing without a predicted window."""
    if meta.get("aslr") != "off" or "stack_layout" not in meta:
        return {}
    stack = windows_mod.Layout.from_meta(meta["stack_layout"])
    predicted = windows_mod.predicted_rows(stack, plan.sizes())
    if not predicted:
        return {}
    base = childruns.base_env(plan.inherit_env, plan.var)
    with childruns.quiet_options(plan) as options:
        options = replace(options, cpus=options.cpus[:1])
        timed = time_windows(argv, predicted, plan.sizes(), options, plan.var, base,
                             CHECK_PAIRS, plan.seed)  # fmt: skip
    return {"window_check": [asdict(t) for t in timed]}


def described(meta: Mapping) -> str:
    """The layout's line in a summary: where the loop and its statics sit, and why."""
    chosen = meta.get("loop_layout")
    if not chosen:
        return ""
    layout = LoopLayout.parse(chosen["layout"])
    digest = str(meta.get("workload_source_digest", ""))[:12]
    return (
        f"layout {layout}: the loop {layout.code} bytes into a 64-byte window, i at "
        f"{layout.statics:#x} of its page ({chosen['how']}: {chosen['why']}; --layout to pick"
        f" one){f'; source {digest}' if digest else ''}"
    )
