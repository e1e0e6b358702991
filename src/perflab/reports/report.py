"""Results read back as reports: which experiment wrote a frame, its summary, and where and
under which conditions it was measured, so a file alone gives back what its verb printed."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from perflab import __version__, errors
from perflab.analysis.summary import Summary
from perflab.core import files
from perflab.core.lazy import pd, pq
from perflab.errors import PerflabError
from perflab.lab import registry
from perflab.plan.controls import typed_arguments
from perflab.store import filelock, results, schema
from perflab.store.identity import key_digest

if TYPE_CHECKING:
    from matplotlib.figure import Figure

# The conditions a result was measured under, in the order a report shows them: the metadata
# key, its label, and what differs in effect when two results differ in it (diff warns then;
# None: it does not).
CONDITIONS = (
    ("hostname", "host", "machine"),
    ("cpu_model", "CPU", "CPU model"),
    ("arch", "architecture", None),
    ("online_cpus", "online CPUs", None),
    ("hypervisor", "hypervisor", "hypervisor"),
    ("kernel", "kernel", "kernel"),
    ("clocksource", "clocksource", "clocksource"),
    ("tsc_hz", "TSC rate (Hz)", "TSC rate"),
    ("tsc_hz_source", "TSC rate from", None),
    ("timer_step_ticks", "timer step (ticks)", None),
    ("aslr_system", "ASLR (system, 0-2)", "system ASLR"),
    ("aslr", "ASLR (runs)", "ASLR"),
    ("cpus", "CPUs used", "CPUs"),
    ("cpu_choice", "CPU chosen", None),
    ("governor", "governor", "governor"),
    ("hardware_counters", "hardware counters", None),
    ("rt_requested", "real-time asked", None),
    ("rt_granted", "real-time granted", None),
    ("rt_throttling", "real-time throttling", None),
    ("mlock", "mlock", None),
    ("program", "program", "program"),
    ("perflab_version", "perflab", "perflab version"),
    ("python", "Python", None),
    ("command", "command", None),
)


@dataclass(frozen=True)
class Report:
    """One result file read back: its frame (metadata in attrs) and its experiment's summary."""

    path: str | None  # None: a frame in memory (what a verb just measured, a notebook's)
    experiment: str
    frame: pd.DataFrame
    summary: Summary
    partial: str | None = None
    notes: list[str] = field(default_factory=list)  # how the frame was read
    # What makes its numbers doubtful (rows off its plan, a newer perflab): warned when read,
    # and first among the notes, so every rendering says it.
    warnings: list[str] = field(default_factory=list)

    @property
    def meta(self) -> dict[str, Any]:
        """The metadata the file carried."""
        return results.metadata(self.frame)

    @property
    def tables(self) -> dict[str, pd.DataFrame]:
        """The summary's tables by name, in full."""
        return {t.name: t.frame for t in self.summary.tables}

    def conditions(self) -> dict[str, Any]:
        """Where and how it was measured, labelled; what the file did not record is left out."""
        meta = self.meta
        return {label: meta[k] for k, label, _ in CONDITIONS if meta.get(k) not in (None, "", [])}

    def plot(self, path: str | os.PathLike | None = None, figure: Figure | None = None) -> Figure:
        """Redraw the experiment's figure (or stamp the figure given: a verb's own view),
        labelled with the machine, written to path (.png, .svg, .pdf) when one is given."""
        from perflab.analysis import plot as plt

        target = None if path is None else plt.check_plot_path(path)
        if figure is None:
            if self.summary.plot is None:
                why = [n for n in self.summary.notes if n.startswith("no figure")]
                raise PerflabError(
                    f"{self.path or self.experiment}: nothing to plot "
                    f"({'; '.join(why or self.summary.lines)})"
                )
            figure = self.summary.plot(None)
        return plt.stamp(figure, figure_label(self.meta), target)


def figure_label(meta: dict[str, Any]) -> str:
    """perflab's version and the machine a result was measured on, for its figure's corner."""
    if not meta.get("cpu_model"):
        return ""  # a frame perflab did not write: no machine to name
    cpu = str(meta["cpu_model"]).replace("(R)", "").replace("(TM)", "")
    cpu += f" ({meta['cpu_id']})" if meta.get("cpu_id") else ""
    cpus, hv = meta.get("online_cpus"), meta.get("hypervisor")
    host = f"{cpus}-vCPU {hv} guest" if hv else f"{cpus}-CPU host"
    return f"perflab {meta.get('perflab_version', '?')} · {cpu} · {host}"


def experiment_of(df: pd.DataFrame, where: str) -> tuple[str, list[str]]:
    """The experiment named in the metadata, else recognised by the columns (and said so); a
    campaign of any experiment is "campaign"."""
    meta = results.metadata(df)
    name = meta.get("experiment")
    if isinstance(name, str) and name.endswith(" campaign"):
        return "campaign", [f"a campaign of {name.removesuffix(' campaign')}"]
    if isinstance(name, str) and name:
        return name, []
    guess = registry.recognise(set(map(str, df.columns)))
    if "host" in df and (guess or meta.get("cluster")):
        return "campaign", [f"a campaign of {guess.name if guess else 'clocks'}"]
    if guess is None:
        cols = ", ".join(map(str, df.columns[:6]))
        raise PerflabError(
            f"{where}: not a result perflab wrote (no experiment named; columns {cols})"
        )
    said = "no perflab metadata" if not meta else "no experiment in its metadata"
    return guess.name, [f"{said}: recognised as {guess.name} by its columns"]


def summarize(experiment: str, df: pd.DataFrame, meta: dict[str, Any]) -> Summary:
    """The summary of `experiment` for this frame: its lab module's, or a campaign's per host."""
    if experiment == "campaign":
        from perflab.reports import fleet

        return fleet.summary(df, meta)
    return registry.get(experiment).summary(df, meta)


def partial_of(meta: dict) -> str | None:
    """Why a journaled result is partial (None when it is complete or was never journaled)."""
    if meta.get("incomplete"):
        return str(meta["incomplete"])
    if meta.get("complete") is False:
        return "the run was interrupted before every planned run was measured"
    return None


def _journal(parts: Path) -> pd.DataFrame:
    """The rows and metadata of an interrupted run's journal (PATH.parts/), read only."""
    try:
        recorded = json.loads(files.read(parts / "params.json"))
        meta = dict(recorded["meta"])
    except (OSError, ValueError, KeyError, TypeError, PerflabError):
        raise PerflabError(f"{parts}: a journal without readable params.json") from None
    chunks = sorted(parts.glob("chunk-*.parquet"))
    frames, bad = [], 0
    for chunk in chunks:
        try:
            with files.open_read(chunk) as f:  # a FIFO: refused, never waited on
                frames.append(pq.read_table(f).to_pandas())
        except Exception:  # a chunk torn by a kill: the others still count
            bad += 1
    frames = [f for f in frames if not f.empty]
    target = parts.with_name(parts.name.removesuffix(".parts"))
    running = filelock.writer(target)
    if not frames:
        raise _nothing_yet(target, running)
    df = pd.concat(frames, ignore_index=True)
    why = (
        f"a run still going ({running} is writing it): the {_chunks(len(chunks) - bad)} it "
        "has written so far"
        if running
        else f"an interrupted run's journal: {_chunks(len(chunks) - bad)} read"
    )
    if bad:
        why += f", {bad} unreadable skipped"
    if not running:
        why += f"; the same command plus --resume {target} completes it"
    meta.update(params=recorded.get("params"), identity=recorded.get("identity"), complete=False,
                incomplete=why)  # fmt: skip
    schema.check(df, meta, parts)
    return results.attach(df, meta)


def _chunks(n: int) -> str:
    return f"{n} chunk" if n == 1 else f"{n} chunks"


def _nothing_yet(target: Path, running: str | None) -> PerflabError:
    """A run that has recorded no row: still going, or interrupted before its first."""
    if running:
        return PerflabError(
            f"{target}: a run still going ({running} is writing it) has recorded no run yet; "
            "its rows reach the disk about every second"
        )
    return PerflabError(
        f"{target}: an interrupted run that recorded no run; the same command plus "
        f"--resume {target} measures them"
    )


def load(path: str | os.PathLike) -> tuple[pd.DataFrame, list[str]]:
    """A result file, or the journal an interrupted run left beside it; notes on what was read."""
    p = Path(path)
    parts = p if p.name.endswith(".parts") else p.with_name(p.name + ".parts")
    if parts.is_dir() and (p == parts or not p.exists()):
        return _journal(parts), []
    running = None if p.exists() else filelock.writer(p)
    if running:
        raise _nothing_yet(p, running)
    df = results.load(p)
    notes = []
    if parts.is_dir():
        notes.append(f"{parts} holds runs of an interrupted --resume; perflab report {parts}")
    return df, notes


def of_frame(
    df: pd.DataFrame,
    path: str | None = None,
    notes: list[str] | None = None,
    change: float | None = None,
    metrics: str | None = None,
) -> Report:
    """The report of a frame: what a verb prints of what it just measured, and what `perflab
    report` prints of the file it saved; `change`, where the experiment weighs its undecided
    points against one (the registry's weighs_change), the change of interest instead of its
    default; `metrics` (a comma list), the metrics it decides on besides time, where it does."""
    experiment, how = experiment_of(df, path or "the frame")
    meta = results.metadata(df)
    if change is not None:
        if not registry.get(experiment.removesuffix(" campaign")).weighs_change:
            weighing = [e.name for e in registry.EXPERIMENTS.values() if e.weighs_change]
            raise PerflabError(
                f"--change weighs the undecided points of a {' or '.join(weighing)} result, and "
                f"this result is of {experiment} (perflab diff BEFORE AFTER --change weighs two "
                "results)"
            )
        meta = {**meta, "change": change}
    if metrics is not None:
        from perflab.plan.metrics import check

        asked = check(metrics, "report")
        if not registry.get(experiment.removesuffix(" campaign")).weighs_change:
            raise PerflabError(f"--metric decides a compare result, and this result is of "
                               f"{experiment}")  # fmt: skip
        meta = {**meta, "metrics": list(asked)}
    summary = summarize(experiment, df, meta)
    return Report(path, experiment, df, summary, partial_of(meta), how + (notes or []))


def plan_problems(df: pd.DataFrame, meta: dict[str, Any], where: str) -> list[str]:
    """What the rows are against the plan the file's identity records: rows repeated, runs
    missing from a file that says complete, rows the plan never made (nothing when it records
    no plan)."""
    identity = meta.get("identity")
    plan = identity.get("plan") if isinstance(identity, dict) else None
    key = plan.get("key") if isinstance(plan, dict) else None
    if not isinstance(plan, dict) or not key or not set(key) <= set(map(str, df.columns)):
        return []
    out = []
    repeated = int(df.duplicated(key).sum())
    if repeated:
        said = ", ".join(key)
        out.append(errors.warning("rows_duplicated", path=where, rows=repeated, key=said))
    runs, distinct = plan.get("runs"), len(df) - repeated
    if not isinstance(runs, int) or key_digest(df, key) == plan.get("sha256"):
        return out
    if distinct > runs:
        what = f"{distinct - runs} more distinct ({', '.join(key)}) than the {runs} planned"
        out.append(errors.warning("rows_unplanned", path=where, what=what))
    elif distinct == runs:
        what = f"some of its ({', '.join(key)}) are not the planned ones"
        out.append(errors.warning("rows_unplanned", path=where, what=what))
    elif partial_of(meta) is None:
        out.append(
            errors.warning("rows_missing", path=where, missing=runs - distinct, planned=runs)
        )
    return out


def problems(df: pd.DataFrame, where: str) -> list[str]:
    """What a reader must know before trusting a file's numbers: a newer perflab wrote it, or
    its rows are not its plan's."""
    meta = results.metadata(df)
    newer = results.newer_perflab(meta)
    said = [errors.warning("newer_perflab", path=where, theirs=newer, ours=__version__)]
    return (said if newer else []) + plan_problems(df, meta, where)


@typed_arguments
def report(
    path: str | os.PathLike, change: float | None = None, metrics: str | None = None
) -> Report:
    """Read a result perflab wrote and summarise it as its experiment's verb did (`change`,
    `metrics`: see of_frame); what makes its numbers doubtful is warned and noted first."""
    df, notes = load(path)
    found = problems(df, str(path))
    for line in found:
        errors.warn(line)
    try:
        return replace(of_frame(df, str(path), found + notes, change, metrics), warnings=found)
    except PerflabError as exc:
        message = str(exc)
        raise PerflabError(
            message if message.startswith(str(path)) else f"{path}: {message}"
        ) from None
