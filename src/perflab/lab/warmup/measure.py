"""P fresh processes of a program that prints one time per iteration, or that repeats its region
in the probe's loop (PERFLAB_PROBE_LOOP), each execution's series classified by analysis.warmup.
Each child runs as compare's children do: an empty environment but for padding of a size drawn
at random, ASLR off, pinned to the quietest CPU or --cpu, no shell; its stdout goes to a private
file perflab reads once it has exited, its probe records to the run's record."""

from __future__ import annotations

import math
import os
import tempfile
import time
from typing import TYPE_CHECKING, Any

import numpy as np

from perflab.analysis import steady
from perflab.analysis import warmup as analysis
from perflab.analysis.summary import Summary, Table
from perflab.core.lazy import pd
from perflab.errors import PerflabError
from perflab.lab.warmup import WarmupPlan
from perflab.running import cpuchoice, spawn
from perflab.store import results
from perflab.store.recording import Recording
from perflab.system import provenance

if TYPE_CHECKING:
    from matplotlib.figure import Figure

COLUMNS = ("execution", "iteration", "time", "env_size")


def run(
    program: tuple[str, ...] = WarmupPlan.program,
    executions: int = WarmupPlan.executions,
    unit: str = WarmupPlan.unit,
    env_max: int = WarmupPlan.env_max,
    seed: int = WarmupPlan.seed,
    timeout: float = WarmupPlan.timeout,
    cpus: tuple[int, ...] = WarmupPlan.cpus,
    iterations: int = WarmupPlan.iterations,
    until_steady: bool = WarmupPlan.until_steady,
    steady_width: float = WarmupPlan.steady_width,
    *,
    recording: Recording | None = None,
) -> pd.DataFrame:
    """One row per (execution, iteration): the time the program printed for that iteration,
    in `unit`, or its probe's ticks for it (each less the timer's cost, as compare's), and the
    env size its process had; saved whole at the recording's output. until_steady: stop once
    the steady value over executions is known to steady_width (analysis/steady.py)."""
    cpus = tuple(cpus or ())
    WarmupPlan(tuple(program), executions, unit, env_max, seed, timeout, cpus, iterations,
               until_steady, steady_width).check()  # fmt: skip
    recording = recording or Recording()
    recording.check_whole("warmup")
    argv = [spawn.check_program(program[0]), *program[1:]]
    choice = cpuchoice.check_asked(cpus) if cpus else cpuchoice.pick(1)
    sizes = np.random.default_rng(seed).integers(0, env_max + 1, executions)
    frames = []
    step = recording.on_start(executions, 0) if recording.on_start else None
    tick = step if callable(step) else recording.progress if callable(recording.progress) else None
    cpuchoice.say(choice.line)
    overhead = spawn.timer_overhead()
    sources: list[str] = []
    seconds: list[float] = []
    done: list[analysis.Execution] = []
    width = math.inf
    for i, size in enumerate(sizes):
        t0 = time.perf_counter()
        times, source = _execution(argv, int(size), choice.cpus, timeout, i, iterations,
                                   overhead)  # fmt: skip
        seconds.append(time.perf_counter() - t0)
        if sources and source != sources[0]:
            raise PerflabError(f"execution {i} of {argv[0]}: {SOURCES[source]}, where execution "
                               f"0 {SOURCES[sources[0]]}: one kind of times a run")  # fmt: skip
        sources.append(source)
        frames.append(pd.DataFrame({"execution": i, "iteration": np.arange(times.size),
                                    "time": times, "env_size": int(size)}))  # fmt: skip
        if tick:
            tick(1)
        if until_steady:
            done.append(analysis.classify(times))
            width = steady.relative_width(done)
            if width <= steady_width:
                break
    df = pd.concat(frames, ignore_index=True)
    probed = sources[0] == "probe"
    meta = {**provenance.metadata(), "experiment": "warmup", "unit": "ticks" if probed else unit,
            "source": sources[0], "params": {"program": list(program), "executions": executions,
                                             "unit": unit, "env_max": env_max, "seed": seed,
                                             "timeout": timeout, "cpus": list(cpus),
                                             "iterations": iterations,
                                             "until_steady": until_steady,
                                             "steady_width": steady_width},
            "cpus": list(choice.cpus), "aslr": "off"}  # fmt: skip
    if probed:
        meta["timer_overhead_ticks"] = overhead
    if until_steady:
        unsteady = sum(e.steady is None for e in done)
        meta["until_steady"] = stopped(seconds, executions, steady_width, width, unsteady)
    return recording.keep(results.attach(df, meta))


# Where an execution's times came from, as a refusal names it.
SOURCES = {"probe": "its probe sent a record per iteration", "stdout": "it printed its times"}


def stopped(
    seconds: list[float], most: int, asked: float, width: float, unsteady: int
) -> dict[str, Any]:
    """What --until-steady ran, reached and saved against running all `most` executions:
    the executions not run, at the mean time of those that ran; and the executions that
    reached no steady state (while one has none, there is no steady value to narrow)."""
    ran = len(seconds)
    each = sum(seconds) / ran
    return {"width": asked, "reached": width <= asked,
            "width_reached": width if math.isfinite(width) else None, "executions": ran,
            "most": most, "saved_executions": most - ran, "seconds": sum(seconds),
            "saved_s": (most - ran) * each, "no_steady_state": unsteady}  # fmt: skip


def _execution(
    argv: list[str],
    size: int,
    cpus: tuple[int, ...],
    timeout: float,
    i: int,
    iterations: int = WarmupPlan.iterations,
    overhead: int = 0,
) -> tuple[np.ndarray, str]:
    """One fresh process's times and where they came from: its probe's iterations where it
    ran the probe's loop, else what it printed; refused in one line if it failed, printed
    other, or gave neither."""
    devnull = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
    try:
        with tempfile.TemporaryFile() as out:
            options = spawn.SpawnOptions(aslr="off", cpus=cpus, timeout=timeout, stdin=devnull,
                                         stdout=out.fileno(), stderr=devnull,
                                         iterations=iterations)  # fmt: skip
            runs = spawn.run_env_sizes(argv, np.array([size]), "A", {}, options)
            if runs.size == 0:
                raise KeyboardInterrupt
            status = int(runs["status"][0])
            if status != spawn.bindings.RUN_OK:
                raise PerflabError(
                    f"execution {i} of {argv[0]}: {spawn.STATUS[status]}, not a clean exit"
                )
            out.seek(0)
            text = out.read().decode(errors="replace")
    finally:
        os.close(devnull)
    return _series(runs[0], text, i, argv[0], overhead)


def _series(record: np.record, text: str, i: int, program: str, overhead: int
            ) -> tuple[np.ndarray, str]:  # fmt: skip
    """A run's series: the probe's ticks per iteration, each less the timer's cost (an
    iteration cheaper than it counts as 1 tick, as compare counts it), where the run sent a
    record per iteration of the loop; else the times its stdout holds."""
    k = int(record["iterations"])
    probed = bool(int(record["flags"]) & spawn.bindings.RUN_HAS_PROBE) and k > 0
    if probed and k > 1:
        if k < analysis.MIN_ITERATIONS:
            raise PerflabError(
                f"execution {i} of {program} sent {k} probe records; classifying warm-up needs "
                f"{analysis.MIN_ITERATIONS} iterations or more"
            )
        raw = record["iteration_ticks"][:k].astype(np.float64) - overhead
        return np.maximum(raw, 1.0), "probe"
    if not text.strip():
        sent = ("sent one probe record (PERFLAB_PROBE_BEGIN/END) and printed nothing" if probed
                else "printed no times and sent no probe records")  # fmt: skip
        raise PerflabError(
            f"execution {i} of {program} {sent}: print one time a line, or repeat the region "
            "in PERFLAB_PROBE_LOOP (perflab_probe.h)"
        )
    return parse(text, i), "stdout"


def parse(text: str, execution: int = 0) -> np.ndarray:
    """The times of one execution's stdout, one number a line (blank lines skipped)."""
    values = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            values.append(float(line))
        except ValueError:
            raise PerflabError(
                f"execution {execution}, line {n}: {line[:40]!r} is not a time (one number a line)"
            ) from None
    if len(values) < analysis.MIN_ITERATIONS:
        raise PerflabError(
            f"execution {execution} printed {len(values)} times; classifying warm-up needs "
            f"{analysis.MIN_ITERATIONS} iterations or more"
        )
    return np.asarray(values)


def classified(frame: pd.DataFrame) -> analysis.Executions:
    """The frame's executions, each series in iteration order, classified."""
    ordered = frame.sort_values(["execution", "iteration"])
    return analysis.classify_executions(
        [g["time"].to_numpy() for _, g in ordered.groupby("execution", sort=True)]
    )


def summarize(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per execution: its env size, class, outliers, change points, steady start
    and steady value with its interval (Executions.frame)."""
    per = classified(frame).frame()
    sizes = frame.groupby("execution")["env_size"].first().to_numpy()
    per.insert(1, "env_size", sizes)
    return per


def plot(frame: pd.DataFrame, path: Any = None, unit: str = "") -> Figure:
    """Each execution's series with its change points and steady state marked."""
    from perflab.analysis.warmup_plot import plot_executions

    return plot_executions(classified(frame), path, unit=unit)


def _span(m: tuple[float, float, float], fmt: str) -> str:
    """A median's interval as text, or why it has none (too few executions for one)."""
    if not (np.isfinite(m[1]) and np.isfinite(m[2])):
        return " (too few executions for an interval)"
    return f" [{m[1]:{fmt}}, {m[2]:{fmt}}]"


def _interval(e: analysis.Execution) -> str:
    """An execution's steady value with its interval."""
    return "" if e.steady is None else f"{e.steady[0]:,.4g}{_span(e.steady, ',.4g')}"


def _of(meta: dict[str, Any]) -> str:
    """Whose executions, and how fresh each was, for a callable's (perflab.warmup): a
    program's are always fresh processes."""
    if "fresh" not in meta:
        return ""
    return f" of {meta.get('target', 'the callable')} ({meta.get('fresh_means', meta['fresh'])})"


def summary(frame: pd.DataFrame, meta: dict[str, Any]) -> Summary:
    """Per execution its class, steady start and steady value with its interval; across them
    consistent or inconsistent, with the count of each class (warmup_stats' table)."""
    unit = str(meta.get("unit", ""))
    result = classified(frame)
    per = summarize(frame)
    shown = pd.DataFrame({
        "execution": per["execution"],
        "class": per["classification"],
        "steady_start": per["steady_start"].astype(object).where(per["steady_start"].notna(), "-"),
        f"steady ({unit})": [_interval(e) or "-" for e in result.executions],
    })  # fmt: skip
    counts = ", ".join(f"{n} {c}" for c, n in result.counts.items() if n)
    lines = [f"{len(result.executions)} executions{_of(meta)}: {result.classification} ({counts})"]
    if "call_overhead_ns" in meta:
        lines.append(f"each time includes the call into Python, {meta['call_overhead_ns']:,.4g} "
                     "ns (an empty call's median), the same in every iteration")  # fmt: skip
    if result.steady is not None and result.steady_start is not None:
        s, v = result.steady_start, result.steady
        wide = not np.isfinite([*s[1:], *v[1:]]).all()
        said = (f"steady state from iteration {s[0]:g}, at {v[0]:,.4g} {unit} (medians over "
                "executions; too few of them for a 95 % interval)") if wide else (
                f"steady state from iteration {s[0]:g}{_span(s, 'g')}, at {v[0]:,.4g}"
                f"{_span(v, ',.4g')} {unit} (medians over executions, 95 % intervals)")  # fmt: skip
        lines.append(said)
    if meta.get("source") == "probe":
        lines.append(f"times: the probe's ticks of each iteration, less the timer's cost "
                     f"({meta.get('timer_overhead_ticks', 0)} ticks)")  # fmt: skip
    lines += _until_steady_lines(meta.get("until_steady"))
    title = f"per execution ({unit} per iteration; steady: median [95 % interval])"
    values = {"classification": result.classification, "counts": result.counts, "unit": unit,
              "steady_start": result.steady_start, "steady": result.steady,
              "source": meta.get("source", "stdout"),
              "until_steady": meta.get("until_steady")}  # fmt: skip
    if "fresh" in meta:
        values.update(target=meta.get("target"), fresh=meta["fresh"])
    tables = [Table("executions", title, per, shown=shown)]
    return Summary(lines, tables, values, lambda p: plot(frame, p, unit))


def _until_steady_lines(record: dict[str, Any] | None) -> list[str]:
    """What --until-steady ran and saved, or why it ran every execution."""
    if not record:
        return []
    ran, most, asked = record["executions"], record["most"], record["width"]
    got, unsteady = record["width_reached"], record.get("no_steady_state", 0)
    if got is not None:
        where = f"the steady value's 95 % interval {got:.2%} of its median"
    elif unsteady:
        where = (f"{unsteady} of them reached no steady state, so there is no steady value "
                 "over executions to narrow")  # fmt: skip
    else:
        where = "too few of them for a finite interval"
    if record["reached"]:
        return [
            f"until steady: stopped after {ran} of {most} executions, {where} (asked "
            f"{asked:.2%}): {record['saved_executions']} executions and about "
            f"{record['saved_s']:.1f} s saved against all {most}"
        ]
    return [f"until steady: not reached in {ran} executions, {where} (asked {asked:.2%})"]
