"""What a transparent huge page saves on first touch: fresh anonymous memory written once per
4 KiB page, in 4 KiB pages (MADV_NOHUGEPAGE) and in 2 MiB pages where the kernel gives them
(MADV_HUGEPAGE). The plan and registry entry are here, light enough for --help; run,
summarize, plot and summary load from measure.py on first use."""

from dataclasses import dataclass

from perflab.plan import controls
from perflab.plan.base import Plan, option
from perflab.plan.experiment import Experiment, lazy_api

MiB = 1 << 20


@dataclass(frozen=True)
class HugepageFaultPlan(Plan):
    """How large each fresh region is, and how many regions per condition."""

    mib: int = option("--mib", 64, "MiB of fresh memory touched per region.", least=1,
                      each_bytes=MiB, each_s=MiB // controls.PAGE * controls.CALL_S,
                      what="its region")  # fmt: skip
    reps: int = option("--reps", 10, "Fresh regions measured per condition.", least=1,
                       each_bytes=controls.ROW_BYTES, each_s=controls.CALL_S)  # fmt: skip


EXPERIMENT = Experiment(
    name="hugepage-fault",
    module="perflab.lab.hugepage_fault.measure",
    verb="run hugepage-fault",
    columns=frozenset({"condition", "faults", "mib", "ns_per_mib", "rep"}),
    points=("condition",),
    value="ns_per_mib",
    defines=("mib",),
    help="Nanoseconds per MiB of a first touch, in 4 KiB pages vs transparent huge pages.",
    rows=("rep", "condition"),
    plan=HugepageFaultPlan,
    label="hugepage faults",
)

API = ("run", "summarize", "plot", "summary", "CONDITIONS", "COLUMNS")
__getattr__, __dir__ = lazy_api(__name__, EXPERIMENT.module, API)
