"""Saved results read back as reports: which experiment wrote a file, its summary, and where and
under which conditions it was measured, so a file alone gives back what its verb printed."""

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd
import pyarrow.parquet as pq

from perflab.engine import results
from perflab.errors import PerflabError
from perflab.reports import summaries

if TYPE_CHECKING:
    from matplotlib.figure import Figure

# What a reader needs to judge where a result comes from, in the order it is shown.
CONDITIONS = (
    ("hostname", "host"),
    ("cpu_model", "CPU"),
    ("arch", "architecture"),
    ("online_cpus", "online CPUs"),
    ("hypervisor", "hypervisor"),
    ("kernel", "kernel"),
    ("clocksource", "clocksource"),
    ("tsc_hz", "TSC rate (Hz)"),
    ("tsc_hz_source", "TSC rate from"),
    ("timer_step_ticks", "timer step (ticks)"),
    ("aslr_system", "ASLR (system, 0-2)"),
    ("aslr", "ASLR (runs)"),
    ("cpus", "CPUs used"),
    ("governor", "governor"),
    ("hardware_counters", "hardware counters"),
    ("rt_requested", "SCHED_RR asked"),
    ("mlock", "mlock"),
    ("perflab_version", "perflab"),
    ("python", "Python"),
    ("command", "command"),
)


@dataclass(frozen=True)
class Report:
    """One result file read back: its frame (metadata in attrs) and its experiment's summary."""

    path: str
    experiment: str
    frame: pd.DataFrame
    summary: summaries.Summary
    partial: str | None = None
    notes: list[str] = field(default_factory=list)

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
        return {label: meta[k] for k, label in CONDITIONS if meta.get(k) not in (None, "", [])}

    def plot(self, path: str | os.PathLike | None = None) -> "Figure":
        """Redraw the experiment's figure, written to path (.png, .svg, .pdf) when one is given."""
        from perflab.analysis import plot as plt

        target = None if path is None else plt.check_plot_path(path)
        if self.summary.plot is None:
            why = [n for n in self.notes if n.startswith("no figure")] or self.summary.lines
            raise PerflabError(f"{self.path}: nothing to plot ({'; '.join(why)})")
        return self.summary.plot(target)


def experiment_of(df: pd.DataFrame, where: str) -> tuple[str, list[str]]:
    """The experiment named in the metadata, else recognised by the columns (and said so)."""
    meta = results.metadata(df)
    name = meta.get("experiment")
    if isinstance(name, str) and name.endswith(" campaign"):
        return "campaign", [f"a campaign of {name.removesuffix(' campaign')}"]
    if isinstance(name, str) and name:
        return name, []
    guess = summaries.recognise(set(map(str, df.columns)))
    if "host" in df and (guess or meta.get("cluster")):
        return "campaign", [f"a campaign of {guess or 'clocks'}"]
    if guess is None:
        cols = ", ".join(map(str, df.columns[:6]))
        raise PerflabError(
            f"{where}: not a result perflab wrote (no experiment named; columns {cols})"
        )
    said = "no perflab metadata" if not meta else "no experiment in its metadata"
    return guess, [f"{said}: recognised as {guess} by its columns"]


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
        journal = json.loads((parts / "params.json").read_bytes())
        meta = dict(journal["meta"])
    except (OSError, ValueError, KeyError, TypeError):
        raise PerflabError(f"{parts}: a journal without readable params.json") from None
    chunks = sorted(parts.glob("chunk-*.parquet"))
    frames, bad = [], 0
    for chunk in chunks:
        try:
            frames.append(pq.read_table(chunk).to_pandas())
        except Exception:  # a chunk torn by a kill: the others still count
            bad += 1
    frames = [f for f in frames if not f.empty]
    df = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    why = f"an interrupted run's journal: {len(chunks) - bad} chunks read"
    if bad:
        why += f", {bad} unreadable skipped"
    target = parts.with_name(parts.name.removesuffix(".parts"))
    why += f"; the same command plus --resume {target} completes it"
    meta.update(params=journal.get("params"), complete=False, incomplete=why)
    return results.attach(df, meta)


def load(path: str | os.PathLike) -> tuple[pd.DataFrame, list[str]]:
    """A result file, or the journal an interrupted run left beside it; notes on what was read."""
    p = Path(path)
    parts = p if p.name.endswith(".parts") else p.with_name(p.name + ".parts")
    if parts.is_dir() and (p == parts or not p.exists()):
        return _journal(parts), []
    df = results.load(p)
    notes = []
    if parts.is_dir():
        notes.append(f"{parts} holds runs of an interrupted --resume; perflab report {parts}")
    return df, notes


def report(path: str | os.PathLike) -> Report:
    """Read a result perflab wrote and summarise it as its experiment's verb did."""
    df, notes = load(path)
    experiment, how = experiment_of(df, str(path))
    meta = results.metadata(df)
    try:
        summary = summaries.summarize(experiment, df, meta)
    except PerflabError as exc:
        raise PerflabError(f"{path}: {exc}") from None
    return Report(str(path), experiment, df, summary, partial_of(meta), how + notes + summary.notes)
