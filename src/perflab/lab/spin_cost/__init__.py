"""What one turn of the core's spin loop costs: the workload of known relative cost that the
perf assertions and their tests lean on, timed at several lengths. The plan and registry entry
are here, light enough for --help; run, summarize, plot and summary load from measure.py."""

from dataclasses import dataclass

from perflab.plan import controls
from perflab.plan.base import Plan, option
from perflab.plan.experiment import Experiment, lazy_api

TURNS = (1_000, 2_000, 4_000, 8_000)


@dataclass(frozen=True)
class SpinCostPlan(Plan):
    """The lengths timed (turns of the loop), and how many samples of each."""

    turns: tuple[int, ...] = TURNS
    samples: int = option("--samples", 50, "Samples per length.", least=1,
                          each_bytes=controls.ROW_BYTES * len(TURNS))  # fmt: skip

    def check_more(self) -> None:
        for n in self.turns:
            controls.check_count("turns", n, each_s=controls.LOOP_S)


EXPERIMENT = Experiment(
    name="spin-cost",
    module="perflab.lab.spin_cost.measure",
    verb="run spin-cost",
    columns=frozenset({"sample", "ticks", "turns"}),
    points=("turns",),
    value="ticks",
    help="Ticks per turn of the core's spin loop, at 1000 to 8000 turns.",
    plan=SpinCostPlan,
    journaled=False,
)

API = ("run", "summarize", "plot", "summary")
__getattr__, __dir__ = lazy_api(__name__, EXPERIMENT.module, API)
