"""Rubini's cswitch: one byte through pipes alone, then ping-ponged with a child; the
difference. The plan and registry entry are here, light enough for --help; run, summarize, plot
and summary load from measure.py on first use."""

from dataclasses import dataclass

from perflab.plan import controls
from perflab.plan.base import Plan, option
from perflab.plan.experiment import Experiment, lazy_api


@dataclass(frozen=True)
class CswitchPlan(Plan):
    """Round trips per run, runs per placement, the priority and the CPUs of the pinned runs."""

    n: int = option("N", 20000, "Round trips per run.", argument=True, least=1,
                    each_s=controls.CALL_S, what="its round trips")  # fmt: skip
    reps: int = option("--reps", 3, "Runs per placement; medians shown.", least=1,
                       each_bytes=controls.ROW_BYTES, each_s=controls.SPAWN_S)  # fmt: skip
    realtime: bool | None = option("--rt/--no-rt", None, "Also run with SCHED_RR priority "
                                   "(default: yes unless BENCH_NORT is set).")  # fmt: skip
    cpus: tuple[int, ...] = option("--cpu", (), "CPUs for the pinned runs (first: parent and "
                                   "one-CPU runs, second: child).", multiple=True,
                                   kind="cpu_values", cpus=2)  # fmt: skip


EXPERIMENT = Experiment(
    name="cswitch",
    module="perflab.lab.cswitch.measure",
    verb="run cswitch",
    columns=frozenset({"alone_us_each", "cswitch_us_each", "placement", "realtime", "rt_applied"}),
    points=("placement", "realtime"),
    value="cswitch_us_each",
    defines=("n",),
    help="N one-byte write+read alone, N round trips with a child, and the difference.",
    rows=("placement", "realtime", "rep"),
    plan=CswitchPlan,
    label="cswitch {n}",
    epilogue="refusals",
)

API = ("run", "summarize", "plot", "summary", "table", "run_once", "placements", "CpuPair",
       "realtime_wanted", "rt_budget_us", "article_lines", "refusals", "COLUMNS",
       "RT_PRIORITY")  # fmt: skip
__getattr__, __dir__ = lazy_api(__name__, EXPERIMENT.module, API)
