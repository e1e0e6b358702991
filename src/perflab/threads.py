"""Threads, topology and interference: DjiBee's core-vs-hyper-thread lab and FauxPlat/sec,
easyperf's thread-count scaling, and hog processes that perturb them.

Every worker runs in C (csrc/threads.c): pinned before it waits on a barrier, released with the
others, it times itself with CLOCK_THREAD_CPUTIME_ID, CLOCK_MONOTONIC and the TSC, and counts its
own perf events. One "loop" is 100000 iterations of a kernel, as in the post.
"""

import contextlib
import dataclasses
import errno
import os
import resource
import signal
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from perflab import counters, machine, stats
from perflab._native import check, ffi, lib
from perflab.errors import PerflabError

KERNELS = {
    "loop": lib.PERFLAB_KERNEL_LOOP,
    "stream": lib.PERFLAB_KERNEL_STREAM,
    "spin": lib.PERFLAB_KERNEL_SPIN,
}
HOGS = {"cpu": lib.PERFLAB_HOG_CPU, "cache": lib.PERFLAB_HOG_CACHE, "rt": lib.PERFLAB_HOG_RT}
LOOP_FACTOR = lib.PERFLAB_LOOP_FACTOR
POST_LOOPS = 4000  # the post's -l 4000: 10.7 s per thread on its i5-3320M
DEFAULT_LOOPS = 100
RT_LIMIT_S = 10.0
DEFAULT_STREAM_BYTES = 1 << 20
RT_PRIORITY = 10
HOG_MAX_S = 600.0
Progress = Callable[[int], None] | None


class PerflabWarning(UserWarning):
    """Something was not as asked (no permission for a priority) but the run went on."""


_warned: set[str] = set()


def _warn_once(message: str) -> None:
    if message not in _warned:
        _warned.add(message)
        warnings.warn(message, PerflabWarning, stacklevel=3)


# ---- workers -----------------------------------------------------------------------------


def _kernel(name: str) -> int:
    if name not in KERNELS:
        raise PerflabError(f"unknown kernel {name!r}; use one of {', '.join(KERNELS)}")
    return KERNELS[name]


def check_placement(cpus: Sequence[int | None], oversubscribe: bool = False) -> None:
    """Refuse absent, offline or disallowed CPUs, and more threads than usable CPUs unless
    asked for."""
    machine.check_cpus([c for c in cpus if c is not None])
    usable = machine.usable_cpus()
    if len(cpus) > len(usable) and not oversubscribe:
        raise PerflabError(
            f"{len(cpus)} threads on {len(usable)} usable CPUs: add --oversubscribe to run "
            "more threads than CPUs"
        )


def run_threads(
    cpus: Sequence[int | None],
    loops: int | Sequence[int],
    kernel: str = "loop",
    size: int = DEFAULT_STREAM_BYTES,
    nice: int = 0,
    rt: bool = False,
    events: Sequence[str] | None = None,
    rt_limit: float = RT_LIMIT_S,
) -> pd.DataFrame:
    """Run one worker per entry of cpus (None: scheduler's choice), together; one row per thread.

    rt runs each worker SCHED_RR (time-sliced, like the post's pair on one CPU) under
    rt_watchdog(rt_limit)."""
    if not cpus:
        raise PerflabError("no threads to run")
    machine.check_cpus([c for c in cpus if c is not None])
    per_thread = [loops] * len(cpus) if isinstance(loops, int) else list(loops)
    if any(n < 0 for n in per_thread):
        raise PerflabError("loops must not be negative")
    if kernel == "stream" and size < 8:
        raise PerflabError(f"--size must be at least 8 bytes, not {size}")
    bits = counters.mask(events)
    n = len(cpus)
    specs = ffi.new("struct perflab_thread_spec[]", n)
    for spec, cpu, count in zip(specs, cpus, per_thread, strict=True):
        spec.kernel = _kernel(kernel)
        spec.cpu = -1 if cpu is None else cpu
        spec.loops = count
        spec.bytes = size
        spec.nice = nice
        spec.rt_priority = RT_PRIORITY if rt else 0
        spec.event_mask = bits
    out = ffi.new("struct perflab_thread_result[]", n)
    steal0 = steal_ns()
    with rt_watchdog(rt_limit) if rt else contextlib.nullcontext():
        check(lib.perflab_run_threads(specs, n, out), "run threads")
    steal1 = steal_ns()
    rows = []
    for i, (r, cpu, count) in enumerate(zip(out, cpus, per_thread, strict=True)):
        if r.sched_status:
            _sched_warning(r.sched_status, nice, rt)
        rows.append(
            {
                "thread": i,
                "cpu": -1 if cpu is None else cpu,
                "cpu_start": r.cpu_start,
                "cpu_end": r.cpu_end,
                "kernel": kernel,
                "loops": count,
                "cpu_ns": r.cpu_ns,
                "wall_ns": r.wall_ns,
                "ticks": r.ticks,
                "release_ns": r.release_ns,
                "start_ns": r.start_ns,
                "end_ns": r.end_ns,
                "retries": r.retries,
                "steal_ns": steal1.get(r.cpu_end, 0) - steal0.get(r.cpu_end, 0),
                "sched_status": _errname(r.sched_status),
                **counters.columns(r.counts, bits),
            }
        )
    return pd.DataFrame(rows)


def steal_ns() -> dict[int, int]:
    """Per-CPU steal time so far (/proc/stat, 10 ms ticks): time the hypervisor ran other guests
    on our virtual CPU, which a guest's wall clock sees and its CPU clocks do not."""
    hz = os.sysconf("SC_CLK_TCK")
    out = {}
    with open("/proc/stat") as f:
        for line in f:
            fields = line.split()
            if fields[0].startswith("cpu") and fields[0] != "cpu" and len(fields) > 8:
                out[int(fields[0][3:])] = int(fields[8]) * 1_000_000_000 // hz
    return out


def _errname(rc: int) -> str:
    return "ok" if rc == 0 else errno.errorcode.get(-rc, str(-rc))


def _sched_warning(rc: int, nice: int, rt: bool) -> None:
    what = " and ".join(filter(None, [f"nice {nice}" if nice else "", "real-time" if rt else ""]))
    _warn_once(
        f"could not set {what} priority ({os.strerror(-rc)}); running at normal priority "
        "(needs root, CAP_SYS_NICE or an RLIMIT_RTPRIO/RLIMIT_NICE allowance; or drop --nice/--rt)"
    )


def counter_status(events: Sequence[str] | None = None) -> dict[str, str]:
    """For the metadata: each event's status on this machine ('counts' or why not)."""
    table = counters.available()
    wanted = set(events or counters.EVENTS)
    return {r.event: r.status for r in table.itertuples() if r.event in wanted}


@dataclass(frozen=True)
class Priority:
    """The workers' scheduling: nice value, SCHED_RR or not, and the real-time watchdog."""

    nice: int = 0
    rt: bool = False
    rt_limit: float = RT_LIMIT_S


def _prio(priority: Priority | None) -> dict:
    return dataclasses.asdict(priority or Priority())


# ---- real-time watchdog and hogs ------------------------------------------------------------


@contextlib.contextmanager
def rt_watchdog(limit_s: float) -> Iterator[None]:
    """Bound real-time computing: past limit_s without blocking, the kernel stops perflab
    (RLIMIT_RTTIME sends SIGXCPU), so a runaway real-time worker cannot freeze the machine."""
    old = resource.getrlimit(resource.RLIMIT_RTTIME)
    soft = int(limit_s * 1e6)
    if old[1] != resource.RLIM_INFINITY:
        soft = min(soft, old[1])
    resource.setrlimit(resource.RLIMIT_RTTIME, (soft, old[1]))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_RTTIME, old)


@dataclass(frozen=True)
class Perturbation:
    """A hog kind on a CPU, as given on the command line: 'cpu@0', 'cache@1', 'rt@0'."""

    kind: str
    cpu: int

    @classmethod
    def parse(cls, text: str) -> "Perturbation":
        """Read KIND@CPU; bad kinds and CPUs are refused before anything starts."""
        kind, sep, cpu = text.partition("@")
        if kind not in HOGS or not sep or not cpu.strip().isdigit():
            raise PerflabError(
                f"bad perturbation {text!r}: use KIND@CPU with KIND one of {', '.join(HOGS)}"
            )
        machine.check_cpus([int(cpu)])
        return cls(kind, int(cpu))

    def __str__(self) -> str:
        return f"{self.kind}@{self.cpu}"


def cache_hog_bytes() -> int:
    """Twice the largest cache, so every pass of the hog evicts the measured thread's lines."""
    sizes = [machine.cache_size(name) or 0 for name in ("L3", "L2", "L1d")]
    return max(2 * max(sizes), 8 << 20)


def _start_hog(p: Perturbation, max_s: float, pids: list[int]) -> None:
    """Start one hog and record its pid in pids before anything can raise, so it is stopped."""
    pid, sched = ffi.new("int32_t *"), ffi.new("int32_t *")
    rc = lib.perflab_hog_start(
        HOGS[p.kind], p.cpu, cache_hog_bytes(), int(max_s * 1e9), RT_PRIORITY, pid, sched
    )
    check(rc, f"start {p} hog")
    pids.append(pid[0])
    if sched[0]:
        _warn_once(
            f"the {p} hog could not get real-time priority ({os.strerror(-sched[0])}); "
            "it runs as a normal CPU hog (--perturb rt needs root, CAP_SYS_NICE or RLIMIT_RTPRIO)"
        )


def _stop_hog(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)


@contextlib.contextmanager
def perturbed(perturbations: Sequence[Perturbation], max_s: float = HOG_MAX_S) -> Iterator[list]:
    """Hogs running for the duration of the block, killed and reaped on any exit (also Ctrl-C);
    each also dies with perflab (PR_SET_PDEATHSIG) and by itself after max_s."""
    pids: list[int] = []
    try:
        for p in perturbations:
            _start_hog(p, max_s, pids)
        yield pids
    finally:
        for pid in pids:
            _stop_hog(pid)


# ---- core vs hyper-thread -----------------------------------------------------------------


@dataclass(frozen=True)
class Placement:
    """Where two threads go, labelled from the topology, or why this machine has no such pair."""

    name: str
    cpus: tuple[int | None, int | None]
    label: str
    available: bool = True


def placements(topo: pd.DataFrame | None = None) -> list[Placement]:
    """The post's matrix: scheduler's choice, same CPU, hyper-thread siblings, two cores of one
    socket, two sockets; rows this topology (or the affinity mask) lacks say so."""
    scope = "not on this machine"
    if topo is None:
        topo = machine.topology()
        usable = topo["cpu"].isin(machine.usable_cpus())
        if not usable.all():
            scope = f"not among the allowed CPUs ({machine.format_cpu_list(topo['cpu'][usable])})"
        topo = topo[usable]
    rows = list(topo.itertuples())
    first = rows[0]

    def where(r) -> str:
        return f"cpu {r.cpu} (core {r.core}, socket {r.socket})"

    out = [
        Placement("scheduler", (None, None), "no pinning: the scheduler places both"),
        Placement("same cpu", (first.cpu, first.cpu), f"both on {where(first)}"),
    ]
    siblings = [(a, b) for a in rows for b in rows if a.cpu < b.cpu and a.core == b.core]
    if siblings:
        a, b = siblings[0]
        out.append(Placement("hyper-threads", (a.cpu, b.cpu), f"{where(a)} + {where(b)}"))
    else:
        out.append(
            Placement(
                "hyper-threads",
                (None, None),
                f"{scope}: no SMT, every core has one thread (thread_siblings_list)",
                False,
            )
        )
    cores = [
        (a, b)
        for a in rows
        for b in rows
        if a.cpu < b.cpu and a.socket == b.socket and a.core != b.core
    ]
    if cores:
        a, b = cores[0]
        out.append(Placement("two cores", (a.cpu, b.cpu), f"{where(a)} + {where(b)}"))
    else:
        out.append(Placement("two cores", (None, None), f"{scope}: one core per socket", False))
    sockets = [(a, b) for a in rows for b in rows if a.cpu < b.cpu and a.socket != b.socket]
    if sockets:
        a, b = sockets[0]
        out.append(Placement("two sockets", (a.cpu, b.cpu), f"{where(a)} + {where(b)}"))
    else:
        n = topo["socket"].nunique()
        out.append(Placement("two sockets", (None, None), f"{scope}: {n} socket", False))
    return out


def given_placement(cpus: Sequence[int]) -> Placement:
    """`-p A -p B` as in the post: one -p leaves the second thread to the scheduler."""
    if not 1 <= len(cpus) <= 2:
        raise PerflabError(f"give one or two -p CPUs (as the post), not {len(cpus)}")
    machine.check_cpus(cpus)
    pair = (cpus[0], cpus[1] if len(cpus) > 1 else None)
    return Placement("given", pair, " + ".join("free" if c is None else f"cpu {c}" for c in pair))


def core_vs_ht(
    loops: int = DEFAULT_LOOPS,
    cpus: Sequence[int] = (),
    repeat: int = 1,
    priority: Priority | None = None,
    perturb: Sequence[Perturbation] = (),
    progress: Progress = None,
) -> pd.DataFrame:
    """cputime_core_vs_ht: 1 thread then 2 together, per placement; one row per thread run."""
    if loops < 1 or repeat < 1:
        raise PerflabError("--loops and --repeat must be at least 1")
    plan = [given_placement(cpus)] if cpus else placements()
    rows = []
    with perturbed(perturb):
        for rep in range(repeat):
            for p in plan:
                if not p.available:
                    if rep == 0:
                        rows.append(_absent_row(p))
                    continue
                for n in (1, 2):
                    df = run_threads(list(p.cpus[:n]), loops, **_prio(priority))
                    df.insert(0, "placement", p.name)
                    df.insert(1, "label", p.label)
                    df.insert(2, "threads", n)
                    df.insert(3, "rep", rep)
                    df["status"] = "ok"
                    rows.extend(df.to_dict(orient="records"))
                if progress:
                    progress(1)
    return pd.DataFrame(rows)


def _absent_row(p: Placement) -> dict:
    return {"placement": p.name, "label": p.label, "threads": 2, "rep": 0, "status": "unavailable"}


def post_lines(df: pd.DataFrame, loops: int) -> list[tuple[str, str]]:
    """The post's output, (placement, line) per run: cpu time summed, elapsed time averaged."""
    lines = []
    ok = df[df["status"] == "ok"]
    for (name, _, n), g in ok.groupby(["placement", "rep", "threads"], sort=False):
        cpu_ms = g["cpu_ns"].sum() / 1e6
        wall_ms = g["wall_ns"].mean() / 1e6
        lines.append(
            (
                name,
                f"ran {n} x {loops} loops({LOOP_FACTOR}), cpu time {cpu_ms:.2f}(ms) "
                f"elapsed time {wall_ms:.2f}(ms)",
            )
        )
    return lines


def core_vs_ht_summary(df: pd.DataFrame) -> pd.DataFrame:
    """Per placement: median 1- and 2-thread CPU and wall times and their 2/1 ratios."""
    rows = []
    for name, g in df.groupby("placement", sort=False):
        label = g["label"].iloc[0]
        if (g["status"] != "ok").all():
            rows.append({"placement": name, "cpus": label})
            continue
        per_run = (
            g.groupby(["rep", "threads"])
            .agg(
                cpu_ns=("cpu_ns", "sum"), wall_ns=("wall_ns", "mean"), steal_ns=("steal_ns", "max")
            )
            .groupby("threads")
            .median()
        )
        one, two = per_run.loc[1], per_run.loc[2]
        rows.append(
            {
                "placement": name,
                "cpus": label,
                "cpu_ms_1": one.cpu_ns / 1e6,
                "wall_ms_1": one.wall_ns / 1e6,
                "cpu_ms_2": two.cpu_ns / 1e6,
                "wall_ms_2": two.wall_ns / 1e6,
                "cpu_ratio": two.cpu_ns / one.cpu_ns,
                "wall_ratio": two.wall_ns / one.wall_ns,
                "steal_ms_2": two.steal_ns / 1e6,
            }
        )
    return pd.DataFrame(rows)


def plot_core_vs_ht(summary: pd.DataFrame, path, loops: int) -> None:
    """Bars of CPU and wall time with 1 and 2 threads per placement; absent ones marked."""
    from perflab import plot as plt

    fig, ax = plt.figure(figsize=(9, 5))
    x = np.arange(len(summary))
    width = 0.2
    bars = [
        ("cpu_ms_1", "CPU time, 1 thread"),
        ("wall_ms_1", "wall time, 1 thread"),
        ("cpu_ms_2", "CPU time, 2 threads (sum)"),
        ("wall_ms_2", "wall time, 2 threads (mean)"),
    ]
    for i, (col, name) in enumerate(bars):
        values = summary[col] if col in summary else pd.Series(np.nan, index=summary.index)
        ax.bar(x + (i - 1.5) * width, values.fillna(0), width, label=name)
    top = np.nanmax(summary[[c for c, _ in bars if c in summary]].to_numpy(dtype=float))
    for i, row in enumerate(summary.itertuples()):
        if pd.isna(getattr(row, "cpu_ms_1", np.nan)):
            ax.text(i, top * 0.05, "not on\nthis machine", ha="center", va="bottom", fontsize=8)
    ax.set_xticks(x, summary["placement"])
    ax.set_ylabel("time (ms)")
    ax.legend(loc="upper left")
    plt.save(fig, path, title=f"core vs hyper-thread: {loops} loops({LOOP_FACTOR}) per thread")


# ---- thread-count scaling -------------------------------------------------------------------


def split(total: int, n: int) -> list[int]:
    """Total loops shared among n threads as evenly as whole loops allow (strong scaling)."""
    return [total // n + (1 if i < total % n else 0) for i in range(n)]


def sweep_threads(
    max_threads: int,
    kernel: str = "loop",
    loops: int = DEFAULT_LOOPS,
    size: int = DEFAULT_STREAM_BYTES,
    repeat: int = 3,
    pin: bool = True,
    oversubscribe: bool = False,
    priority: Priority | None = None,
    perturb: Sequence[Perturbation] = (),
    progress: Progress = None,
) -> pd.DataFrame:
    """Fixed total work split over 1..max_threads threads (pinned round-robin over the usable
    CPUs unless pin=False), interleaved repeats; one row per thread run."""
    _kernel(kernel)
    if max_threads < 1 or loops < 1 or repeat < 1:
        raise PerflabError("--max, --loops and --repeat must be at least 1")
    usable = machine.usable_cpus()
    check_placement([None] * max_threads, oversubscribe)
    if loops < max_threads:
        raise PerflabError(f"--loops {loops} cannot be shared among {max_threads} threads")
    rows = []
    with perturbed(perturb):
        for rep in range(repeat):
            for n in range(1, max_threads + 1):
                cpus = [usable[i % len(usable)] if pin else None for i in range(n)]
                df = run_threads(cpus, split(loops, n), kernel, size, **_prio(priority))
                df.insert(0, "threads", n)
                df.insert(1, "rep", rep)
                df["bytes"] = size if kernel == "stream" else 0
                df["status"] = "ok"
                rows.extend(df.to_dict(orient="records"))
                if progress:
                    progress(1)
    return pd.DataFrame(rows)


def scaling(df: pd.DataFrame) -> pd.DataFrame:
    """easyperf's views per thread count: throughput, speedup, efficiency, CPU utilisation,
    instructions and IPC (NaN where the counters do not count)."""
    runs = df.groupby(["threads", "rep"]).agg(
        loops=("loops", "sum"),
        start=("release_ns", "min"),
        end=("end_ns", "max"),
        cpu_ns=("cpu_ns", "sum"),
        retries=("retries", "sum"),
        instructions=("instructions", lambda s: s.sum(min_count=len(s))),
        cycles=("cycles", lambda s: s.sum(min_count=len(s))),
        context_switches=("context_switches", "sum"),
    )
    runs["wall_ns"] = runs["end"] - runs["start"]
    per_n = runs.groupby("threads").median()
    base = per_n["wall_ns"].iloc[0]
    threads = per_n.index.to_numpy()
    out = pd.DataFrame(
        {
            "threads": threads,
            "wall_ms": per_n["wall_ns"].to_numpy() / 1e6,
            "cpu_ms": per_n["cpu_ns"].to_numpy() / 1e6,
            "loops_per_s": (per_n["loops"] / (per_n["wall_ns"] / 1e9)).to_numpy(),
            "speedup": (base / per_n["wall_ns"]).to_numpy(),
        }
    )
    out["efficiency"] = out["speedup"] / out["threads"]
    out["utilisation"] = per_n["cpu_ns"].to_numpy() / per_n["wall_ns"].to_numpy()
    out["instructions"] = per_n["instructions"].to_numpy()
    out["ipc"] = (per_n["instructions"] / per_n["cycles"]).to_numpy()
    out["cas_retries"] = per_n["retries"].to_numpy()
    # easyperf's "36 % more instructions" as spinning, counted without a PMU: failed CAS per
    # increment done.
    out["retry_pct"] = (per_n["retries"] / (per_n["loops"] * LOOP_FACTOR) * 100).to_numpy()
    out["context_switches"] = per_n["context_switches"].to_numpy()
    return out


def plot_scaling(table: pd.DataFrame, path, kernel: str) -> None:
    """Speedup and CPU utilisation vs threads against the ideal line, efficiency below."""
    from perflab import plot as plt

    fig, (ax, ax2) = plt.figure(2, 1, figsize=(8, 7), sharex=True)
    n = table["threads"]
    ax.plot(n, n, ":", color="#555555", label="ideal")
    ax.plot(n, table["speedup"], "o-", label="speedup (wall 1 / wall N)")
    ax.plot(n, table["utilisation"], "s-", label="CPU utilisation (CPU time / wall)")
    ax.set_ylabel("relative to 1 thread / busy threads")
    ax.legend(loc="upper left")
    ax2.plot(n, table["efficiency"] * 100, "o-", color=plt.COLORS[2])
    ax2.set_ylabel("parallel efficiency (%)")
    ax2.set_xlabel("threads")
    ax2.set_xticks(n)
    plt.save(fig, path, title=f"thread scaling, {kernel} kernel")


# ---- FauxPlat/sec -----------------------------------------------------------------------------


def fauxplat(
    loops: int = DEFAULT_LOOPS,
    repeat: int = 5,
    cpu: int = 0,
    perturb: Sequence[Perturbation] | None = None,
    priority: Priority | None = None,
    progress: Progress = None,
    kernel: str = "loop",
    size: int = DEFAULT_STREAM_BYTES,
) -> pd.DataFrame:
    """FauxPlat/sec = loops / CPU seconds of one pinned thread, alone and under each
    perturbation, repeats interleaved so drift hits every condition alike."""
    if loops < 1 or repeat < 1:
        raise PerflabError("--loops and --repeat must be at least 1")
    machine.check_cpus([cpu])
    conditions = [None, *(perturb if perturb is not None else default_perturbations(cpu))]
    rows = []
    for rep in range(repeat):
        for p in conditions:
            with perturbed([p] if p else []):
                df = run_threads([cpu], loops, kernel, size, **_prio(priority))
            r = df.iloc[0]
            rows.append(
                {
                    "condition": str(p) if p else "alone",
                    "rep": rep,
                    "cpu": cpu,
                    "kernel": kernel,
                    "loops": loops,
                    "cpu_ns": r.cpu_ns,
                    "wall_ns": r.wall_ns,
                    "ticks": r.ticks,
                    "context_switches": r.context_switches,
                    "steal_ns": r.steal_ns,
                    "fauxplat_per_s": loops / (r.cpu_ns / 1e9),
                    "fauxplat_wall_per_s": loops / (r.wall_ns / 1e9),
                    "status": "ok",
                }
            )
            if progress:
                progress(1)
    return pd.DataFrame(rows)


def default_perturbations(cpu: int) -> list[Perturbation]:
    """The post's trials on the measured CPU: a CPU hog, a cache thrasher, a real-time hog."""
    return [Perturbation(kind, cpu) for kind in HOGS]


def fauxplat_point(rep: int, **options) -> pd.DataFrame:
    """One repeat of fauxplat(): what a campaign hands to a host (the caller numbers it)."""
    del rep
    return fauxplat(repeat=1, **options)


def fauxplat_summary(df: pd.DataFrame) -> pd.DataFrame:
    """Spread of the index per condition and its median change vs alone (the post: 10 %, 20 %)."""
    rows = []
    for cond, g in df.groupby("condition", sort=False):
        s = stats.summary(g["fauxplat_per_s"])
        rows.append(
            {
                "condition": cond,
                "n": s["n"],
                "median": s["median"],
                "min": s["min"],
                "max": s["max"],
                "mad": s["mad"],
                "wall_median": float(np.median(g["fauxplat_wall_per_s"])),
            }
        )
    out = pd.DataFrame(rows)
    alone = out.loc[out["condition"] == "alone"].iloc[0]
    out["change_pct"] = (out["median"] / alone["median"] - 1) * 100
    out["wall_change_pct"] = (out["wall_median"] / alone["wall_median"] - 1) * 100
    return out


def plot_fauxplat(df: pd.DataFrame, path) -> None:
    """FauxPlat/sec per repeat and condition (CPU time based), box per condition."""
    from perflab import plot as plt

    fig, ax = plt.figure(figsize=(8, 5))
    names = list(dict.fromkeys(df["condition"]))
    data = [df.loc[df["condition"] == n, "fauxplat_per_s"].to_numpy() for n in names]
    ax.boxplot(data, tick_labels=names)
    for i, values in enumerate(data, start=1):
        ax.plot(np.full(len(values), i), values, "o", color=plt.COLORS[0], alpha=0.6)
    ax.set_ylabel("FauxPlat/sec (loops per CPU second)")
    plt.save(fig, path, title="FauxPlat/sec alone and perturbed")


def sched_rt_note() -> str:
    """The kernel's real-time throttling, the last line of defence against a runaway RT task."""
    try:
        with open("/proc/sys/kernel/sched_rt_runtime_us") as f:
            runtime = int(f.read())
        with open("/proc/sys/kernel/sched_rt_period_us") as f:
            period = int(f.read())
    except OSError:
        return "unknown"
    if runtime < 0:
        return "off (sched_rt_runtime_us=-1)"
    return f"real-time tasks get at most {runtime / period:.0%} of each CPU"
