"""Rubini's trig.c: ticks of libm calls, the first (cold) call apart from the warm minimum. The
plan and registry entry are here, light enough for --help; run, summarize, plot, summary and
the parsing of a call load from measure.py on first use."""

from dataclasses import dataclass

from perflab.plan import controls
from perflab.plan.base import Plan, option
from perflab.plan.experiment import Experiment, lazy_api

DEFAULT_CALLS = ("sin(1.0)", "tan(1.0)", "sin(0.0)")


@dataclass(frozen=True)
class TrigPlan(Plan):
    """The sequence of libm calls, its warm repeats, and the fresh processes it runs cold in."""

    calls: tuple[str, ...] = option("CALLS", DEFAULT_CALLS, "The calls, NAME or NAME(NUMBER).",
                                    argument=True)  # fmt: skip
    repeat: int = option("--repeat", 10, "Warm repeats of the sequence (trig-rep used 10), each "
                         "call a batch lasting 200 timer steps; shows the histogram.", least=1,
                         each_bytes=controls.ROW_BYTES, each_s=controls.CALL_S)  # fmt: skip
    cold_runs: int = option("--cold", 0, "Also run the sequence once in each of N fresh "
                            "processes (first calls fault).", least=0,
                            each_bytes=controls.ROW_BYTES, each_s=controls.SPAWN_S,
                            what="its rows (one a process)", shown=False)  # fmt: skip

    def check_more(self) -> None:
        rows = (self.repeat + self.cold_runs) * len(self.calls)
        name = f"--repeat {self.repeat} with --cold {self.cold_runs}"
        controls.check_memory(name, rows * controls.PLANNED_ROW_BYTES, f"its {rows} rows",
                              len(self.calls) * controls.PLANNED_ROW_BYTES)  # fmt: skip


EXPERIMENT = Experiment(
    name="trig",
    module="perflab.lab.trig.measure",
    verb="run trig",
    columns=frozenset({"call", "mode", "rep", "ticks"}),
    points=("call", "mode"),
    value="ticks",
    help="Ticks of libm calls (default sin(1.0) tan(1.0) sin(0.0)), timer cost subtracted.",
    rows=("mode", "rep", "position"),
    plan=TrigPlan,
)

API = ("run", "summarize", "plot", "summary", "warm", "cold", "calibrate", "parse_call",
       "check_function", "histogram", "most_frequent", "convergence", "COLUMNS", "MAX_CALLS",
       "POINTER_ARGS")  # fmt: skip
__getattr__, __dir__ = lazy_api(__name__, EXPERIMENT.module, API)
