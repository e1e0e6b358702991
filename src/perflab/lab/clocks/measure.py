"""The clocks measured: each source's resolution and value (clocks.c), its reads back to back
(ClockBench: a read's cost is the step between two), a TSC-timed batch of each, and the TSC's
flags, clocksource and rate, with a verdict."""

from __future__ import annotations

import functools
import os
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import numpy as np

from perflab.analysis import stats
from perflab.analysis.summary import Summary, Table
from perflab.core import bindings
from perflab.core.lazy import pd
from perflab.errors import PerflabError
from perflab.lab import resolution
from perflab.lab.clocks import ClocksPlan
from perflab.plan import controls
from perflab.plan.experiment import Fleet
from perflab.running.timing import STEPS_PER_SAMPLE
from perflab.store import results
from perflab.store.recording import Recording
from perflab.system import machine, provenance, settings

if TYPE_CHECKING:
    from matplotlib.figure import Figure

SOURCES = bindings.CLOCK_SOURCES
COUNTERS = {"rdtsc", "lfence+rdtsc", "rdtscp", "cpuid+rdtsc"}


def resolve(names: Iterable[str]) -> list[str]:
    """Canonical clock names for user spellings ('monotonic_raw', 'RDTSCP'); unknown → error."""
    lookup = {n.lower(): n for n in SOURCES}
    lookup.update({n.lower().removeprefix("clock_"): n for n in SOURCES})
    out = []
    for name in names:
        canon = lookup.get(name.lower())
        if canon is None:
            raise PerflabError(f"unknown clock {name!r}; known: {', '.join(SOURCES)}")
        out.append(canon)
    return out


def available(names: Iterable[str] | None = None) -> list[str]:
    """The sources of `names` (default: all) that this CPU and kernel can read."""
    return [n for n in resolve(names or SOURCES) if bindings.source_available(SOURCES[n])]


def resolution_table() -> pd.DataFrame:
    """clocks.c: each clock's clock_getres and current value (secs, nsecs)."""
    rows = []
    for name in SOURCES:
        if name in COUNTERS:
            continue
        res = bindings.clock_getres(SOURCES[name], f"clock_getres({name})")
        sec, nsec = bindings.clock_read(SOURCES[name], f"read {name}")
        rows.append({"clock": name, "res_ns": res, "secs": sec, "nsecs": nsec})
    return pd.DataFrame(rows)


def sample(name: str, n: int) -> np.ndarray:
    """n+1 back-to-back reads of one source, taken in C (ns for clocks, ticks for counters)."""
    return bindings.clock_sample(SOURCES[name], n + 1, f"sample {name}")


def batch_ns(name: str, n: int, hz: float) -> float:
    """Mean cost of one read over a batch timed by the TSC: the truth for COARSE clocks."""
    return bindings.clock_batch_ticks(SOURCES[name], n, f"batch {name}") / n / hz * 1e9


@controls.typed_arguments
def read_costs(samples: int = 1000, names: Iterable[str] | None = None) -> pd.DataFrame:
    """ClockBench: one row per read, its cost as the step between consecutive reads."""
    if samples < 1:
        raise PerflabError(f"--samples must be at least 1, not {samples}")
    chosen = available(names)
    controls.check_rows({"--samples": samples}, len(chosen), controls.CALL_S, controls.ROW_BYTES)
    hz, _ = machine.tsc_hz()
    frames = []
    for name in chosen:
        steps = np.diff(sample(name, samples).astype(np.int64))
        if name in COUNTERS:
            ticks, ns = steps, steps / hz * 1e9
        else:
            ticks, ns = steps * hz / 1e9, steps.astype(float)
        frames.append(
            pd.DataFrame(
                {"method": name, "rep": np.arange(samples), "ns": ns, "ticks": ticks.astype(float)}
            )
        )
    return pd.concat(frames, ignore_index=True)


def read_table(costs: pd.DataFrame) -> pd.DataFrame:
    """ClockBench's table per method (samples, min, max, avg, median, stdev in ns) plus ticks,
    each clock's step (smallest reliable increment), share of repeated reads, and whether its
    median read lasts MIN_STEPS of its steps (a read between two reads is one short event:
    where it does not, these columns are the clock's steps, not its cost)."""
    rows = []
    for name, group in costs.groupby("method", sort=False):
        s = stats.summary(group["ns"])
        native = group["ticks"] if name in COUNTERS else group["ns"]
        step = stats.quantum(native.round().astype(np.int64))
        rows.append(
            {
                "method": name,
                "samples": s["n"],
                "min": s["min"],
                "max": s["max"],
                "avg": s["mean"],
                "median": s["median"],
                "stdev": s["stdev"],
                "median_ticks": float(np.median(group["ticks"])),
                # In the clock's own unit (ticks for counters, ns for clocks); repeats: the
                # share of back-to-back reads that returned the same value.
                "step": step,
                "repeats": float(np.mean(native == 0)),
                "resolved": bool(step) and bool(resolution.resolved(np.median(native), step)),
            }
        )
    return pd.DataFrame(rows)


def cost_table(costs: pd.DataFrame, batch: int = 10000) -> pd.DataFrame:
    """read_table, plus each method's mean cost over a TSC-timed batch of reads (measured now)."""
    hz, _ = machine.tsc_hz()
    table = read_table(costs)
    table["batch_ns"] = [batch_ns(name, batch, hz) for name in table["method"]]
    return table


def tsc_report() -> dict[str, Any]:
    """TSC flags, clocksources, frequency and a one-line verdict on TSC timing here."""
    flags = machine.cpu_flags()
    current, available_cs = settings.clocksources()
    hz, how = machine.tsc_hz()
    present = {f: f in flags for f in machine.TSC_FLAGS}
    return {
        "flags": present,
        "clocksource": current,
        "available_clocksources": available_cs,
        "tsc_hz": hz,
        "tsc_hz_source": how,
        "verdict": verdict(present, current, machine.hypervisor()),
    }


def verdict(flags: dict[str, bool], clocksource: str, hypervisor: str) -> str:
    """Whether TSC ticks can be trusted as a time base, and why not when they cannot."""
    if not flags.get("tsc"):
        return "no TSC: perflab's ticks come from the architecture's counter or the clock"
    missing = [f for f in ("constant_tsc", "nonstop_tsc") if not flags.get(f)]
    if missing:
        return f"untrustworthy: {' and '.join(missing)} missing, ticks vary with frequency/sleep"
    where = f" (guest of {hypervisor}: the host must keep the TSC stable)" if hypervisor else ""
    if clocksource != "tsc":
        return f"usable with care: invariant TSC but the kernel prefers {clocksource}{where}"
    serial = "rdtscp" if flags.get("rdtscp") else "lfence+rdtsc"
    return f"trustworthy: invariant TSC, kernel clocksource is tsc, serialise with {serial}{where}"


def plot(
    costs: pd.DataFrame,
    path: str | os.PathLike[str] | None = None,
    table: pd.DataFrame | None = None,
) -> Figure:
    """Distribution of read costs per method, log scale, with the batch-timed mean in red.

    COARSE clocks step by their resolution, so most steps are 0: the red mark shows what a
    read really costs.
    """
    from perflab.analysis import plot as plt

    fig, ax = plt.figure(figsize=(9, 5))
    names = list(dict.fromkeys(costs["method"]))
    data = [costs.loc[costs["method"] == n, "ns"].to_numpy() for n in names]
    ax.boxplot(
        data,
        orientation="horizontal",
        tick_labels=names,
        showfliers=True,
        flierprops={"markersize": 2},
    )
    if table is not None:
        ypos = range(1, len(names) + 1)
        batch = table.set_index("method").loc[names, "batch_ns"]
        ax.plot(batch, ypos, "D", color=plt.COLORS[0], label="mean of a TSC-timed batch")
        ax.legend(loc="center right")
    ax.set_xscale("symlog", linthresh=1)
    ax.set_xlabel("cost of one read (ns, symlog)")
    ax.invert_yaxis()
    hz, how = machine.tsc_hz()
    return plt.save(fig, path, title=f"Clock read costs — TSC {hz / 1e9:.3f} GHz ({how})")


def cost_of(method: str, samples: int = 1000) -> pd.DataFrame:
    """read_costs of one method: the unit a campaign hands to each host."""
    return read_costs(samples, [method])


@controls.typed_arguments
def run(
    samples: int = ClocksPlan.samples,
    names: Iterable[str] = ClocksPlan.names,
    *,
    recording: Recording | None = None,
) -> pd.DataFrame:
    """The read costs of `names` (none: every clock this machine reads), `samples` reads each,
    with what `perflab clocks` measures beside them in the metadata (the resolution table, a
    TSC-timed batch of each, the TSC report), so a report shows it all; saved whole at the
    recording's output, if any."""
    selected = resolve(names) if names else None
    ClocksPlan(samples, tuple(selected or ())).check()
    recording = recording or Recording()
    recording.check_whole("clocks")
    res = resolution_table()
    costs = read_costs(samples, selected)
    table = cost_table(costs)
    meta = {
        **provenance.metadata(),
        "experiment": "clocks",
        "unit": "ns",
        "resolution": res.to_dict(orient="records"),
        "batch_ns": dict(zip(table["method"], table["batch_ns"], strict=True)),
        "tsc": tsc_report(),
    }
    return recording.keep(results.attach(costs, meta))


def fleet(samples: int = ClocksPlan.samples, names: Iterable[str] = ClocksPlan.names) -> Fleet:
    """The read-cost table on every host of a Dask cluster, one clock a point, medians side by
    side (what `perflab clocks --cluster` runs)."""
    methods = available(resolve(names) if names else None)
    return Fleet(
        functools.partial(cost_of, samples=samples), [{"method": m} for m in methods],
        {"samples": samples, "methods": methods}, ("host", "method", "rep"), "method", "ns",
        "median cost of one read (ns) per host", "median_ns", {"unit": "ns"},
    )  # fmt: skip


def summary(frame: pd.DataFrame, meta: dict[str, Any]) -> Summary:
    """clocks.c's resolutions, ClockBench's read costs, the timer's step and the TSC verdict, as
    `perflab clocks` recorded them beside the reads."""
    costs = read_table(frame)
    batch = meta.get("batch_ns")
    tables = []
    if meta.get("resolution"):
        tables.append(Table("resolution", "clocks.c", pd.DataFrame(meta["resolution"]), "{:,}"))
    title = "ClockBench (ns; median_ticks in TSC ticks; "
    notes = []
    if batch:
        costs["batch_ns"] = costs["method"].map(batch)
        title += "batch_ns = TSC-timed mean; "
    else:
        notes.append("batch_ns (a TSC-timed batch) is not in this file: `perflab clocks` times it")
    title += (
        "step in ticks for TSC methods, ns for clocks; repeats = share of equal reads; "
        f"resolved = the median read lasts {resolution.MIN_STEPS} steps)"
    )
    tables.append(Table("cost_ns", title, costs))
    lines = []
    tsc = meta.get("tsc")
    if tsc:
        lines.append(
            f"Using TSC frequency = {tsc['tsc_hz'] / 1e9:.6f} GHz ({tsc['tsc_hz_source']})"
        )
    unresolved = costs.loc[~costs["resolved"], "method"].tolist()
    if unresolved:
        notes_on = "batch_ns is the cost of a read" if batch else "time a batch of them instead"
        lines.append(
            f"per-read values of {', '.join(unresolved)} last less than {resolution.MIN_STEPS} "
            f"steps of their clock: unresolved, they show the clock's steps; {notes_on}"
        )
    if meta.get("timer_step_ticks") is not None:
        lines.append(
            f"timer step: {meta['timer_step_ticks']} ticks (perf assertions' begin/end reads; "
            f"a sample lasts >= {STEPS_PER_SAMPLE} steps)"
        )
    if tsc:
        flags = " ".join(f"{f}={'yes' if v else 'no'}" for f, v in tsc["flags"].items())
        lines += [
            f"TSC flags: {flags}",
            f"clocksource: {tsc['clocksource']} "
            f"(available: {' '.join(tsc['available_clocksources'])})",
            f"verdict: {tsc['verdict']}",
        ]
    values = {"tsc": tsc} if tsc else {}
    shown = costs if batch else None
    return Summary(lines, tables, values, lambda p: plot(frame, p, shown), notes)
