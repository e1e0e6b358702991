"""The first touch timed: each region is mapped fresh, advised, written one byte per 4 KiB page
between two reads of CLOCK_MONOTONIC_RAW (the C core's), and unmapped; the minor faults the
kernel counted for the process (getrusage) say which page size it gave."""

from __future__ import annotations

import mmap
import resource
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from perflab.analysis.summary import Summary, Table
from perflab.core import bindings
from perflab.core.lazy import pd
from perflab.lab.hugepage_fault import HugepageFaultPlan, MiB
from perflab.plan import controls
from perflab.plan.controls import PAGE
from perflab.running import inprocess
from perflab.store.recording import Recording
from perflab.system import provenance

if TYPE_CHECKING:
    from matplotlib.figure import Figure

CONDITIONS = {"4 KiB pages": mmap.MADV_NOHUGEPAGE, "huge pages": mmap.MADV_HUGEPAGE}
COLUMNS = ("condition", "mib", "rep", "ns", "faults", "ns_per_mib", "faults_per_mib")
HUGE = 2 * MiB  # the x86-64 and arm64 (4 KiB granule) huge page a region is aligned to
CLOCK = bindings.CLOCK_SOURCES["CLOCK_MONOTONIC_RAW"]
THP = Path("/sys/kernel/mm/transparent_hugepage/enabled")


def thp_mode() -> str:
    """The kernel's transparent huge page mode (always, madvise, never), or why none is known."""
    try:
        text = THP.read_text()
    except OSError:
        return "unknown (no transparent huge pages here)"
    chosen = [w.strip("[]") for w in text.split() if w.startswith("[")]
    return chosen[0] if chosen else text.strip()


def _now_ns() -> int:
    sec, nsec = bindings.clock_read(CLOCK, "read CLOCK_MONOTONIC_RAW")
    return sec * 1_000_000_000 + nsec


def touch(nbytes: int, advice: int) -> tuple[int, int]:
    """ns and minor faults to write one byte into each 4 KiB page of a fresh, huge-page
    aligned region of nbytes advised `advice`."""
    # private: an anonymous map is shared by default, and shared memory follows shmem's policy
    with mmap.mmap(-1, nbytes + HUGE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS) as region:
        view = np.frombuffer(region, dtype=np.uint8)
        start = -view.ctypes.data % HUGE
        region.madvise(advice, start, nbytes)
        pages = view[start : start + nbytes : PAGE]
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        began = _now_ns()
        pages[...] = 1
        ended = _now_ns()
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults
        del pages, view  # the region's buffer is exported until they go
    return ended - began, faults


@controls.typed_arguments
def run(
    mib: int = HugepageFaultPlan.mib,
    reps: int = HugepageFaultPlan.reps,
    *,
    recording: Recording | None = None,
) -> pd.DataFrame:
    """One row per (rep, condition), the conditions in turn within a rep: ns and minor faults
    of a first touch of `mib` MiB, and both per MiB.

    recording: where the rows go (a .parquet/.csv journal written in chunks of repetitions as
    they are measured, resumed if asked: inprocess.measure) and the progress that counts them."""
    HugepageFaultPlan(mib, reps).check()
    controls.check_rows({"--reps": reps}, len(CONDITIONS), 0, controls.PLANNED_ROW_BYTES)

    def touched(keys: pd.DataFrame) -> pd.DataFrame:
        rows = []
        for rep, name in keys.itertuples(index=False):
            ns, faults = touch(mib * MiB, CONDITIONS[name])
            rows.append({"condition": name, "mib": mib, "rep": rep, "ns": ns, "faults": faults,
                         "ns_per_mib": ns / mib, "faults_per_mib": faults / mib})  # fmt: skip
        return pd.DataFrame(rows)

    keys = pd.DataFrame(
        [(rep, name) for rep in range(reps) for name in CONDITIONS], columns=["rep", "condition"]
    )
    meta = {**provenance.metadata(), "experiment": "hugepage-fault", "thp": thp_mode(),
            "huge_page_bytes": HUGE}  # fmt: skip
    plan = inprocess.RowSchedule("hugepage-fault", keys, COLUMNS, {"mib": mib, "reps": reps},
                                 meta, unit=("rep",))  # fmt: skip
    return inprocess.measure(plan, touched, recording)


def summarize(df: pd.DataFrame) -> pd.DataFrame:
    """Per condition: median ns per MiB, median faults per MiB, and the time against 4 KiB
    pages'."""
    out = df.groupby("condition", sort=False)[["ns_per_mib", "faults_per_mib"]].median()
    out = out.rename(columns=lambda c: f"median_{c}").reset_index()
    small = out.loc[out["condition"] == "4 KiB pages", "median_ns_per_mib"]
    out["x_4k_pages"] = out["median_ns_per_mib"] / small.iloc[0] if len(small) else np.nan
    return out


def plot(df: pd.DataFrame, path: Any = None) -> Figure:
    """ns per MiB of every region per condition, log scale."""
    from perflab.analysis import plot as plt

    fig, ax = plt.figure()
    for name, g in df.groupby("condition", sort=False):
        ax.plot(g["rep"], g["ns_per_mib"], "o-", label=str(name))
    plt.log_axes(ax, x=False, y=True)
    ax.set_xlabel("repetition")
    ax.set_ylabel("ns per MiB, first touch")
    ax.legend()
    mib = int(df["mib"].iloc[0])
    return plt.save(fig, path, title=f"First touch of {mib} MiB: 4 KiB vs huge pages")


def summary(frame: pd.DataFrame, meta: dict[str, Any]) -> Summary:
    """ns and faults per MiB of a first touch in each page size, and the kernel's THP mode."""
    table = summarize(frame)
    mib, reps = int(frame["mib"].iloc[0]), int(frame["rep"].nunique())
    faults = dict(zip(table["condition"], table["median_faults_per_mib"], strict=True))
    small, huge = faults.get("4 KiB pages", np.nan), faults.get("huge pages", np.nan)
    gave = "gave huge pages" if huge < small / 2 else "gave no huge pages"
    lines = [f"transparent huge pages: {meta.get('thp', 'unknown')}; the kernel {gave} "
             f"({huge:g} faults per MiB, against {small:g} in 4 KiB pages)"]  # fmt: skip
    title = f"{mib} MiB x {reps} fresh regions (medians per MiB touched)"
    values = {"mib": mib, "reps": reps, "thp": meta.get("thp")}
    return Summary(lines, [Table("per_mib", title, table)], values, lambda p: plot(frame, p))
