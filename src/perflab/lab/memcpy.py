"""Rubini's moremem: copy time vs size, 32 steps per octave, and the cache knees it shows.

Each sample times enough back-to-back copies to last MIN_STEPS timer steps (resolution.py), the
minimum of `trials` samples is kept, and the rows say how many copies a sample held: a copy of a
few bytes is far shorter than one step of a coarse TSC (26 ticks on some AMD guests)."""

from __future__ import annotations

import contextlib
import itertools
import math
import os
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import psutil
from numpy.typing import ArrayLike

from perflab.analysis.summary import Summary, Table
from perflab.core import bindings
from perflab.core.lazy import pd
from perflab.engine import controls, inprocess, results
from perflab.engine.progress import OnStart, ProgressArg
from perflab.engine.recording import Recording
from perflab.errors import PerflabError, warn_once, warning
from perflab.lab import resolution
from perflab.lab.plans.defaults import PAGE as PAGE
from perflab.system import machine

if TYPE_CHECKING:
    from matplotlib.figure import Figure

KERNELS = bindings.COPY_KERNELS
MAX_BYTES = 1 << 34
COLUMNS = ("kernel", "size", "copies", "ticks", "ticks_per_byte", "gb_per_s", "derivative")
MEMORY_KEYS = ("buffer_bytes", "peak_private_kib", "peak_resident_kib")  # PeakMemory.meta()


def incr(n: int) -> int:
    """moremem.c's incr(): +1 up to 64, then 32 steps per octave (1 KiB steps from 32 to 64 KiB)."""
    if n < 64:
        return n + 1
    step = 1
    while step <= n:
        step <<= 1
    return n + (step >> 6)


def sizes(max_bytes: int, min_bytes: int = 1) -> np.ndarray:
    """Every size incr() visits from min_bytes up to max_bytes."""
    out, n = [], 1
    while n <= max_bytes:
        if n >= min_bytes:
            out.append(n)
        n = incr(n)
    return np.array(out, dtype=np.uint64)


LLC_TIMES = 4  # the default reaches 4x the last-level cache: its knee (at half) shows with room
NO_LLC = 64 << 20  # the default's reach where no cache is declared
MEMORY_SHARE = 4  # the default's two buffers take at most a quarter of the memory available
BUDGET_S = 30.0  # the default sweep's copying, as a pilot copy's rate predicts it, at most
PILOT_COPIES = 3


@dataclass(frozen=True)
class DefaultMax:
    """The default largest copy and the sentence the output gives of where it comes from."""

    bytes: int
    why: str


def on_grid(limit: int) -> int:
    """The largest size incr() visits up to limit: the last a sweep to limit copies."""
    return int(sizes(limit)[-1])


def pilot_rate(kernel: str, nbytes: int) -> float:
    """Bytes per second of the fastest of PILOT_COPIES copies of nbytes with this kernel, in
    fresh buffers (freed after): at twice the last-level cache it is the memory's rate, which
    the largest sizes pay; one copy a preemption cuts short would shrink the default."""
    hz, _ = machine.tsc_hz()
    one = np.array([nbytes], dtype=np.uint64)
    with Buffers(nbytes) as bufs:
        copies, ticks = bufs.sweep(
            check_kernel(kernel), Placement(), one, PILOT_COPIES, "memcpy pilot"
        )
    return float(nbytes * copies[0] / (ticks[0] / hz)) if ticks[0] > 0 else math.inf


def default_max(kernel: str = "libc", trials: int = 10, repeat: int = 1) -> DefaultMax:
    """LLC_TIMES x the last-level cache (NO_LLC if none is declared), on the grid, bounded by
    MEMORY_SHARE of the memory available and by BUDGET_S of copying at a pilot copy's rate: a
    hypervisor may declare a 300 MiB L3, whose 4x took two 1.2 GB buffers and 107 s."""
    table = machine.caches()
    llc = int(table["size_bytes"].max()) if not table.empty else 0
    if llc:
        name = str(table.loc[table["size_bytes"].idxmax(), "cache"])
        wanted, reach = LLC_TIMES * llc, f"{LLC_TIMES} x the {human_bytes(llc)} {name}"
    else:
        wanted, reach = NO_LLC, f"{human_bytes(NO_LLC)}, no cache declared"
    free = int(psutil.virtual_memory().available)
    top = on_grid(max(1, min(wanted, free // (2 * MEMORY_SHARE))))
    limits = []
    if top < on_grid(wanted):
        limits.append(f"1/{MEMORY_SHARE} of the {free / 1e9:.1f} GB available, for two buffers")
    pilot = on_grid(max(1, top // 2))
    rate = pilot_rate(kernel, pilot)
    grid = sizes(top).astype(float)
    fits = np.flatnonzero(np.cumsum(grid) * trials * repeat / rate <= BUDGET_S)
    each = f"{trials} trial{'s' if trials > 1 else ''}"
    each += f" x {repeat} sweeps" if repeat > 1 else ""
    budget = (
        f"{BUDGET_S:g} s of copying ({each} at {rate / 1e9:.1f} GB/s, "
        f"a pilot copy of {human_bytes(pilot)})"
    )
    if not fits.size or int(grid[fits[-1]]) < top:
        top = int(grid[fits[-1]]) if fits.size else int(grid[0])
        limits.append(budget)
    head = f"default --max {human_bytes(top)}: {reach}"
    if limits:
        return DefaultMax(top, f"{head} would exceed " + " and ".join(limits))
    share = f"1/{MEMORY_SHARE} of the memory available"
    return DefaultMax(top, f"{head}, within {share} and {budget}")


def parse_size(text: str | int) -> int:
    """'1MB', '64K', '4096', '2GiB' -> bytes (binary units, as the article's 64kB caches)."""
    if isinstance(text, int):
        return text
    units = {"": 1, "B": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    s = text.strip().upper().removesuffix("IB").removesuffix("B")
    num, unit = (s[:-1], s[-1]) if s and s[-1] in units else (s, "")
    try:
        value = float(num) * units[unit]
    except ValueError:
        raise PerflabError(f"bad size {text!r}: use bytes or K/M/G, e.g. 64K, 1M") from None
    if value < 1 or value != int(value):
        raise PerflabError(f"bad size {text!r}: must be a whole number of bytes >= 1")
    return int(value)


def work(size_list: ArrayLike, trials: int) -> int:
    """Progress units of a sweep: bytes copied plus a fixed cost per size, so large sizes weigh."""
    arr = np.asarray(size_list, dtype=np.int64)
    return int(arr.sum()) * trials + 64 * trials * arr.size


def check_kernel(kernel: str) -> int:
    """The native id of a copy kernel; unknown or unavailable -> one-line error."""
    if kernel not in KERNELS:
        raise PerflabError(f"unknown copy kernel {kernel!r}; known: {', '.join(KERNELS)}")
    if not bindings.copy_available(KERNELS[kernel]):
        raise PerflabError(f"copy kernel {kernel!r} is not available on this CPU")
    return KERNELS[kernel]


def copy(dst: np.ndarray, src: np.ndarray, kernel: str = "libc") -> None:
    """Copy src into dst with one kernel, untimed: how a user checks a kernel is correct."""
    if dst.nbytes < src.nbytes:
        raise PerflabError(f"destination holds {dst.nbytes} bytes, source has {src.nbytes}")
    bindings.copy_once(check_kernel(kernel), dst, src, f"copy ({kernel})")


@dataclass(frozen=True)
class Placement:
    """Where the buffers start: `align` is the exact alignment of both, `offset` shifts dst."""

    align: int = PAGE
    offset: int = 0

    def check(self) -> None:
        """Refuse alignments that are not powers of two and negative or huge offsets."""
        if self.align < 1 or self.align & (self.align - 1):
            raise PerflabError(f"--align must be a power of two, not {self.align}")
        if not 0 <= self.offset < PAGE:
            raise PerflabError(f"--offset must be in 0..{PAGE - 1}, not {self.offset}")

    @property
    def skew(self) -> int:
        """Bytes past a page boundary: align < page lands exactly on `align`, not on 2*align."""
        return self.align % PAGE


class Buffers:
    """Two pre-faulted page-aligned buffers, released on exit."""

    def __init__(self, nbytes: int):
        self.nbytes = nbytes + 2 * PAGE
        self._native = bindings.CopyBuffers(self.nbytes)

    def sweep(
        self, kernel: int, place: Placement, sizes: np.ndarray, trials: int, what: str
    ) -> tuple[np.ndarray, np.ndarray]:
        """Per size, the buffers placed as asked: copies per sample and the shortest sample's
        ticks, a sample lasting min_sample_ticks() or more."""
        skew = place.skew
        return self._native.sweep(kernel, skew, skew + place.offset, sizes, trials,
                                  resolution.min_sample_ticks(), what)  # fmt: skip

    def __enter__(self) -> Buffers:
        return self

    def __exit__(self, *exc: object) -> None:
        self._native.free()


def status_kib(field: str) -> int:
    """One figure of this process's /proc/self/status, in KiB (RssAnon, VmHWM)."""
    text = Path("/proc/self/status").read_text()
    return int(text.split(f"\n{field}:", 1)[1].split(None, 1)[0])


class PeakMemory:
    """The sweep's peak is private memory (RssAnon after each chunk, the buffers held): the
    library pages also resident are shared with the page cache and other processes."""

    def __init__(self, buffer_bytes: int):
        self.buffer_bytes = buffer_bytes
        self.private_kib = 0

    def sample(self) -> None:
        self.private_kib = max(self.private_kib, status_kib("RssAnon"))

    def meta(self) -> dict[str, int]:
        """What the file records: each buffer's bytes, the private peak and beside it the
        resident one (VmHWM, the process's), never hidden."""
        self.sample()
        return {"buffer_bytes": self.buffer_bytes, "peak_private_kib": self.private_kib,
                "peak_resident_kib": status_kib("VmHWM")}  # fmt: skip


def memory_line(meta: Mapping[str, Any]) -> str:
    """The summary's line on the sweep's peak memory, in MB (10^6 bytes), the resident beside
    the private."""
    mb = 1e6
    private, buffers = meta["peak_private_kib"] * 1024, meta["buffer_bytes"]
    return (
        f"peak memory: {private / mb:.1f} MB private (two buffers of {buffers / mb:.1f} MB each "
        f"+ {(private - 2 * buffers) / mb:.1f} MB), {meta['peak_resident_kib'] * 1024 / mb:.1f} "
        "MB resident with shared libraries"
    )


class MemoryLock:
    """mlockall for the duration of a measurement, munlockall after; `error` says why not."""

    def __init__(self, enabled: bool = True):
        self.enabled = enabled
        self.locked = False
        self.error = ""

    def __enter__(self) -> MemoryLock:
        if self.enabled:
            rc = bindings.lock_memory(True)
            self.locked = rc == 0
            if rc < 0:
                self.error = f"mlockall: {bindings.errno_text(rc)}"
        return self

    def __exit__(self, *exc: object) -> None:
        if self.locked:
            bindings.lock_memory(False)


def measure(
    size_list: ArrayLike,
    trials: int = 10,
    kernel: str = "libc",
    place: Placement = Placement(),
    progress: Callable[[int], None] | None = None,
    chunk: int = 32,
) -> np.ndarray:
    """Ticks per copy of each size (the shortest sample over its copies), timed in C, one
    octave per native call.

    `progress` receives work() units as chunks finish.
    """
    kid = check_kernel(kernel)
    place.check()
    if trials < 1:
        raise PerflabError(f"--trials must be at least 1, not {trials}")
    todo = np.ascontiguousarray(size_list, dtype=np.uint64)
    out = np.zeros(todo.size, dtype=float)
    with Buffers(int(todo.max()) + place.offset) as bufs:
        for start in range(0, todo.size, chunk):
            part = todo[start : start + chunk]
            copies, ticks = bufs.sweep(kid, place, part, trials, f"memcpy sweep ({kernel})")
            out[start : start + chunk] = ticks / copies
            if progress:
                progress(work(part, trials))
    return out


def derivative(size_list: ArrayLike, ticks: ArrayLike) -> np.ndarray:
    """Point-to-point derivative of ticks per copy against size (NaN at the first size)."""
    size, t = np.asarray(size_list, dtype=float), np.asarray(ticks, dtype=float)
    deriv = np.full(size.size, np.nan)
    deriv[1:] = np.diff(t) / np.diff(size)
    return deriv


def tidy(
    size_list: ArrayLike, copies: ArrayLike, sample_ticks: ArrayLike, hz: float, step: int
) -> pd.DataFrame:
    """The article's columns (ticks per copy: the sample's over its copies), GB/s where the
    sample lasted MIN_STEPS timer steps (NaN elsewhere) and the derivative of ticks per copy."""
    size = np.asarray(size_list, dtype=np.int64)
    n = np.asarray(copies, dtype=np.int64)
    sample = np.asarray(sample_ticks, dtype=float)
    t = sample / n
    with np.errstate(divide="ignore", invalid="ignore"):
        gbps = np.where(resolution.resolved(sample, step) & (t > 0), size / (t / hz) / 1e9, np.nan)
    return pd.DataFrame(
        {
            "size": size,
            "copies": n,
            "ticks": t,
            "ticks_per_byte": t / size,
            "gb_per_s": gbps,
            "derivative": derivative(size, t),
        }
    )


def resolved_rows(frame: pd.DataFrame, meta: Mapping[str, Any]) -> tuple[np.ndarray, int]:
    """Which rows' samples lasted MIN_STEPS timer steps, and the step: a file from before
    perflab batched copies has no `copies` (one copy per sample) and may lack the step."""
    copies = frame.get("copies", 1)
    sample = frame["ticks"].to_numpy(dtype=float) * np.asarray(copies, dtype=float)
    step = resolution.recorded_step(meta, sample)
    return resolution.resolved(sample, step), step


def _rederive(df: pd.DataFrame) -> pd.DataFrame:
    """Every size's derivative again, across the chunks' edges (rows in size order within each
    sweep of --repeat)."""
    if "repeat" not in df:
        return df.assign(derivative=derivative(df["size"], df["ticks"]))
    out = df.copy()
    for _, rows in df.groupby("repeat", sort=False):
        out.loc[rows.index, "derivative"] = derivative(rows["size"], rows["ticks"])
    return out


def per_size(df: pd.DataFrame) -> pd.DataFrame:
    """One row per size: the median over the sweeps of --repeat (each the minimum of its
    trials), the per-byte figures and the derivative from it; a frame of one sweep as it is."""
    if "repeat" not in df:
        return df
    out = df.drop(columns="repeat").groupby("size", sort=True).median(numeric_only=True)
    out = out.reset_index()
    out.insert(0, "kernel", df["kernel"].iloc[0])
    out["ticks_per_byte"] = out["ticks"] / out["size"]
    out.attrs = dict(df.attrs)
    return _rederive(out)


@controls.typed_arguments
def run(
    max_bytes: int | None = None,
    trials: int = 10,
    kernel: str = "libc",
    align: int = PAGE,
    offset: int = 0,
    lock: bool = True,
    progress: ProgressArg = None,
    *,
    on_start: OnStart | None = None,
    output: str | os.PathLike | None = None,
    resume: bool = False,
    discard_bad: bool = False,
    extra_meta: Mapping[str, Any] | None = None,
    repeat: int = 1,
) -> pd.DataFrame:
    """moremem: the tidy sweep from 1 byte to max_bytes, with its run conditions in metadata;
    repeat > 1 sweeps the same sizes that many times, one after the other (a `repeat` column):
    runs per size that diff can compare.

    A refused mlockall warns (PerflabWarning) and the sweep goes on: page faults may show.
    The buffers and the lock are released before the rows are merged and written, and the
    metadata records the peak memory (PeakMemory).
    output: a .parquet/.csv journal, written in chunks of sizes as they are measured;
    resume=True completes an interrupted one (inprocess.measure). progress counts work();
    extra_meta joins the metadata (the CLI records its --small there)."""

    place = Placement(align, offset)
    place.check()
    kid = check_kernel(kernel)
    if trials < 1:
        raise PerflabError(f"--trials must be at least 1, not {trials}")
    if repeat < 1:
        raise PerflabError(f"--repeat must be at least 1, not {repeat}")
    chosen = {}
    if max_bytes is None:
        bound = default_max(kernel, trials, repeat)
        top, chosen = bound.bytes, {"max_from": bound.why}
    else:
        top = max_bytes
    if not 1 <= top <= MAX_BYTES:
        raise PerflabError(f"--max must be between 1 byte and {MAX_BYTES >> 30} GiB, not {top}")
    todo = sizes(top).astype(np.int64)
    hz, _ = machine.tsc_hz()
    params = {"max_bytes": top, "trials": trials, "kernel": kernel, "align": align,
              "offset": offset, "lock": lock, "repeat": repeat}  # fmt: skip
    with contextlib.ExitStack() as held:
        locked = held.enter_context(MemoryLock(lock))
        bufs = held.enter_context(Buffers(int(todo.max()) + place.offset))
        peak = PeakMemory(bufs.nbytes)
        if lock and not locked.locked:
            warn_once(warning("mlock_refused", error=locked.error))
        meta = {
            **machine.metadata(),
            "experiment": "memcpy",
            **chosen,
            **(extra_meta or {}),
            "max_bytes": top,
            "trials": trials,
            "repeat": repeat,
            "align": align,
            "offset": offset,
            "mlockall": locked.locked,
            "mlockall_error": locked.error,
            "timer_overhead_ticks": bindings.timer_overhead_ticks(),
            "min_sample_steps": resolution.MIN_STEPS,
        }

        def copied(keys: pd.DataFrame) -> pd.DataFrame:
            part = np.ascontiguousarray(keys["size"], dtype=np.uint64)
            copies, ticks = bufs.sweep(kid, place, part, trials, f"memcpy sweep ({kernel})")
            rows = tidy(part, copies, ticks, hz, meta["timer_step_ticks"]).assign(kernel=kernel)
            if "repeat" in keys:
                rows["repeat"] = keys["repeat"].to_numpy()
            peak.sample()
            return rows

        def release() -> dict[str, int]:
            extra = peak.meta()
            held.close()
            return extra

        weight = np.tile((todo + 64) * trials, repeat)  # work() of each size
        columns: tuple[str, ...] = COLUMNS
        phase: tuple[str, ...] = ()
        if repeat == 1:
            keys = pd.DataFrame({"size": todo})
        else:
            keys = pd.DataFrame({"repeat": np.repeat(np.arange(repeat), todo.size),
                                 "size": np.tile(todo, repeat)})  # fmt: skip
            columns, phase = (COLUMNS[0], "repeat", *COLUMNS[1:]), ("repeat",)
        plan = inprocess.Plan("memcpy", keys, columns, params, meta, phase=phase, weight=weight,
                              derive=_rederive)  # fmt: skip
        return inprocess.measure(plan, copied, Recording(output, resume, discard_bad),
                                 on_start=on_start, progress=progress,
                                 release=release)  # fmt: skip


def small_table(df: pd.DataFrame, upto: int = 64) -> pd.DataFrame:
    """Riquadro 3: size, copies per sample, ticks per copy (red) and per byte (blue) for the
    smallest sizes (a file from before perflab batched copies has no copies column)."""
    cols = [c for c in ("size", "copies", "ticks", "ticks_per_byte") if c in df]
    return df.loc[df["size"] <= upto, cols].reset_index(drop=True)


def _segment_costs(y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    c1 = np.concatenate([[0.0], np.cumsum(y)])
    c2 = np.concatenate([[0.0], np.cumsum(y * y)])
    return c1, c2


def segments(y: ArrayLike, penalty: float, min_len: int) -> list[int]:
    """Optimal partition of y into constant segments (least squares + penalty per segment).

    Returns the start index of every segment after the first. Exact dynamic programming,
    O(n^2) with prefix sums: a few hundred points per sweep make this instant.
    """
    y = np.asarray(y, dtype=float)
    n = y.size
    c1, c2 = _segment_costs(y)
    best = np.full(n + 1, np.inf)
    best[0] = -penalty
    prev = np.zeros(n + 1, dtype=int)
    for end in range(min_len, n + 1):
        starts = np.arange(0, end - min_len + 1)
        starts = starts[np.isfinite(best[starts])]
        if starts.size == 0:
            continue
        length = end - starts
        s1 = c1[end] - c1[starts]
        sse = (c2[end] - c2[starts]) - s1 * s1 / length
        total = best[starts] + sse + penalty
        i = int(np.argmin(total))
        best[end], prev[end] = total[i], starts[i]
    cuts, end = [], n
    while end > 0:
        end = int(prev[end])
        if end > 0:
            cuts.append(end)
    return sorted(cuts)


def _noise(y: np.ndarray) -> float:
    """Robust noise level of a series from its first differences (MAD, scaled for a normal)."""
    d = np.diff(y)
    if d.size == 0:
        return 0.0
    return float(1.4826 * np.median(np.abs(d - np.median(d))) / np.sqrt(2))


def running_median(y: np.ndarray, width: int = 5) -> np.ndarray:
    """Median of each point's neighbourhood: one interrupted copy must not make a segment."""
    half = width // 2
    padded = np.pad(y, half, mode="edge")
    windows = np.lib.stride_tricks.sliding_window_view(padded, width)
    return np.median(windows, axis=1)


def detect_knees(
    sizes_copied: ArrayLike,
    ticks_per_byte: ArrayLike,
    min_size: int = 2048,
    min_rise: float = 1.5,
    min_len: int = 12,
    ramp_len: int = 32,
) -> pd.DataFrame:
    """Sizes where ticks per byte steps up for good: the caches' edges.

    Change points of log(ticks per byte) against log size (piecewise-constant fit, penalty
    from the robust noise level), keeping rises of at least `min_rise` between neighbouring
    levels; a rise spread over segments shorter than `ramp_len` points (a gradual edge,
    32 points = one octave) counts once, at its start. Sizes below `min_size` are left
    out: there the call's fixed cost dominates.
    Columns: size (S, bytes copied), touched (2*S, bytes the copy touches), level_before,
    level_after (median ticks per byte of the neighbouring segments), rise.
    """
    size = np.asarray(sizes_copied, dtype=float)
    tpb = np.asarray(ticks_per_byte, dtype=float)
    keep = (size >= min_size) & np.isfinite(tpb) & (tpb > 0)
    size, tpb = size[keep], tpb[keep]
    cols = ["size", "touched", "level_before", "level_after", "rise"]
    if size.size < 2 * min_len:
        return pd.DataFrame(columns=cols)
    raw = np.log(tpb)
    sigma = max(_noise(raw), 1e-3)
    y = running_median(raw)
    cuts = segments(y, penalty=8 * sigma**2 * np.log(y.size), min_len=min_len)
    bounds = [0, *cuts, y.size]
    levels = [float(np.median(tpb[a:b])) for a, b in itertools.pairwise(bounds)]
    rows, i = [], 0
    while i < len(cuts):
        if levels[i + 1] <= levels[i]:
            i += 1
            continue
        j = i
        while (
            j + 1 < len(cuts) and levels[j + 2] > levels[j + 1] and cuts[j + 1] - cuts[j] < ramp_len
        ):
            j += 1
        rise = levels[j + 1] / levels[i]
        if rise >= min_rise:
            s = float(size[cuts[i]])
            rows.append(
                {
                    "size": int(s),
                    "touched": int(2 * s),
                    "level_before": levels[i],
                    "level_after": levels[j + 1],
                    "rise": rise,
                }
            )
        i = j + 1
    return pd.DataFrame(rows, columns=cols)


def recorded_caches(df: pd.DataFrame) -> pd.DataFrame:
    """The caches of the machine that measured df (its metadata), this machine's if unrecorded:
    a file read elsewhere, or here on another CPU, keeps its own cache sizes."""
    saved = results.metadata(df).get("caches")
    return pd.DataFrame(saved) if saved else machine.caches()


def knee_report(knees: pd.DataFrame, caches: pd.DataFrame | None = None) -> pd.DataFrame:
    """Each detected knee beside the declared data cache nearest to the bytes it touches."""
    table = machine.caches() if caches is None else caches
    data = table[table["cache"].isin(["L1d", "L2", "L3", "L4"])] if not table.empty else table
    rows = []
    for k in knees.itertuples(index=False):
        row = {"knee_size": k.size, "touched": k.touched, "rise": k.rise}
        if len(data):
            ratio = np.abs(np.log2(data["size_bytes"].to_numpy() / k.touched))
            near = data.iloc[int(np.argmin(ratio))]
            row.update(cache=near["cache"], cache_bytes=int(near["size_bytes"]))
            row["touched_over_cache"] = k.touched / near["size_bytes"]
        rows.append(row)
    return pd.DataFrame(rows)


def human_bytes(v: float) -> str:
    """1024 -> '1K', 1048576 -> '1M': axis labels in the units caches are declared in."""
    for unit, scale in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if v >= scale:
            return f"{v / scale:g}{unit}"
    return f"{v:g}"


def summarize(
    df: pd.DataFrame, upto: int = 32, meta: Mapping[str, Any] | None = None
) -> pd.DataFrame:
    """The table the article printed (Riquadro 3): ticks per copy and per byte, small sizes;
    ticks per byte is left blank where the sample was too short for the timer to resolve."""
    keep, _ = resolved_rows(df, results.metadata(df) if meta is None else meta)
    table = small_table(df, upto)
    table["ticks_per_byte"] = table["ticks_per_byte"].where(keep[df["size"].to_numpy() <= upto])
    return table


def rated(df: pd.DataFrame, meta: Mapping[str, Any] | None = None) -> pd.DataFrame:
    """The rows whose samples the timer resolves, their derivative taken between them only:
    every figure of copy time (rate, knees, plot) comes from these."""
    keep, _ = resolved_rows(df, results.metadata(df) if meta is None else meta)
    return _rederive(df[keep].reset_index(drop=True))


def plot(
    df: pd.DataFrame,
    path: Any = None,
    knees: pd.DataFrame | None = None,
    meta: Mapping[str, Any] | None = None,
) -> Figure:
    """Rubini's figure: log-log, red ticks per copy, blue ticks per byte, green derivative, of
    the sizes the timer resolves."""
    from matplotlib.ticker import FuncFormatter

    from perflab.analysis import plot as plt

    df = per_size(df)
    shown = rated(df, meta)
    fig, ax = plt.figure(figsize=(9, 5.5))
    red, blue, green = plt.COLORS[:3]
    pos = shown["derivative"] > 0
    ax.plot(shown["size"], shown["ticks"], color=red, label="ticks per copy")
    ax.plot(shown["size"], shown["ticks_per_byte"], color=blue, label="ticks per byte")
    ax.plot(
        shown.loc[pos, "size"],
        shown.loc[pos, "derivative"],
        ".",
        color=green,
        markersize=2,
        label="derivative (point to point)",
    )
    plt.log_axes(ax, x=True, y=True)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: human_bytes(v)))
    for c in recorded_caches(df).itertuples(index=False):
        if c.cache in ("L1d", "L2", "L3") and c.size_bytes / 2 <= df["size"].max():
            ax.axvline(c.size_bytes / 2, color="#777777", linestyle="--", linewidth=0.8)
            ax.annotate(
                f"{c.cache}/2",
                (c.size_bytes / 2, 0.98),
                xycoords=("data", "axes fraction"),
                fontsize=8,
                ha="right",
                va="top",
                rotation=90,
            )
    if knees is not None:
        for k in knees.itertuples(index=False):
            ax.axvline(k.size, color="black", linestyle=":", linewidth=1)
    ax.set_xlabel("bytes copied (S; the copy touches 2·S)")
    ax.set_ylabel("TSC ticks")
    ax.legend(loc="upper left")
    kernel = df["kernel"].iloc[0] if "kernel" in df else "libc"
    hz, _ = machine.tsc_hz()
    left_out = len(df) - len(shown)
    unresolved = f"; {left_out} sizes unresolved, not drawn" if left_out else ""
    return plt.save(
        fig,
        path,
        title=f"memcpy ({kernel}) — TSC {hz / 1e9:.3f} GHz; dashed: cache/2, dotted: knees"
        f"{unresolved}",
    )


def summary(frame: pd.DataFrame, meta: dict[str, Any]) -> Summary:
    """The small-size table (Riquadro 3), the cache knees and the peak rate, of the sizes whose
    samples the timer resolves; of --repeat sweeps, each size's median."""
    sweeps = int(frame["repeat"].nunique()) if "repeat" in frame else 1
    frame = per_size(frame)
    keep, step = resolved_rows(frame, meta)
    fit = rated(frame, meta)
    knees = detect_knees(fit["size"], fit["ticks_per_byte"])
    here = meta.get("hostname") == socket.gethostname()
    # A file from another machine that did not record its caches is not matched to these.
    if meta.get("caches"):
        caches = pd.DataFrame(meta["caches"])
    else:
        caches = machine.caches() if here else pd.DataFrame(columns=["cache", "size_bytes"])
    report = knee_report(knees, caches)
    kernel = str(frame["kernel"].iloc[0])
    place = f", align {meta['align']}, offset {meta.get('offset', 0)}" if "align" in meta else ""
    per = "copies per sample, " if "copies" in frame else ""
    tables = [
        Table("small", f"small sizes (Riquadro 3: {per}ticks per copy, ticks per byte){place}",
              summarize(frame, int(meta.get("small", 32)), meta), "{:.6f}"),
        Table("knees", "cache knees: a copy of S bytes touches 2*S", report),
    ]  # fmt: skip
    values: dict[str, Any] = {"points": len(frame), "kernel": kernel}
    values.update({k: meta[k] for k in ("max_bytes", "trials", "align", "offset") if k in meta})
    values["mlockall"] = meta.get("mlockall")
    values["timer_step_ticks"] = step
    values["unresolved"] = int((~keep).sum())
    line = f"{len(frame)} sizes, {kernel}" + (
        f", min of {meta['trials']}" if "trials" in meta else ""
    )
    if sweeps > 1:
        values["repeat"] = sweeps
        line += f", median of {sweeps} sweeps"
    if "gb_per_s" in fit and fit["gb_per_s"].notna().any():
        peak = fit.loc[fit["gb_per_s"].idxmax()]
        values["peak"] = {"size": int(peak["size"]), "gb_per_s": float(peak["gb_per_s"])}
        line += f"; peak {peak['gb_per_s']:.2f} GB/s at {int(peak['size']):,} bytes"
    if "mlockall" in meta:
        line += f"; mlockall {'on' if meta['mlockall'] else 'off'}"
    lines = [line]
    if "max_from" in meta:
        lines.append(str(meta["max_from"]))
    if "copies" in frame:
        lines.append(
            f"each sample: {int(frame['copies'].min()):,} to {int(frame['copies'].max()):,} "
            f"back-to-back copies, at least {resolution.MIN_STEPS} timer steps "
            f"({resolution.MIN_STEPS * step:,} ticks, one step {step})"
        )
    if "peak_private_kib" in meta:
        values["memory"] = {k: meta[k] for k in MEMORY_KEYS}
        lines.append(memory_line(meta))
    if not keep.all():
        lines.append(resolution.unresolved_note(int((~keep).sum()), "sizes' samples", step))
    if report.empty:
        lines.append("no cache knee found (sweep further with --max, or more --trials)")
    notes = []
    if not here and not meta.get("caches"):
        notes.append("knees not matched to caches: the file is from another machine")
    if "derivative" not in frame:
        notes.append("no figure: the file has no derivative column (perflab's memcpy writes one)")
        return Summary(lines, tables, values, None, notes)
    return Summary(lines, tables, values, lambda p: plot(frame, p, knees, meta), notes)
