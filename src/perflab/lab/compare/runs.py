"""The runs of a comparison's setups: A/B pairs, B first in half, through the engine."""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

import numpy as np

from perflab.analysis.warmup import MIN_ITERATIONS
from perflab.core.lazy import pd
from perflab.lab.compare import exact
from perflab.lab.compare.layouts import LAYOUT, NO_PADDING, Setup
from perflab.lab.compare.plan import HEAP_DIGITS, RANDOMIZE, ComparePlan
from perflab.lab.compare.sides import Side, refuse_static
from perflab.running import childruns, lanes
from perflab.store import results
from perflab.store.identity import Executes
from perflab.store.recording import Recording
from perflab.system import compiler

HEAP_VAR = "PERFLAB_HEAP_OFFSET"  # what workloads/heap_offset.c reads


def measure(
    a: Side,
    b: Side,
    plan: ComparePlan,
    setups: dict[Setup, int],
    meta: dict,
    recording: Recording,
    sources: Executes | None = None,
    iterations: int | None = None,
    **shown: Any,
) -> pd.DataFrame:
    """Link what each setup runs, then run its pairs (setups[s] of them) through the engine,
    each run asked for `iterations` of the repeat loop (default: the plan's); shown: the
    engine's batching and what it reports (lanes.measure)."""
    t0 = time.perf_counter()
    try:
        built = [(a.program(s), b.program(s)) for s in setups]
    finally:
        a.put_back()
        b.put_back()
    heap = any(s.heap_offset != NO_PADDING for s in setups)
    shim = compiler.heap_shim() if heap else None
    meta = {**meta, "build_s": time.perf_counter() - t0}
    runs = _runs(plan, setups, built, str(shim.path) if shim else None, iterations,
                 (a.cwd, b.cwd))  # fmt: skip
    if shim is not None:
        refuse_static(runs.programs)
        meta |= {"heap_shim": shim.meta(), "heap_var": HEAP_VAR}
    if sources is not None:
        runs.sources = replace(sources, env=runs.env, var=runs.var)
    df = lanes.measure(runs, plan, meta, recording, **shown)
    if "instructions-exact" in meta.get("metrics", ()) and results.metadata(df).get("complete"):
        counted = exact_counts(plan, list(setups), built, runs.env)
        results.attach(df, {**results.metadata(df), "instructions_exact": counted})
        if recording.output is not None:
            results.save(df, recording.output)
    return df


def exact_counts(plan: ComparePlan, setups: list[Setup], built: list, env: dict[str, str]
                 ) -> list[dict[str, Any]]:  # fmt: skip
    """Each setup's A and B counted once under valgrind (compare/exact.py) in the environment
    its runs had: the base, the padding variable at the setup's size, its heap offset; the
    first setup's twice (again), so that a count that does not repeat is seen, and once with a
    page more of environment through a path 200 bytes longer (moved): how far start-up alone
    moves a count here."""
    counted = []
    for i, (setup, sides) in enumerate(zip(setups, built, strict=True)):
        setting = dict(env)
        if setup.env_size != NO_PADDING:
            setting[plan.var] = "a" * setup.env_size
        if setup.heap_offset != NO_PADDING:
            setting[HEAP_VAR] = f"{setup.heap_offset:0{HEAP_DIGITS}d}"
        for side, (argv, _) in zip("AB", sides, strict=True):
            n, scope = exact.count(argv, setting, plan.timeout)
            again = moved = None
            if i == 0:  # does it repeat, and how far does a page more of environment move it
                again = exact.count(argv, setting, plan.timeout).instructions
                more = {**setting, plan.var: setting.get(plan.var, "") + "a" * 4096}
                moved = exact.count(argv, more, plan.timeout, moved=True).instructions
            counted.append({"setup": setup.index, "side": side, "instructions": n,
                            "again": again, "moved": moved, "scope": scope})  # fmt: skip
    return counted


def _b_first(seed: int, setup: int, repeat: int) -> np.ndarray:
    """Which of a setup's pairs run B first: half of them (a drawn side gets the odd one),
    which half drawn from the seed. A fixed alternation, in step with the runs, let a periodic
    disturbance of the host lean neighbouring setups alike: B/A of consecutive A/A setups of
    brotli correlated at 0.24 here, and the interval, which takes setups as independent,
    excluded 1 in 4 of 40 comparisons at 95 %."""
    rng = np.random.default_rng((seed, len(RANDOMIZE), setup))
    b_first = np.arange(repeat) < repeat // 2 + repeat % 2 * int(rng.integers(0, 2))
    return rng.permutation(b_first)


def _runs(
    plan: ComparePlan,
    setups: dict[Setup, int],
    built: list,
    shim: str | None = None,
    iterations: int | None = None,
    cwds: tuple[str, str] = ("", ""),
) -> childruns.Runs:
    """A/B pairs in each setup, B first in half of them (in which half: drawn, _b_first), each
    side's program run in its directory (cwds; "": perflab's).
    Each setup's runs start under its own setting: its ASLR mode, and for a heap offset the shim
    preloaded (in every run's environment, so resume checks it) and the offset in HEAP_VAR,
    at a fixed width so that the environment's size varies with env-size alone."""
    env = childruns.base_env(plan.inherit_env, plan.var)
    if shim is not None:
        env["LD_PRELOAD"] = " ".join(filter(None, (shim, env.get("LD_PRELOAD"))))
    programs: dict[tuple[tuple[str, ...], str], int] = {}
    settings: dict[childruns.Setting, int] = {}
    prog, step = [], []
    rows: list[tuple] = []
    for (setup, repeat), sides in zip(setups.items(), built, strict=True):
        heap = (HEAP_VAR, f"{setup.heap_offset:0{HEAP_DIGITS}d}")
        setting = childruns.Setting((heap,) if setup.heap_offset != NO_PADDING else (),
                                    setup.aslr)  # fmt: skip
        b_first = _b_first(plan.seed, setup.index, repeat)
        for rep in range(repeat):
            pair = list(zip("AB", sides, strict=True))
            for side, (argv, order) in pair[::-1] if b_first[rep] else pair:
                where = cwds["AB".index(side)]
                prog.append(programs.setdefault((argv, where), len(programs)))
                step.append(settings.setdefault(setting, len(settings)))
                rows.append((setup.index, setup.placement, setup.env_size, order,
                             setup.heap_offset, setup.code_offset, setup.aslr,
                             setup.function_order, side, rep))  # fmt: skip
    names = ("setup", "placement", *LAYOUT, "side", "rep")
    text = ("link_order", "aslr", "side")
    labels = {n: np.array(col, dtype=object if n in text else np.int64)
              for n, col in zip(names, zip(*rows, strict=True), strict=True)}  # fmt: skip
    return childruns.Runs(
        programs=[argv for argv, _ in programs],
        dirs=tuple(where for _, where in programs) if any(cwds) else (),
        prog=np.array(prog, np.int64),
        labels=labels,
        key=("setup", "rep", "side"),
        sizes=labels["env_size"],
        var=plan.var,
        env=env,
        setting=np.array(step, np.int64),
        settings=tuple(settings),
        layout=labels["setup"],
        iterations=iterations or plan.iterations,
        looped=plan.iterations > 1,
        steady=plan.iterations >= MIN_ITERATIONS,
    )
