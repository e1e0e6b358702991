"""A/B comparison under setup randomization, the remedy of Mytkowicz et al. (ASPLOS 2009, §6).

One setup (an environment size, a link order) can make B look faster than A when over many
setups it is not. So: draw random setups, run A and B interleaved in each, report B/A per
setup and over all setups, and say so when the sign of the effect depends on the setup.
"""

import os
import shlex
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from perflab import errors
from perflab.analysis import stats
from perflab.analysis.summary import Summary, Table
from perflab.engine import childruns, controls, lanes, results, spawn
from perflab.engine.childruns import value_column as value_column
from perflab.engine.progress import ProgressArg
from perflab.errors import PerflabError
from perflab.lab.link_order import counters_note
from perflab.lab.plans.compare import Plan as Plan
from perflab.system import compiler, machine

if TYPE_CHECKING:
    from matplotlib.figure import Figure

RANDOMIZE = ("env-size", "link-order")
NO_PADDING = -1  # env_size of a setup that does not randomize it: the environment is not padded
CHUNK_RUNS = childruns.CHUNK_RUNS  # read at each comparison: a test may make chunks smaller
FLUSH_S = childruns.FLUSH_S


def parse_randomize(text: str) -> tuple[str, ...]:
    """'env-size,link-order' (or 'none') as a tuple of known setup dimensions."""
    if text.strip() == "none":
        return ()
    parts = tuple(dict.fromkeys(p.strip() for p in text.split(",") if p.strip()))
    bad = [p for p in parts if p not in RANDOMIZE]
    if bad or not parts:
        raise PerflabError(
            f"--randomize {text!r}: expected 'none' or a list of {', '.join(RANDOMIZE)}"
        )
    return parts


@dataclass(frozen=True)
class Setup:
    """One random setup: a padding length (or NO_PADDING) and a link order (or none)."""

    index: int
    env_size: int
    perm: tuple[int, ...] | None


def draw_setups(
    n: int, randomize: Sequence[str], env_max: int, nobjects: int, seed: int
) -> list[Setup]:
    """n setups drawn with seed: env sizes uniform in 0..env_max, link orders uniform."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        size = int(rng.integers(0, env_max + 1)) if "env-size" in randomize else NO_PADDING
        perm = None
        if nobjects:
            perm = (
                tuple(int(x) for x in rng.permutation(nobjects))
                if "link-order" in randomize
                else tuple(range(nobjects))
            )
        out.append(Setup(i, size, perm))
    return out


@dataclass(frozen=True)
class Side:
    """What A or B is: a command line, or objects the setup links in its own order."""

    name: str
    argv: tuple[str, ...] = ()
    objects: tuple[compiler.Object, ...] = ()
    label: str = ""

    def program(self, setup: Setup, linker: compiler.Linker | None) -> tuple[tuple[str, ...], str]:
        """The argv to run in this setup and the link order it was built in ('' if none)."""
        if not self.objects:
            return self.argv, ""
        assert setup.perm is not None and linker is not None  # objects: linked in every setup
        prog = compiler.link([self.objects[i] for i in setup.perm], linker)
        return (str(prog.path), *self.argv), ",".join(prog.order)


def identical(a: Side, b: Side) -> bool:
    """A and B would run the same bytes with the same arguments (e.g. -O2 and -O3 agreeing)."""
    if a.objects or b.objects:
        same = [o.digest for o in a.objects] == [o.digest for o in b.objects]
    else:
        same = compiler.Object.of(a.argv[0]).digest == compiler.Object.of(b.argv[0]).digest
    return same and a.argv[1:] == b.argv[1:]


def program_side(name: str, command: str | Sequence[str]) -> Side:
    """A program given as a command line (split like a shell would, run without one)."""
    argv = controls.words(command, f"program {name}") if isinstance(command, str) else list(command)
    if not argv:
        raise PerflabError(f"program {name} is empty")
    return Side(name, (spawn.check_program(argv[0]), *argv[1:]), label=shlex.join(argv))


def build_side(name: str, cflags: Sequence[str], cc: Sequence[str] | None = None) -> Side:
    """The built-in multi-object workload compiled with cflags, linked per setup."""
    objects = tuple(compiler.linkorder_objects(tuple(cflags), cc))
    return Side(name, objects=objects, label=f"built-in workload {' '.join(cflags)}")


def _digests(side: Side) -> tuple[str, ...]:
    """What decides the bytes A or B runs: its objects, or its program file."""
    objects = side.objects or (compiler.Object.of(side.argv[0]),)
    return tuple(o.digest for o in objects)


def compare(
    a: Side,
    b: Side,
    *,
    output: str | os.PathLike | None = None,
    resume: bool = False,
    discard_bad: bool = False,
    on_start: Callable[[int, int], None] | None = None,
    progress: ProgressArg = None,
    warn: Callable[[str], None] = errors.warn,
    **params: Any,
) -> pd.DataFrame:
    """Run A and B interleaved, `repeat` pairs in each of `setups` random setups; tidy frame.

    a, b: the two sides (compare.build_side("A", ["-O2"]) or compare.program_side(name, argv)).
    params: any field of Plan (randomize, setups, repeat, env_max, var, seed, aslr, cpus,
    inherit_env, timeout, rt, mlock). Journaled to `output` when given, and resumable like a
    sweep: on_start(todo, done) once, progress(n) after each batch of n runs (by default a
    display on stderr or in Jupyter; progress=False for none).

    Returns one row per run: setup, env_size (bytes of padding, -1: none), link_order, side
    ("A"/"B"), rep, then the child-run columns: ticks (TSC ticks, timer cost subtracted),
    outer_ticks, wall_ns, utime_ns, stime_ns, maxrss_kb, faults, context switches, cycles,
    instructions, exit_code, signal, status (docs/env-size.md). per_setup() and overall()
    turn it into B/A ratios with intervals.
    """
    cpus = params.pop("cpus", None)
    randomize = tuple(params.pop("randomize", ("env-size",)))
    plan = Plan(a=a.label, b=b.label, digests=(_digests(a), _digests(b)), randomize=randomize,
                **params)  # fmt: skip
    plan = lanes.with_cpus(plan, cpus).check(len(a.objects) if b.objects else 0)
    recording = childruns.Recording(output, resume, discard_bad)
    recording.check()
    linker = compiler.builtin_linker() if a.objects else None
    setups = draw_setups(plan.setups, randomize, plan.env_max, len(a.objects), plan.seed)
    meta = {
        **machine.metadata(),
        "experiment": "compare",
        **plan.conditions(),
        "a": a.label,
        "b": b.label,
        "randomize": list(randomize),
        "setups": plan.setups,
        "repeat": plan.repeat,
        "env_max": plan.env_max,
        "env_var": plan.var,
        "interleave": "A B, then B A, alternately",
        "hardware_counters": counters_note(),
        "identical": identical(a, b),
    }
    t0 = time.perf_counter()
    runs = _runs(plan, setups, [(a.program(s, linker), b.program(s, linker)) for s in setups])
    meta["build_s"] = time.perf_counter() - t0
    return lanes.measure(
        runs, plan, meta, recording, chunk_runs=CHUNK_RUNS, flush_s=FLUSH_S,
        on_start=on_start, progress=progress, warn=warn,
    )  # fmt: skip


def _runs(plan: Plan, setups: list[Setup], built: list) -> childruns.Runs:
    """A B, B A, A B, ... in each setup: neither side always runs first (or second)."""
    programs: dict[tuple[str, ...], int] = {}
    prog, rows = [], []
    for setup, sides in zip(setups, built, strict=True):
        for rep in range(plan.repeat):
            pair = list(zip("AB", sides, strict=True))
            for side, (argv, order) in pair if rep % 2 == 0 else pair[::-1]:
                prog.append(programs.setdefault(argv, len(programs)))
                rows.append((setup.index, setup.env_size, order, side, rep))
    names = ("setup", "env_size", "link_order", "side", "rep")
    labels = {n: np.array(col, dtype=object if n in ("link_order", "side") else np.int64)
              for n, col in zip(names, zip(*rows, strict=True), strict=True)}  # fmt: skip
    return childruns.Runs(
        programs=list(programs),
        prog=np.array(prog, np.int64),
        labels=labels,
        key=("setup", "rep", "side"),
        sizes=labels["env_size"],
        var=plan.var,
        env=childruns.base_env(plan.inherit_env, plan.var),
    )


def per_setup(df: pd.DataFrame, value: str | None = None, confidence: float = 0.95) -> pd.DataFrame:
    """B/A of medians in each setup with its bootstrap CI, and which way it points."""
    value = value or value_column(df)
    ok = df[df["status"] == "ok"]
    rows = []
    for (setup, size), g in ok.groupby(["setup", "env_size"], sort=True):
        a, b = g.loc[g["side"] == "A", value], g.loc[g["side"] == "B", value]
        if a.empty or b.empty:
            continue
        ratio, lo, hi = stats.ratio_ci(a, b, confidence, seed=int(setup))
        rows.append(
            {
                "setup": int(setup),
                "env_size": int(size),
                "link_order": g["link_order"].iloc[0],
                "n_a": len(a),
                "n_b": len(b),
                "median_a": float(a.median()),
                "median_b": float(b.median()),
                "ratio": ratio,
                "ci_low": lo,
                "ci_high": hi,
                "verdict": "B slower" if lo > 1 else "B faster" if hi < 1 else "unclear",
            }
        )
    return pd.DataFrame(rows)


def overall(
    df: pd.DataFrame,
    setups: pd.DataFrame,
    value: str | None = None,
    confidence: float = 0.95,
    n_boot: int = 2000,
    seed: int = 0,
) -> dict:
    """Geometric mean of the setups' B/A with a two-level bootstrap CI (setups, then runs in
    each): the interval a new random setup would fall into, not just these ones."""
    value = value or value_column(df)
    if setups.empty:
        raise PerflabError("no setup has ok runs of both A and B: nothing to compare")
    ok = df[df["status"] == "ok"]
    rng = np.random.default_rng(seed)
    boot = []
    for s in setups["setup"]:
        g = ok[ok["setup"] == s]
        a = g.loc[g["side"] == "A", value].to_numpy(float)
        b = g.loc[g["side"] == "B", value].to_numpy(float)
        boot.append(stats.boot_medians(b, n_boot, rng) / stats.boot_medians(a, n_boot, rng))
    logs = np.log(np.vstack(boot))  # setups x n_boot
    pick = rng.integers(0, logs.shape[0], size=(n_boot, logs.shape[0]))
    means = np.exp(logs[pick, np.arange(n_boot)[:, None]].mean(axis=1))
    alpha = (1 - confidence) / 2
    lo, hi = np.quantile(means, [alpha, 1 - alpha])
    ratio = float(np.exp(np.log(setups["ratio"]).mean()))
    counts = setups["verdict"].value_counts()
    slower, faster = int(counts.get("B slower", 0)), int(counts.get("B faster", 0))
    return {
        "ratio": ratio,
        "ci_low": float(lo),
        "ci_high": float(hi),
        "confidence": confidence,
        "setups": len(setups),
        "b_slower": slower,
        "b_faster": faster,
        "unclear": int(counts.get("unclear", 0)),
        "min_ratio": float(setups["ratio"].min()),
        "max_ratio": float(setups["ratio"].max()),
        "depends_on_setup": bool(slower and faster),
        "conclusion": _conclusion(ratio, lo, hi, slower, faster, len(setups)),
    }


def _conclusion(ratio: float, lo: float, hi: float, slower: int, faster: int, n: int) -> str:
    """The plain-language verdict, the setup-dependence first: that is the paper's point."""
    if slower and faster:
        return (
            f"the conclusion depends on the setup: B is slower than A in {slower} setups and "
            f"faster in {faster} of {n} (the 'wrong data' case of Mytkowicz et al.): "
            f"one setup would have shown either; over all, B/A = {ratio:.3f} ({lo:.3f}-{hi:.3f})"
        )
    if lo > 1:
        return f"B is slower than A: B/A = {ratio:.3f} ({lo:.3f}-{hi:.3f}) over {n} setups"
    if hi < 1:
        return f"B is faster than A: B/A = {ratio:.3f} ({lo:.3f}-{hi:.3f}) over {n} setups"
    return f"no difference shown: B/A = {ratio:.3f}, its interval {lo:.3f}-{hi:.3f} contains 1"


def plot(
    df: pd.DataFrame,
    path: str | os.PathLike[str] | None,
    setups: pd.DataFrame,
    summary: dict[str, Any],
) -> "Figure":
    """B/A per setup with its CI (red: B slower, blue: B faster), and the overall band."""
    from perflab.analysis import plot as plt

    fig, ax = plt.figure(figsize=(max(7, 0.35 * len(setups) + 3), 5))
    colour = {"B slower": plt.COLORS[0], "B faster": plt.COLORS[1], "unclear": "#888888"}
    x = np.arange(len(setups))
    for verdict, g in setups.groupby("verdict"):
        idx = x[setups["verdict"].to_numpy() == verdict]
        r, lo, hi = (g[c].to_numpy(float) for c in ("ratio", "ci_low", "ci_high"))
        ax.errorbar(idx, r, yerr=[r - lo, hi - r], fmt="o", color=colour[verdict], capsize=3,
                    label=verdict)  # fmt: skip
    ax.axhline(1.0, color="black", lw=0.8, ls="--")
    ax.axhspan(summary["ci_low"], summary["ci_high"], color=plt.COLORS[2], alpha=0.2, lw=0,
               label=f"over all setups {summary['ratio']:.3f}")  # fmt: skip
    ticks = [
        "\n".join(filter(None, [f"env {r.env_size}" if r.env_size >= 0 else "", r.link_order]))
        or str(r.setup)
        for r in setups.itertuples()
    ]
    ax.set_xticks(x, ticks, rotation=90, fontsize=7)
    ax.set_xlabel("setup")
    ax.set_ylabel("B / A (median ticks)")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.3), ncol=4, fontsize=8)
    meta = results.metadata(df)
    title = "B/A over random setups" + (
        ": depends on the setup" if summary["depends_on_setup"] else ""
    )
    title += f" ({', '.join(meta.get('randomize', [])) or 'fixed setup'})"
    return plt.save(fig, path, title=title)


def summary(frame: pd.DataFrame, meta: dict[str, Any]) -> Summary:
    """A and B, B/A per setup with its interval and verdict, and over all setups."""
    value = value_column(frame)
    per = per_setup(frame, value)
    counts = childruns.status_counts(frame)
    randomize = meta.get("randomize", [])
    lines = [f"A: {meta.get('a')}", f"B: {meta.get('b')}"]
    if meta.get("identical"):
        lines.append("note: A and B are byte-identical programs run with the same arguments")
    lines.append(f"{len(frame)} runs, status {counts}; randomized: {', '.join(randomize)}")
    values: dict[str, Any] = {
        "a": meta.get("a"),
        "b": meta.get("b"),
        "randomize": randomize,
        "value": value,
        "runs": len(frame),
        "status": counts,
        "identical": meta.get("identical"),
        "interference": meta.get("interference"),
    }
    if per.empty:
        lines.append("no setup has ok runs of both A and B: nothing to compare")
        return Summary(lines, [Table("setups", "setups", per)], values)
    total = overall(frame, per, value)
    lines += [
        f"per setup: B/A from {total['min_ratio']:.3f} to {total['max_ratio']:.3f}; "
        f"B slower in {total['b_slower']}, faster in {total['b_faster']}, "
        f"unclear in {total['unclear']} of {total['setups']}",
        total["conclusion"],
        *lanes.describe(meta.get("interference", {})),
    ]
    values["overall"] = total
    cols = ["setup", "env_size", "link_order", "median_a", "median_b", "ratio", "ci_low",
            "ci_high", "verdict"]  # fmt: skip
    shown = per[cols].astype({"median_a": "int64", "median_b": "int64"})
    title = f"B/A of median {value} per setup (-1: no padding)"
    table = Table("setups", title, per, "{:,.3f}", shown)
    return Summary(lines, [table], values, lambda p: plot(frame, p, per, total))
