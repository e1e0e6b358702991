"""What a page fault costs: first touch of fresh pages vs touching them again vs mlock'ed pages
(Rubini). The plan and registry entry are here, light enough for --help; run, summarize, plot
and summary load from measure.py on first use."""

from dataclasses import dataclass

from perflab.plan import controls
from perflab.plan.base import Plan, option
from perflab.plan.controls import PAGE
from perflab.plan.experiment import Experiment, lazy_api


@dataclass(frozen=True)
class PagefaultPlan(Plan):
    """How many pages each region touches, and how many fresh regions per condition."""

    pages: int = option("--pages", 1024, "4 KiB pages touched per region.", least=1,
                        each_bytes=PAGE, each_s=controls.CALL_S, what="its region",
                        most=1 << 22, most_why="the pages one region maps")  # fmt: skip
    reps: int = option("--reps", 20, "Fresh regions measured per condition.", least=1,
                       each_bytes=controls.ROW_BYTES, each_s=controls.CALL_S)  # fmt: skip


EXPERIMENT = Experiment(
    name="pagefault",
    module="perflab.lab.pagefault.measure",
    verb="run pagefault",
    columns=frozenset({"condition", "pages", "rep", "ticks_per_page"}),
    points=("condition",),
    value="ticks_per_page",
    defines=("pages",),
    help="Ticks per page: first touch (a fault each) vs touching again vs mlock'ed memory.",
    rows=("rep", "condition"),
    plan=PagefaultPlan,
    label="page faults",
)

API = ("run", "summarize", "plot", "summary", "table", "check_lockable", "CONDITIONS", "COLUMNS")
__getattr__, __dir__ = lazy_api(__name__, EXPERIMENT.module, API)
