"""The sweep: the sizes moremem visits, the default largest copy, the buffers and their
placement, the copies timed in C, and the journaled run that records them."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import psutil
from numpy.typing import ArrayLike

from perflab.core import bindings
from perflab.core.lazy import pd
from perflab.errors import PerflabError, warn_once, warning
from perflab.lab import resolution
from perflab.lab.memcpy import BufferAlignment, MemcpyPlan
from perflab.plan import controls
from perflab.plan.controls import PAGE
from perflab.running import inprocess
from perflab.store.recording import Recording
from perflab.system import machine, provenance

KERNELS = bindings.COPY_KERNELS
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
            check_kernel(kernel), BufferAlignment(), one, PILOT_COPIES, "memcpy pilot"
        )
    return float(nbytes * copies[0] / (ticks[0] / hz)) if ticks[0] > 0 else math.inf


MAX_TRIALS = 2**32 - 1  # copies per sample the C kernel can count


def check_trials(trials: int) -> None:
    """--trials from 1 to what the C kernel counts, refused in one line before any copy."""
    if trials < 1:
        raise PerflabError(f"--trials must be at least 1, not {trials}")
    if trials > MAX_TRIALS:
        raise PerflabError(f"--trials must be at most {MAX_TRIALS:,}, not {trials:,}")


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


def human_bytes(v: float) -> str:
    """1024 -> '1K', 1048576 -> '1M': axis labels in the units caches are declared in."""
    for unit, scale in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if v >= scale:
            return f"{v / scale:g}{unit}"
    return f"{v:g}"


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


class Buffers:
    """Two pre-faulted page-aligned buffers, released on exit."""

    def __init__(self, nbytes: int):
        self.nbytes = nbytes + 2 * PAGE
        self._native = bindings.CopyBuffers(self.nbytes)

    def sweep(
        self, kernel: int, place: BufferAlignment, sizes: np.ndarray, trials: int, what: str
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
    place: BufferAlignment = BufferAlignment(),
    progress: Callable[[int], None] | None = None,
    chunk: int = 32,
) -> np.ndarray:
    """Ticks per copy of each size (the shortest sample over its copies), timed in C, one
    octave per native call.

    `progress` receives work() units as chunks finish.
    """
    kid = check_kernel(kernel)
    place.check()
    check_trials(trials)
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


def rederive(df: pd.DataFrame) -> pd.DataFrame:
    """Every size's derivative again, across the chunks' edges (rows in size order within each
    sweep of --repeat)."""
    if "repeat" not in df:
        return df.assign(derivative=derivative(df["size"], df["ticks"]))
    out = df.copy()
    for _, rows in df.groupby("repeat", sort=False):
        out.loc[rows.index, "derivative"] = derivative(rows["size"], rows["ticks"])
    return out


def verb_values(values: dict[str, Any]) -> dict[str, Any]:
    """The verb's values as run takes them: without --max, the default's bound measured here
    once, so the progress label names it and the result says which bound held."""
    if values["max_bytes"] is not None:
        return values
    check_kernel(values["kernel"])
    bound = default_max(values["kernel"], values["trials"], values["repeat"])
    return {**values, "max_bytes": bound.bytes, "max_from": bound.why}


@controls.typed_arguments
def run(
    max_bytes: int | None = MemcpyPlan.max_bytes,
    trials: int = MemcpyPlan.trials,
    kernel: str = MemcpyPlan.kernel,
    align: int = MemcpyPlan.align,
    offset: int = MemcpyPlan.offset,
    lock: bool = MemcpyPlan.lock,
    *,
    repeat: int = MemcpyPlan.repeat,
    small: int = MemcpyPlan.small,
    max_from: str = "",
    recording: Recording | None = None,
) -> pd.DataFrame:
    """moremem: the tidy sweep from 1 byte to max_bytes (None: default_max's), with its run
    conditions in metadata; repeat > 1 sweeps the same sizes that many times, one after the
    other (a `repeat` column): runs per size that diff can compare. small is how the summary
    reads it (recorded); max_from says why max_bytes is what it is (verb_values').

    A refused mlockall warns (PerflabWarning) and the sweep goes on: page faults may show.
    The buffers and the lock are released before the rows are merged and written, and the
    metadata records the peak memory (PeakMemory).
    recording: where the rows go (a .parquet/.csv journal written in chunks of sizes as they
    are measured, resumed if asked: inprocess.measure) and the progress that counts work()."""
    MemcpyPlan(max_bytes, trials, repeat, kernel, align, offset, small, lock=lock).check()
    place = BufferAlignment(align, offset)
    kid = check_kernel(kernel)
    check_trials(trials)
    chosen = {"max_from": max_from} if max_from else {}
    if max_bytes is None:
        bound = default_max(kernel, trials, repeat)
        top, chosen = bound.bytes, {"max_from": bound.why}
    else:
        top = max_bytes
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
            **provenance.metadata(),
            "experiment": "memcpy",
            **chosen,
            "small": small,
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
        plan = inprocess.RowSchedule("memcpy", keys, columns, params, meta, phase=phase,
                                     weight=weight, derive=rederive)  # fmt: skip
        return inprocess.measure(plan, copied, recording, release=release)
