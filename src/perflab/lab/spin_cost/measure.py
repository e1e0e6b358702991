"""The spin loop timed at each length of the plan: a sample is one call of spin(turns)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from perflab.analysis.summary import Summary, Table
from perflab.core.lazy import pd
from perflab.lab.spin_cost import SpinCostPlan
from perflab.running import timing
from perflab.store import results
from perflab.store.recording import Recording
from perflab.system import provenance

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def run(
    turns: tuple[int, ...] = SpinCostPlan.turns,
    samples: int = SpinCostPlan.samples,
    *,
    recording: Recording | None = None,
) -> pd.DataFrame:
    """One row per sample: turns, sample, ticks (net ticks of one call of spin(turns)), saved
    whole at the recording's output, if any, once measured."""
    SpinCostPlan(turns, samples).check()
    recording = recording or Recording()
    recording.check_whole("spin-cost")
    targets = {n: timing.spin(n) for n in turns}
    timing.calibrate(*targets.values())
    rows = []
    for sample in range(samples):  # the lengths in turn: a host's slower spell slows them all
        for n, target in targets.items():
            rows.append((n, sample, float(timing.sample(target, 1)[1][0])))
    meta = {**provenance.metadata(), "experiment": "spin-cost", "samples": samples}
    frame = pd.DataFrame(rows, columns=["turns", "sample", "ticks"])
    frame = frame.sort_values(["turns", "sample"], ignore_index=True)
    return recording.keep(results.attach(frame, meta))


def summarize(df: pd.DataFrame) -> pd.DataFrame:
    """Per length: the median ticks of a call, and of one turn."""
    out = df.groupby("turns")["ticks"].median().rename("median_ticks").reset_index()
    out["ticks_per_turn"] = out["median_ticks"] / out["turns"]
    return out


def plot(df: pd.DataFrame, path: Any = None) -> Figure:
    """Median ticks per call against turns: a straight line when every turn costs the same."""
    from perflab.analysis import plot as plt

    table = summarize(df)
    fig, ax = plt.figure()
    ax.plot(table["turns"], table["median_ticks"], "o-")
    ax.set_xlabel("turns of the spin loop")
    ax.set_ylabel("median ticks per call")
    return plt.save(fig, path, title="The core's spin loop")


def summary(frame: pd.DataFrame, meta: dict[str, Any]) -> Summary:
    """What `perflab run spin-cost` prints, and `perflab report` prints again from the file."""
    table = summarize(frame)
    low, high = table["ticks_per_turn"].min(), table["ticks_per_turn"].max()
    return Summary(
        [f"{low:.2f}-{high:.2f} ticks per turn over {len(table)} lengths"],
        [Table("lengths", "median ticks per call and per turn", table)],
        plot=lambda path: plot(frame, path),
    )
