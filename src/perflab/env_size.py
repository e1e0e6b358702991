"""The environment-size experiment of Mytkowicz et al.: plan, run, summarise, find windows, plot.

A program runs with an environment holding only VAR= padded by 0..N characters (as in
DjiBee's script), each size many times, in a seeded random order; each run is one row.
"""

import os
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np
import pandas as pd

from perflab import build, journal, machine, results, runcontrol, spawn
from perflab.errors import PerflabError

KEY = ("env_size", "rep")
COLUMNS = [
    "env_size",
    "rep",
    "ticks",
    "outer_ticks",
    "wall_ns",
    "utime_ns",
    "stime_ns",
    "maxrss_kb",
    "minflt",
    "majflt",
    "nvcsw",
    "nivcsw",
    "cycles",
    "instructions",
    "exit_code",
    "signal",
    "status",
    "child_errno",
    "strays",
]
MAX_ARG_STRLEN = 32 * 4096  # the kernel's limit on one argv or environment string
CHUNK_RUNS = 512  # ~0.3 s of runs per C call; a stop ends the batch between two runs
FLUSH_S = 1.0  # rows reach the disk at least this often: a kill -9 loses about a second


@dataclass(frozen=True)
class Plan:
    """Everything that decides which runs a sweep makes and how: a resume must match it."""

    program: tuple[str, ...] = ()
    min_size: int = 0
    max_size: int = 8192
    step: int = 1
    repeat: int = 100
    var: str = "A"
    aslr: str = "off"
    cpus: tuple[int, ...] = ()
    order: str = "random"
    seed: int = 0
    inherit_env: bool = False
    opt: str = build.DEFAULT_OPT
    timeout: float = 10.0
    rt: bool = True
    mlock: bool = False
    workload_digest: str = field(default="", compare=False)

    def check(self) -> "Plan":
        """Refuse bad input before anything is measured."""
        if self.min_size < 0 or self.max_size < 0:
            raise PerflabError(f"sizes must not be negative ({self.min_size}..{self.max_size})")
        if self.min_size > self.max_size:
            raise PerflabError(f"--min {self.min_size} is greater than --max {self.max_size}")
        longest = MAX_ARG_STRLEN - len(self.var) - 2  # "VAR=" and the NUL count too
        if self.max_size > longest:
            raise PerflabError(
                f"--max {self.max_size}: Linux takes environment strings of at most "
                f"{MAX_ARG_STRLEN} bytes (MAX_ARG_STRLEN), so at most {longest} bytes of padding"
            )
        if self.step < 1:
            raise PerflabError(f"--step must be at least 1, not {self.step}")
        if self.repeat < 1:
            raise PerflabError(f"--repeat must be at least 1, not {self.repeat}")
        if self.order not in ("random", "sequential"):
            raise PerflabError(f"order must be random or sequential, not {self.order!r}")
        if not self.var or "=" in self.var or "\0" in self.var:
            raise PerflabError(f"invalid environment variable name {self.var!r}")
        runcontrol.check_timeout(self.timeout)
        spawn.SpawnOptions(aslr=self.aslr)
        machine.check_cpus(self.cpus)
        return self

    def sizes(self) -> np.ndarray:
        """The env sizes swept, min..max inclusive."""
        return np.arange(self.min_size, self.max_size + 1, self.step, dtype=np.int64)

    def pairs(self) -> tuple[np.ndarray, np.ndarray]:
        """(env_size, rep) of every run, in the order they will be made."""
        sizes = self.sizes()
        size = np.tile(sizes, self.repeat)
        rep = np.repeat(np.arange(self.repeat, dtype=np.int64), sizes.size)
        if self.order == "random":
            perm = np.random.default_rng(self.seed).permutation(size.size)
            size, rep = size[perm], rep[perm]
        return size, rep

    def params(self) -> dict:
        """The plan as the journal stores it."""
        return asdict(self)


def resolve_program(program: Sequence[str], opt: str) -> tuple[tuple[str, ...], dict]:
    """The argv to run and what the metadata says about it: the built-in loop when none given."""
    if program:
        path = spawn.check_program(program[0])
        return (path, *program[1:]), {"workload": path}
    workload = build.mytkowicz(opt)
    return (str(workload.path),), workload.meta() | {"opt": f"-O{opt}"}


def _base_env(inherit: bool, var: str) -> dict[str, str]:
    """The environment padded: empty (the post's `env -i`) or ours, minus the padding variable."""
    if not inherit:
        return {}
    return {k: v for k, v in os.environ.items() if k != var}


def sweep(
    program: Sequence[str] = (),
    *,
    min_size: int = 0,
    max_size: int = 8192,
    step: int = 1,
    repeat: int = 100,
    var: str = "A",
    aslr: str = "off",
    cpus: Sequence[int] | None = None,
    order: str = "random",
    seed: int = 0,
    inherit_env: bool = False,
    opt: str = build.DEFAULT_OPT,
    timeout: float = 10.0,
    rt: bool = True,
    mlock: bool = False,
    output: str | os.PathLike | None = None,
    resume: bool = False,
    discard_bad: bool = False,
    progress: Callable[[int], None] | None = None,
    on_start: Callable[[int, int], None] | None = None,
    warn: Callable[[str], None] = runcontrol.warn_stderr,
) -> pd.DataFrame:
    """Run the env-size sweep and return its tidy frame (also journaled to `output` if given).

    progress(n) is called after each chunk of n runs; on_start(todo, done) once before.
    A KeyboardInterrupt leaves `output` complete up to the last run and marked incomplete;
    discard_bad drops damaged journal chunks on resume (their runs are measured again).
    """
    plan = Plan(
        program=tuple(program),
        min_size=min_size,
        max_size=max_size,
        step=step,
        repeat=repeat,
        var=var,
        aslr=aslr,
        cpus=tuple(cpus) if cpus is not None else runcontrol.default_cpus(),
        order=order,
        seed=seed,
        inherit_env=inherit_env,
        opt=opt,
        timeout=timeout,
        rt=rt,
        mlock=mlock,
    ).check()
    if output is not None:
        results.check_output(output)
    argv, workload_meta = resolve_program(plan.program, plan.opt)
    plan = replace(plan, workload_digest=workload_meta.get("workload_digest", ""))
    meta = {**machine.metadata(), **run_conditions(plan), **workload_meta}
    devnull = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
    try:
        recording = (output, resume, discard_bad)
        return _measure(plan, argv, meta, recording, devnull, progress, on_start, warn)
    finally:
        os.close(devnull)


def _measure(plan, argv, meta, recording, devnull, progress, on_start, warn) -> pd.DataFrame:
    """The sweep proper: warm-up check, then chunks of runs in C, each journaled as it ends."""
    # The child's stdio on /dev/null: 800 000 runs must not print 800 000 lines.
    options = spawn.SpawnOptions(
        aslr=plan.aslr,
        cpus=plan.cpus,
        rt=plan.rt,
        mlock=plan.mlock,
        timeout=plan.timeout,
        stdin=devnull,
        stdout=devnull,
        stderr=devnull,
    )
    base_env = _base_env(plan.inherit_env, plan.var)
    _preflight(argv, plan, base_env, options)
    overhead = spawn.timer_overhead()
    recorder = _Recorder(*recording, plan, meta, overhead, warn)
    size, rep = _missing(plan, recorder.done_keys())
    if on_start:
        on_start(int(size.size), plan.sizes().size * plan.repeat - int(size.size))
    extra = {"timer_overhead_ticks": overhead, "rt_granted": plan.rt}
    engine = spawn.engine()
    chunks = [slice(i, i + CHUNK_RUNS) for i in range(0, size.size, CHUNK_RUNS)]
    complete = False
    # C runs chunk i+1 on a worker thread (cffi drops the GIL) while this thread journals
    # chunk i, so Python's tidy/journal work costs no time per run.
    with (
        runcontrol.Interrupt() as stop,
        runcontrol.away_from(plan.cpus),
        ThreadPoolExecutor(1) as pool,
    ):

        def submit(chunk: slice):
            return pool.submit(
                spawn.run_env_sizes, argv, size[chunk], plan.var, base_env, options, engine
            )

        try:
            pending = submit(chunks[0]) if chunks else None
            for i, chunk in enumerate(chunks):
                runs = pending.result()  # fewer than the chunk when a stop cut it short
                stopping = stop.hit  # read once: a chunk submitted below is always collected
                if not stopping and i + 1 < len(chunks):
                    pending = submit(chunks[i + 1])
                options = runcontrol.rt_refused_once(options, runs, extra, warn)
                recorder.add(runs, rep[chunk][: len(runs)])
                if progress:
                    progress(len(runs))
                if stopping:
                    raise KeyboardInterrupt
            complete = True
        finally:
            extra.update(spawn.maxrss_meta(engine))
            df = recorder.finish(complete, extra)
    return df


def _preflight(argv, plan: Plan, base_env: dict, options: spawn.SpawnOptions) -> None:
    """One unrecorded run first: a program that cannot start at all stops here, nothing saved.

    It also brings the binary into the page cache, so the first recorded run is not a cold one.
    """
    run = spawn.run_env_sizes(argv, np.array([plan.min_size]), plan.var, base_env, options)[0]
    status = spawn.STATUS[int(run["status"])]
    if status in ("exec_failed", "setup_failed", "spawn_failed"):
        why = spawn.describe_errno(int(run["child_errno"]))
        raise PerflabError(f"cannot run {argv[0]}: {status.replace('_', ' ')}, {why}")


def _missing(plan: Plan, done: set[tuple]) -> tuple[np.ndarray, np.ndarray]:
    """The planned (env_size, rep) pairs not yet measured, in plan order."""
    size, rep = plan.pairs()
    if not done:
        return size, rep
    stride = plan.repeat
    have = np.array([int(s) * stride + int(r) for s, r in done], dtype=np.int64)
    keep = ~np.isin(size * stride + rep, have)
    return size[keep], rep[keep]


def _rows(runs: np.ndarray, rep: np.ndarray, overhead: int) -> pd.DataFrame:
    """One chunk's runs as tidy rows in COLUMNS order."""
    df = spawn.tidy(runs, overhead)
    df.insert(0, "rep", rep.astype(np.int32))
    df.insert(0, "env_size", runs["env_size"].astype(np.int32))
    return df[COLUMNS]


def run_conditions(plan: Plan) -> dict:
    """The run conditions every result of this sweep records next to machine.metadata()."""
    return {
        "experiment": "env-size",
        "aslr": plan.aslr,
        "cpus": list(plan.cpus),
        "order": plan.order,
        "seed": plan.seed,
        "env_var": plan.var,
        "inherit_env": plan.inherit_env,
        "rt_requested": plan.rt,
        "mlock": plan.mlock,
        "timeout_s": plan.timeout,
        "program": list(plan.program) or "built-in mytkowicz loop",
    }


class _Recorder:
    """Buffers run records and writes them as one tidy chunk per FLUSH_S (or keeps them)."""

    def __init__(self, output, resume, discard_bad, plan: Plan, meta: dict, overhead: int, warn):
        if output is None and resume:
            raise PerflabError("resume needs the output file of the interrupted sweep")
        self.meta, self.params, self.overhead = meta, plan.params(), overhead
        expect = runcontrol.run_expect(KEY, plan.pairs(), COLUMNS)
        self.journal = (
            journal.Journal(output, self.params, meta, KEY, resume, expect=expect,
                            discard_bad=discard_bad, warn=warn)
            if output is not None
            else None
        )  # fmt: skip
        self.frames: list[pd.DataFrame] = []
        self.buffer: list[tuple[np.ndarray, np.ndarray]] = []
        self.flushed = time.monotonic()

    def done_keys(self) -> set[tuple]:
        return self.journal.done_keys() if self.journal else set()

    def add(self, runs: np.ndarray, rep: np.ndarray) -> None:
        self.buffer.append((runs, rep))
        if time.monotonic() - self.flushed >= FLUSH_S:
            self.flush()

    def flush(self) -> None:
        self.flushed = time.monotonic()
        if not self.buffer:
            return
        runs = np.concatenate([b[0] for b in self.buffer])
        rep = np.concatenate([b[1] for b in self.buffer])
        self.buffer = []
        frame = _rows(runs, rep, self.overhead)
        if self.journal:
            self.journal.extend_frame(frame)
        else:
            self.frames.append(frame)

    def finish(self, complete: bool, extra: dict) -> pd.DataFrame:
        if self.journal:
            try:
                self.flush()
            finally:
                df = self.journal.finish(complete=complete, extra_meta=extra)
            return df  # its metadata says whether every planned run is there, verified
        self.flush()
        df = (
            pd.concat(self.frames, ignore_index=True)
            if self.frames
            else pd.DataFrame(columns=COLUMNS)
        )
        meta = {**self.meta, **extra, "params": self.params, "complete": complete}
        return results.attach(df, meta)


def campaign_points(min_size: int, max_size: int, step: int, block: int = 64) -> list[dict]:
    """The sweep cut into blocks of `block` sizes: what a campaign hands to a host at a time."""
    Plan(min_size=min_size, max_size=max_size, step=step).check()
    starts = range(min_size, max_size + 1, step * block)
    return [{"env_size_from": int(a)} for a in starts]


def sweep_block(env_size_from: int, *, max_size: int, step: int, block: int = 64, **options):
    """One block of a campaign's sweep, measured on the host that runs it, kept in memory."""
    upto = min(max_size, env_size_from + (block - 1) * step)
    return sweep(min_size=env_size_from, max_size=upto, step=step, output=None, **options)


def value_column(df: pd.DataFrame) -> str:
    """The probe's ticks when the program has a probe, else the parent's ticks around the run."""
    return "ticks" if df["ticks"].notna().any() else "outer_ticks"


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


def status_counts(df: pd.DataFrame) -> dict[str, int]:
    """How many runs ended in each status, 'ok' first."""
    counts = df["status"].value_counts()
    counts = counts[counts > 0]
    return {str(s): int(counts[s]) for s in sorted(counts.index, key=lambda s: (s != "ok", s))}


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
    min_excess: float = 0.02,
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
    path: str | os.PathLike,
    windows: pd.DataFrame | None = None,
    zoom: tuple[int, int] | None = None,
    value: str | None = None,
    summary: pd.DataFrame | None = None,
) -> Path:
    """Mean (red) and median (blue) ticks vs env size, windows shaded; zoom=(A, B) to look in."""
    from matplotlib.ticker import StrMethodFormatter

    from perflab import plot as plt

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
    lo, hi = zoom or (int(x.min()), int(x.max())) if len(x) else (0, 1)
    pad = max(0.5, (hi - lo) / 300)  # a 16-byte window must stay visible on an 8 KiB axis
    shown = windows[(windows["end"] >= lo) & (windows["start"] <= hi)]
    for i, w in enumerate(shown.itertuples()):
        label = f"windows (median > {windows.attrs['threshold']:,.0f})" if i == 0 else None
        ax.axvspan(w.start - pad, w.end + pad, color=plt.COLORS[2], alpha=0.3, lw=0, label=label)
        ax.annotate(
            f"{w.start}-{w.end}\n+{w.excess:.0%}",
            (w.end + pad, w.peak),
            xytext=(3, 0),
            textcoords="offset points",
            fontsize=8,
            va="top",
        )
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
        ax.plot([], [], " ", label=f"means of {clipped} sizes off the top (a few slow runs)")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=3, fontsize=8)
    meta = results.metadata(df)
    n = int(summary["n"].median()) if len(summary) else 0
    title = f"Env size vs {value}: ASLR {meta.get('aslr', '?')}, {n} runs per size"
    return plt.save(fig, path, title=title)


def _robust_ylim(ax, summary: pd.DataFrame) -> int:
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
