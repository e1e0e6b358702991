"""The link-order experiment of Mytkowicz et al.: link every order once, run each, explain why.

Each permutation of the object files is linked once (cached by content), its hot functions
and loops located in the symbol table, then run `repeat` times in a seeded random order under
the env-size sweep's controls. Every program's path has the same length, so with an empty
environment and ASLR off the stack starts at the same address for every order: only the code
layout differs.
"""

import hashlib
import itertools
import json
import math
import os
import re
import shlex
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

from perflab import build, journal, machine, results, runcontrol, spawn, stats
from perflab.errors import PerflabError

KEY = ("perm", "rep")
MAX_PERMUTATIONS = 5040  # 7!: beyond that, sample with --permutations N
BUILTIN_HOT = ("lo_drive", "lo_a", "lo_b", "lo_c")
MODULI = (16, 32, 64)
CHUNK_RUNS = 64  # runs between two looks at Ctrl-C and the journal
FLUSH_S = 1.0


@dataclass(frozen=True)
class Source:
    """What is permuted and how it is linked: objects, linker, and the symbols to locate."""

    objects: tuple[build.Object, ...]
    linker: build.Linker
    symbols: tuple[str, ...]
    meta: dict

    @property
    def labels(self) -> tuple[str, ...]:
        return tuple(o.label for o in self.objects)


def builtin_source(cflags: Sequence[str] = build.LINKORDER_CFLAGS, cc=None) -> Source:
    """perflab's own multi-object workload, compiled with cflags (each .o cached)."""
    cc = build.check_compiler(cc)
    objects = tuple(build.linkorder_objects(tuple(cflags), cc))
    meta = {
        "workload": "built-in link-order workload",
        "compiler": build.compiler_version(tuple(cc)),
        "cflags": " ".join(cflags),
    }
    return Source(objects, build.builtin_linker(cc), BUILTIN_HOT, meta)


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
    objs = tuple(build.Object.of(o) for o in objects)
    labels = [o.label for o in objs]
    if len(set(labels)) != len(labels):
        raise PerflabError(f"object names must be distinct on a link order: {', '.join(labels)}")
    if template is not None:
        linker = build.Linker(template=tuple(build.link_template(template)))
    else:
        linker = build.Linker(cc=tuple(build.check_compiler(cc)), ldflags=tuple(_split(ldflags)))
    meta = {
        "workload": " ".join(str(o.path) for o in objs),
        "link": " ".join(linker.template) or " ".join([*linker.cc, "{objects}", *linker.ldflags]),
    }
    return Source(objs, linker, tuple(symbols) or _functions(objs), meta)


def _split(text: str) -> list[str]:
    try:
        return shlex.split(text)
    except ValueError as exc:
        raise PerflabError(f"--ldflags {text!r}: {exc}") from None


def _nm(path, *args: str) -> list[list[str]]:
    """`nm` lines as fields (no shell); nm missing is one line saying what to install."""
    try:
        done = subprocess.run(["nm", *args, str(path)], capture_output=True, text=True, check=False)
    except FileNotFoundError:
        raise PerflabError("nm not found: install binutils") from None
    if done.returncode != 0:
        raise PerflabError(f"nm {path}: {done.stderr.strip().splitlines()[0]}")
    return [line.split() for line in done.stdout.splitlines()]


def _functions(objects: Sequence[build.Object]) -> tuple[str, ...]:
    """Every function the objects define (nm types T and t), in link-line order."""
    names: list[str] = []
    for o in objects:
        names += [f[-1] for f in _nm(o.path, "--defined-only") if f[-2] in "Tt"]
    return tuple(dict.fromkeys(names))


def orders(n: int, permutations: str | int, seed: int = 0) -> list[tuple[int, ...]]:
    """'all' orders of n objects (up to MAX_PERMUTATIONS), or N distinct ones drawn with seed,
    the order given first: the one a user would have measured without perflab."""
    total = math.factorial(n)
    if permutations == "all":
        if total > MAX_PERMUTATIONS:
            raise PerflabError(
                f"--permutations all: {n} objects have {total:,} orders, more than "
                f"{MAX_PERMUTATIONS}; sample some with --permutations N --seed S"
            )
        return list(itertools.permutations(range(n)))
    count = int(permutations)
    if count < 1:
        raise PerflabError(f"--permutations must be 'all' or at least 1, not {count}")
    if count > total:
        raise PerflabError(f"--permutations {count}: {n} objects have only {n}! = {total} orders")
    rng = np.random.default_rng(seed)
    chosen = {tuple(range(n)): None}
    while len(chosen) < count:
        chosen.setdefault(tuple(int(i) for i in rng.permutation(n)), None)
    return list(chosen)


def parse_permutations(text: str) -> str | int:
    """'all' or a positive count."""
    if text == "all":
        return "all"
    try:
        return int(text)
    except ValueError:
        raise PerflabError(f"--permutations {text!r}: expected 'all' or a number") from None


def link_all(
    source: Source,
    perms: Sequence[tuple[int, ...]],
    progress: Callable[[int], None] | None = None,
) -> list[build.Program]:
    """One program per order, linked only when the cache does not already hold it."""
    out = []
    for perm in perms:
        out.append(build.link([source.objects[i] for i in perm], source.linker))
        if progress:
            progress(1)
    return out


_BRANCH = re.compile(r"^\s*([0-9a-f]+):\s+(j\w+|loop\w*)\s+([0-9a-f]+)\s")
_INSN = re.compile(r"^\s*([0-9a-f]+):")


def _loops(path, spans: dict[str, tuple[int, int]]) -> dict[str, tuple[int, int]]:
    """(head, end) of each function's outermost loop: the lowest target of a backward jump
    inside it, and the address after the last such jump (objdump, one call per program)."""
    if not spans:
        return {}
    lo = min(s for s, _ in spans.values())
    hi = max(e for _, e in spans.values())
    try:
        done = subprocess.run(
            ["objdump", "-d", "--no-show-raw-insn", f"--start-address={lo}",
             f"--stop-address={hi}", str(path)],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
    except FileNotFoundError:
        return {}
    addrs, back = [], []
    for line in done.stdout.splitlines():
        if m := _INSN.match(line):
            addrs.append(int(m.group(1), 16))
        if (m := _BRANCH.match(line)) and int(m.group(3), 16) < int(m.group(1), 16):
            back.append((int(m.group(1), 16), int(m.group(3), 16)))
    addrs.sort()
    out = {}
    for name, (start, end) in spans.items():
        mine = [(a, t) for a, t in back if start <= t <= a < end]
        if mine:
            last = max(a for a, _ in mine)
            after = next((x for x in addrs if x > last), end)
            out[name] = (min(t for _, t in mine), after)
    return out


def layout(program: build.Program, symbols: Sequence[str]) -> pd.DataFrame:
    """Address, size and loop of each symbol in one program, and their alignments.

    Cached beside the program: its name is its content's hash, so the layout never changes.
    """
    tag = hashlib.sha256("\0".join(symbols).encode()).hexdigest()[:12]
    cached = program.path.with_name(f"{program.path.name}.layout-{tag}.json")
    if cached.exists():
        return pd.DataFrame(json.loads(cached.read_text()))
    df = _locate(program, symbols)
    results.atomic(cached, lambda t: t.write_text(json.dumps(results_records(df))))
    return df


def _locate(program: build.Program, symbols: Sequence[str]) -> pd.DataFrame:
    """layout() without the cache: nm for the symbols, objdump for their loops."""
    found: dict[str, tuple[int, int]] = {}
    for f in _nm(program.path, "-S", "--defined-only"):
        if len(f) == 4 and f[3] in symbols and f[3] not in found:
            found[f[3]] = (int(f[0], 16), int(f[1], 16))
    missing = [s for s in symbols if s not in found]
    if missing:
        raise PerflabError(f"{program.path}: no symbol {', '.join(missing)} (see --symbol)")
    spans = {s: (a, a + n) for s, (a, n) in found.items()}
    loops = _loops(program.path, spans)
    rows = []
    for s in symbols:
        addr, size = found[s]
        head, end = loops.get(s, (-1, -1))
        row = {"symbol": s, "address": addr, "size": size, "loop_head": head, "loop_end": end}
        for m in MODULI:
            row[f"mod{m}"] = addr % m
            row[f"loop_mod{m}"] = head % m if head >= 0 else -1
        for m in (32, 64):
            row[f"loop_lines{m}"] = (end - 1) // m - head // m + 1 if head >= 0 else -1
        rows.append(row)
    return pd.DataFrame(rows)


@dataclass(frozen=True)
class Plan:
    """Everything that decides which runs a sweep makes and how: a resume must match it."""

    labels: tuple[str, ...]
    digests: tuple[str, ...]
    link: str
    permutations: str | int = "all"
    seed: int = 0
    repeat: int = 20
    aslr: str = "off"
    cpus: tuple[int, ...] = ()
    order: str = "random"
    inherit_env: bool = False
    timeout: float = 10.0
    rt: bool = True
    mlock: bool = False
    args: tuple[str, ...] = ()

    def check(self) -> "Plan":
        """Refuse bad input before anything is built or measured."""
        if self.repeat < 1:
            raise PerflabError(f"--repeat must be at least 1, not {self.repeat}")
        if self.order not in ("random", "sequential"):
            raise PerflabError(f"order must be random or sequential, not {self.order!r}")
        runcontrol.check_timeout(self.timeout)
        spawn.SpawnOptions(aslr=self.aslr)
        machine.check_cpus(self.cpus)
        orders(len(self.labels), self.permutations, self.seed)
        return self

    def pairs(self, nperms: int) -> tuple[np.ndarray, np.ndarray]:
        """(perm, rep) of every run, in the order they will be made."""
        perm = np.tile(np.arange(nperms), self.repeat)
        rep = np.repeat(np.arange(self.repeat), nperms)
        if self.order == "random":
            shuffle = np.random.default_rng(self.seed).permutation(perm.size)
            perm, rep = perm[shuffle], rep[shuffle]
        return perm, rep


def counters_note() -> str:
    """What the cycles/instructions columns hold on this machine."""
    if machine.hardware_counters():
        return "cycles and instructions from perf_event (user mode)"
    return "not supported here (no perf_event hardware counters): cycles/instructions are NaN"


def sweep(
    objects: Sequence[str | os.PathLike] = (),
    *,
    cc: str | None = None,
    cflags: Sequence[str] = build.LINKORDER_CFLAGS,
    ldflags: str = "",
    template: str | None = None,
    symbols: Sequence[str] = (),
    args: Sequence[str] = (),
    permutations: str | int = "all",
    seed: int = 0,
    repeat: int = 20,
    aslr: str = "off",
    cpus: Sequence[int] | None = None,
    order: str = "random",
    inherit_env: bool = False,
    timeout: float = 10.0,
    rt: bool = True,
    mlock: bool = False,
    output: str | os.PathLike | None = None,
    resume: bool = False,
    discard_bad: bool = False,
    on_build: Callable[[int], Callable[[int], None] | None] | None = None,
    on_start: Callable[[int, int], None] | None = None,
    progress: Callable[[int], None] | None = None,
    warn: Callable[[str], None] = runcontrol.warn_stderr,
) -> pd.DataFrame:
    """Link every chosen order once, run each `repeat` times, return the tidy frame.

    Its metadata holds the per-program layout ('layout': symbol addresses and alignments) and
    the build/run times. on_build(n) returns a per-program callback for the link progress.
    """
    if output is not None:
        results.check_output(output)
    if resume and output is None:
        raise PerflabError("resume needs the output file of the interrupted sweep")
    orders(len(objects) or len(build.LINKORDER_SOURCES), permutations, seed)  # before building
    t0 = time.perf_counter()
    if objects:
        source = user_source(objects, cc, ldflags, template, symbols)
    else:
        source = builtin_source(tuple(cflags), cc)
        source = Source(source.objects, source.linker, tuple(symbols) or BUILTIN_HOT, source.meta)
    plan = Plan(
        labels=source.labels,
        digests=tuple(o.digest for o in source.objects),
        link=source.linker.key().replace("\0", " "),
        permutations=permutations,
        seed=seed,
        repeat=repeat,
        aslr=aslr,
        cpus=tuple(cpus) if cpus is not None else runcontrol.default_cpus(),
        order=order,
        inherit_env=inherit_env,
        timeout=timeout,
        rt=rt,
        mlock=mlock,
        args=tuple(args),
    ).check()
    perms = orders(len(source.objects), permutations, seed)
    links_before = build.BUILDS["link"]
    programs = link_all(source, perms, on_build(len(perms)) if on_build else None)
    build_s = time.perf_counter() - t0
    lay = pd.concat(
        [layout(p, source.symbols).assign(perm=i, link_order=",".join(p.order))
         for i, p in enumerate(programs)],
        ignore_index=True,
    )  # fmt: skip
    layout_s = time.perf_counter() - t0 - build_s
    meta = {
        **machine.metadata(),
        **run_conditions(plan),
        **source.meta,
        "objects": list(source.labels),
        "symbols": list(source.symbols),
        "hardware_counters": counters_note(),
        "links": build.BUILDS["link"] - links_before,
        "build_s": build_s,
        "layout_s": layout_s,
        "layout": results_records(lay),
    }
    t1 = time.perf_counter()
    df = _measure(plan, programs, meta, (output, resume, discard_bad), on_start, progress, warn)
    df.attrs.setdefault("perflab", {})["run_s"] = time.perf_counter() - t1
    return df


def results_records(df: pd.DataFrame) -> list[dict]:
    """A frame as plain-Python records (JSON metadata)."""
    return [{k: (v.item() if hasattr(v, "item") else v) for k, v in r.items()}
            for r in df.to_dict(orient="records")]  # fmt: skip


def run_conditions(plan: Plan) -> dict:
    """The run conditions every result of this sweep records next to machine.metadata()."""
    return {
        "experiment": "link-order",
        "aslr": plan.aslr,
        "cpus": list(plan.cpus),
        "order": plan.order,
        "seed": plan.seed,
        "permutations": plan.permutations,
        "repeat": plan.repeat,
        "inherit_env": plan.inherit_env,
        "rt_requested": plan.rt,
        "mlock": plan.mlock,
        "timeout_s": plan.timeout,
        "args": list(plan.args),
    }


def _options(plan: Plan, devnull: int) -> spawn.SpawnOptions:
    return spawn.SpawnOptions(
        aslr=plan.aslr,
        cpus=plan.cpus,
        rt=plan.rt,
        mlock=plan.mlock,
        timeout=plan.timeout,
        stdin=devnull,
        stdout=devnull,
        stderr=devnull,
    )


def _measure(plan, programs, meta, recording, on_start, progress, warn) -> pd.DataFrame:
    """Preflight every program, then the planned runs in chunks, journaled as they end."""
    output, resume, discard_bad = recording
    devnull = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
    try:
        options = _options(plan, devnull)
        env = dict(os.environ) if plan.inherit_env else None
        argvs = [(str(p.path), *plan.args) for p in programs]
        for argv in argvs:
            _preflight(argv, env, options)
        overhead = spawn.timer_overhead()
        planned = plan.pairs(len(programs))
        expect = runcontrol.run_expect(KEY, planned, _columns())
        recorder = (
            journal.Journal(output, asdict(plan), meta, KEY, resume, expect=expect,
                            discard_bad=discard_bad, warn=warn)
            if output
            else None
        )  # fmt: skip
        done = recorder.done_keys() if recorder else set()
        perm, rep = planned
        if done:
            keep = np.array([(int(p), int(r)) not in done for p, r in zip(perm, rep, strict=True)])
            perm, rep = perm[keep], rep[keep]
        if on_start:
            on_start(int(perm.size), len(done))
        labels = [",".join(p.order) for p in programs]
        extra = {"timer_overhead_ticks": overhead, "rt_granted": plan.rt}
        engine = spawn.engine()
        frames, complete = [], False
        with runcontrol.Interrupt() as stop, runcontrol.away_from(plan.cpus):
            try:
                flushed = time.monotonic()
                buffer = []
                for start in range(0, perm.size, CHUNK_RUNS):
                    chunk = slice(start, start + CHUNK_RUNS)
                    runs = spawn.run_batch(argvs, perm[chunk], None, "A", env, options, engine)
                    done = slice(start, start + len(runs))  # shorter when a stop cut it
                    options = runcontrol.rt_refused_once(options, runs, extra, warn)
                    buffer.append(_rows(runs, perm[done], rep[done], labels, overhead))
                    if time.monotonic() - flushed >= FLUSH_S or start + CHUNK_RUNS >= perm.size:
                        _flush(buffer, recorder, frames)
                        flushed = time.monotonic()
                    if progress:
                        progress(len(runs))
                    if stop.hit:
                        raise KeyboardInterrupt
                complete = True
            finally:
                extra.update(spawn.maxrss_meta(engine))
                try:
                    _flush(buffer, recorder, frames)
                finally:
                    if recorder:
                        df = recorder.finish(complete=complete, extra_meta=extra)
                        complete = results.metadata(df)["complete"]  # verified, not assumed
                    else:
                        df = pd.concat(frames, ignore_index=True) if frames else _empty()
    finally:
        os.close(devnull)
    df["link_order"] = df["link_order"].astype(str)
    checked = {k: v for k, v in results.metadata(df).items() if k == "incomplete"}
    final = {**meta, **extra, "params": asdict(plan), "complete": complete, **checked}
    return results.attach(df, final)


def _columns() -> list[str]:
    """The columns of a run row, in order: the key, then what spawn.tidy makes of a run."""
    return ["link_order", *KEY, *spawn.tidy(np.zeros(0, dtype=spawn.RUN_DTYPE)).columns]


def _empty() -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype=object) for c in _columns()})


def _flush(buffer: list, recorder, frames: list) -> None:
    if not buffer:
        return
    frame = pd.concat(buffer, ignore_index=True)
    buffer.clear()
    if recorder:
        recorder.extend_frame(frame)
    else:
        frames.append(frame)


def _preflight(argv, env, options) -> None:
    """One unrecorded run per program: one that cannot start stops here, nothing saved."""
    run = spawn.run(argv, env, options)
    status = spawn.STATUS[int(run["status"])]
    if status in ("exec_failed", "setup_failed", "spawn_failed"):
        why = spawn.describe_errno(int(run["child_errno"]))
        raise PerflabError(f"cannot run {argv[0]}: {status.replace('_', ' ')}, {why}")


def _rows(runs, perm, rep, labels, overhead) -> pd.DataFrame:
    df = spawn.tidy(runs, overhead)
    df.insert(0, "rep", rep.astype(np.int32))
    df.insert(0, "perm", perm.astype(np.int32))
    df.insert(0, "link_order", [labels[p] for p in perm])
    return df


def value_column(df: pd.DataFrame) -> str:
    """The probe's ticks when the program has a probe, else the parent's ticks around the run."""
    return "ticks" if df["ticks"].notna().any() else "outer_ticks"


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
    ratio, lo, hi = stats.ratio_ci(a, b)
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
    path: str | os.PathLike,
    summary: pd.DataFrame | None = None,
    effects: pd.DataFrame | None = None,
    value: str | None = None,
):
    """Each order's runs as a box, sorted by median, coloured by the best alignment feature."""
    from matplotlib.patches import Patch

    from perflab import plot as plt

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
    # One preempted run 3x the rest must not flatten 24 boxes: stop at the largest p95.
    top = max(np.percentile(d, 95) for d in data if d.size) * 1.08
    ax.set_ylim(min(d.min() for d in data if d.size) * 0.97, top)
    off = sum(int((d > top).sum()) for d in data)
    if off:
        handles.append(Patch(color="white", label=f"{off} slow runs off the top"))
    ax.set_xticks(range(1, len(data) + 1), summary["link_order"], rotation=90, fontsize=7)
    ax.set_xlabel("link order (sorted by median)")
    ax.set_ylabel(f"{value} per run")
    if handles:
        ax.legend(handles=handles, loc="upper left", fontsize=8, ncol=2)
    meta = results.metadata(df)
    title = (f"Link order vs {value}: {len(data)} orders, ASLR {meta.get('aslr', '?')}"
             f"{title_feat}")  # fmt: skip
    return plt.save(fig, path, title=title)
