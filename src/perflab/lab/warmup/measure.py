"""P fresh processes of a program that prints one time per iteration, each execution's series
classified by analysis.warmup. Each child runs as compare's children do: an empty environment
but for padding of a size drawn at random, ASLR off, pinned to the quietest CPU or --cpu, no
shell; its stdout goes to a private file perflab reads once it has exited."""

from __future__ import annotations

import os
import tempfile
from typing import TYPE_CHECKING, Any

import numpy as np

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
    *,
    recording: Recording | None = None,
) -> pd.DataFrame:
    """One row per (execution, iteration): the time the program printed for that iteration,
    in `unit`, and the env size its process had; saved whole at the recording's output."""
    cpus = tuple(cpus or ())
    WarmupPlan(tuple(program), executions, unit, env_max, seed, timeout, cpus).check()
    recording = recording or Recording()
    recording.check_whole("warmup")
    argv = [spawn.check_program(program[0]), *program[1:]]
    choice = cpuchoice.check_asked(cpus) if cpus else cpuchoice.pick(1)
    sizes = np.random.default_rng(seed).integers(0, env_max + 1, executions)
    frames = []
    step = recording.on_start(executions, 0) if recording.on_start else None
    tick = step if callable(step) else recording.progress if callable(recording.progress) else None
    cpuchoice.say(choice.line)
    for i, size in enumerate(sizes):
        times = _execution(argv, int(size), choice.cpus, timeout, i)
        frames.append(pd.DataFrame({"execution": i, "iteration": np.arange(times.size),
                                    "time": times, "env_size": int(size)}))  # fmt: skip
        if tick:
            tick(1)
    df = pd.concat(frames, ignore_index=True)
    meta = {**provenance.metadata(), "experiment": "warmup", "unit": unit,
            "params": {"program": list(program), "executions": executions, "unit": unit,
                       "env_max": env_max, "seed": seed, "timeout": timeout,
                       "cpus": list(cpus)},
            "cpus": list(choice.cpus), "aslr": "off"}  # fmt: skip
    return recording.keep(results.attach(df, meta))


def _execution(
    argv: list[str], size: int, cpus: tuple[int, ...], timeout: float, i: int
) -> np.ndarray:
    """One fresh process's printed times, refused in one line if it failed or printed other."""
    devnull = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
    try:
        with tempfile.TemporaryFile() as out:
            options = spawn.SpawnOptions(aslr="off", cpus=cpus, timeout=timeout, stdin=devnull,
                                         stdout=out.fileno(), stderr=devnull)  # fmt: skip
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
    return parse(text, i)


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
    title = f"per execution ({unit} per iteration; steady: median [95 % interval])"
    values = {"classification": result.classification, "counts": result.counts, "unit": unit,
              "steady_start": result.steady_start, "steady": result.steady}  # fmt: skip
    if "fresh" in meta:
        values.update(target=meta.get("target"), fresh=meta["fresh"])
    tables = [Table("executions", title, per, shown=shown)]
    return Summary(lines, tables, values, lambda p: plot(frame, p, unit))
