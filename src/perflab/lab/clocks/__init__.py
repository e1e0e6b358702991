"""The clock lab: clocks.c's resolution table, ClockBench's read costs, and a TSC verdict. The
plan and registry entry are here, light enough for --help; run, the tables, plot and summary
load from measure.py on first use."""

from dataclasses import dataclass

from perflab.plan import controls
from perflab.plan.base import Plan, option
from perflab.plan.experiment import Experiment, lazy_api


@dataclass(frozen=True)
class ClocksPlan(Plan):
    """The back-to-back reads of each clock, and which clocks (none named: all of them)."""

    samples: int = option("--samples", 1000, "Back-to-back reads per clock (ClockBench used "
                          "255).", least=1, each_bytes=controls.ROW_BYTES, each_s=controls.CALL_S,
                          what="its rows (one a read of each clock)")  # fmt: skip
    names: tuple[str, ...] = option("--clock", (), "Only these clocks/methods (repeatable), e.g. "
                                    "--clock rdtscp.", multiple=True, shown=False)  # fmt: skip


EXPERIMENT = Experiment(
    name="clocks",
    module="perflab.lab.clocks.measure",
    verb="clocks",
    columns=frozenset({"method", "ns", "rep", "ticks"}),
    points=("method",),
    value="ns",
    help="Resolution, value and read cost of every clock and TSC method; TSC trust verdict.",
    plan=ClocksPlan,
    journaled=False,
    campaign="fleet",
)

API = ("run", "summary", "plot", "resolve", "available", "resolution_table", "sample", "batch_ns",
       "read_costs", "read_table", "cost_table", "tsc_report", "verdict", "cost_of", "fleet",
       "SOURCES", "COUNTERS")  # fmt: skip
__getattr__, __dir__ = lazy_api(__name__, EXPERIMENT.module, API)
