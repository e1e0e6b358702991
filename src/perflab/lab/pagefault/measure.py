"""What a page fault costs: first touch of fresh pages vs touching them again vs mlock'ed pages.

Mapped pages are touched in as many passes as make a sample last MIN_STEPS timer steps
(resolution.py); fresh pages fault once, so a first touch of too few pages is unresolved."""

from __future__ import annotations

import os
import resource
from typing import TYPE_CHECKING, Any

import numpy as np

from perflab.analysis.summary import Summary, Table
from perflab.core import bindings
from perflab.core.lazy import pd
from perflab.errors import PerflabError
from perflab.lab import resolution
from perflab.lab.pagefault import PagefaultPlan
from perflab.plan import controls
from perflab.plan.controls import PAGE
from perflab.running import inprocess
from perflab.store import results
from perflab.store.recording import Recording
from perflab.system import machine, provenance

if TYPE_CHECKING:
    from matplotlib.figure import Figure

CONDITIONS = bindings.TOUCH_CONDITIONS
COLUMNS = ("condition", "pages", "rep", "passes", "ticks", "ticks_per_page", "ns_per_page")


@controls.typed_arguments
def run(
    pages: int = PagefaultPlan.pages,
    reps: int = PagefaultPlan.reps,
    *,
    recording: Recording | None = None,
) -> pd.DataFrame:
    """One row per (rep, condition): ticks to write one byte into each of `pages` pages,
    `passes` times over (once for a first touch), and the ticks per page touched.

    recording: where the rows go (a .parquet/.csv journal written in chunks of repetitions as
    they are measured, resumed if asked: inprocess.measure) and the progress that counts them."""
    PagefaultPlan(pages, reps).check()
    controls.check_rows({"--reps": reps}, len(CONDITIONS), 0, controls.PLANNED_ROW_BYTES)
    check_lockable(pages)
    hz, _ = machine.tsc_hz()
    floor = resolution.min_sample_ticks()

    def touched(keys: pd.DataFrame) -> pd.DataFrame:
        rows = []
        for rep in dict.fromkeys(keys["rep"]):
            out, passes = bindings.touch_pages(
                pages, floor, "touch pages (mlock needs root or ulimit -l)"
            )
            for name, idx in CONDITIONS.items():
                per_page = out[idx] / (pages * passes[idx])
                rows.append(
                    {
                        "condition": name,
                        "pages": pages,
                        "rep": rep,
                        "passes": passes[idx],
                        "ticks": out[idx],
                        "ticks_per_page": per_page,
                        "ns_per_page": per_page / hz * 1e9,
                    }
                )
        return pd.DataFrame(rows)

    keys = pd.DataFrame(
        [(rep, name) for rep in range(reps) for name in CONDITIONS], columns=["rep", "condition"]
    )
    meta = {**provenance.metadata(), "experiment": "pagefault", "page_bytes": 4096,
            "min_sample_steps": resolution.MIN_STEPS}  # fmt: skip
    plan = inprocess.RowSchedule("pagefault", keys, COLUMNS, {"pages": pages, "reps": reps}, meta,
                          unit=("rep",))  # fmt: skip
    return inprocess.measure(plan, touched, recording)


def check_lockable(pages: int) -> None:
    """Refuse, before measuring, more pages than this user may mlock (the third condition):
    RLIMIT_MEMLOCK binds all but root (8 MiB for a user on many systems)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    if os.geteuid() == 0 or soft == resource.RLIM_INFINITY or pages * PAGE <= soft:
        return
    raise PerflabError(
        f"--pages {pages}: the mlock'ed condition locks {pages * PAGE >> 10} KiB, more than this "
        f"user may lock ({soft >> 10} KiB, ulimit -l); use --pages {soft // PAGE} or fewer, "
        "or run as root"
    )


def summarize(df: pd.DataFrame, step: int | None = None) -> pd.DataFrame:
    """Per condition: passes per sample, min and median ticks per page, ns per page, and the
    fault's share; a figure from a sample under MIN_STEPS timer steps is NaN."""
    step = step or resolution.recorded_step(results.metadata(df), df["ticks"])
    rows = []
    for name in CONDITIONS:
        g = df[df["condition"] == name]
        ticks = resolution.figures(g["ticks_per_page"], g["ticks"], step)
        ns = resolution.figures(g["ns_per_page"], g["ticks"], step)
        rows.append(
            {
                "condition": name,
                "passes": int(g["passes"].max()) if "passes" in g else 1,
                "min_ticks_per_page": ticks["min"],
                "median_ticks_per_page": ticks["median"],
                "median_ns_per_page": ns["median"],
                "unresolved": ticks["unresolved"],
            }
        )
    out = pd.DataFrame(rows)
    again = out.loc[out["condition"] == "touch again", "median_ticks_per_page"].iloc[0]
    out["x_touch_again"] = out["median_ticks_per_page"] / again if again > 0 else np.nan
    return out


table = summarize  # its earlier name


def plot(df: pd.DataFrame, path: Any = None) -> Figure:
    """Ticks per page of every repetition per condition, log scale."""
    from perflab.analysis import plot as plt

    fig, ax = plt.figure()
    step = resolution.recorded_step(results.metadata(df), df["ticks"])
    for name in CONDITIONS:
        g = df[df["condition"] == name]
        g = g[resolution.resolved(g["ticks"], step)]
        ax.plot(g["rep"], g["ticks_per_page"], "o-", label=name)
    plt.log_axes(ax, x=False, y=True)
    ax.set_xlabel("repetition")
    ax.set_ylabel("TSC ticks per 4 KiB page")
    ax.legend()
    title = f"Page-fault cost, {int(df['pages'].iloc[0])} pages per region"
    return plt.save(
        fig, path, title=f"{title}; samples under {resolution.MIN_STEPS} steps left out"
    )


def summary(frame: pd.DataFrame, meta: dict[str, Any]) -> Summary:
    """Ticks and ns per page: first touch, touching again, mlock'ed."""
    pages, reps = int(frame["pages"].iloc[0]), int(frame["rep"].nunique())
    step = resolution.recorded_step(meta, frame["ticks"])
    title = (f"{pages} pages x {reps} regions (ticks and ns per 4 KiB page touched; mapped pages "
             "in passes)")  # fmt: skip
    per_page = summarize(frame, step)
    lines = []
    if per_page["unresolved"].any():
        lines.append(resolution.unresolved_note(int(per_page["unresolved"].sum()), "regions", step))
    values = {"pages": pages, "reps": reps, "timer_step_ticks": step}
    return Summary(lines, [Table("per_page", title, per_page)], values, lambda p: plot(frame, p))
