"""The built-in reproduction of `perflab profile --workload` (lab/profile/workload.py: N threads
doing serial work under one lock) profiled over lock kinds and thread counts: with a mutex the
waiters block in futex, with a spin lock they stay busy, and in neither case do more threads
finish the work sooner (easyperf's multithreaded analysis, seed 003). Python API only (no verb
of its own): the plan and registry entry are here, light; run, summarize, plot and summary load
from measure.py on first use, build and command from the workload's module."""

from dataclasses import dataclass

from perflab.core import constants
from perflab.errors import PerflabError
from perflab.lab.profile.workload import ITERATIONS, KINDS, WORK, check_workload
from perflab.lab.profile.workload import MAX_THREADS as MAX_THREADS
from perflab.plan.base import Plan
from perflab.plan.experiment import Experiment, lazy_api


@dataclass(frozen=True)
class ContentionPlan(Plan):
    """The lock kinds and thread counts profiled, the work, the sampling and the repeats."""

    threads: tuple[int, ...] = (1, 2, 4)
    kinds: tuple[str, ...] = KINDS
    iterations: int = ITERATIONS
    work: int = WORK
    sample_hz: int | None = constants.SAMPLE_HZ  # perf record's rate; None: no samples
    repeat: int = 1

    def check_more(self) -> None:
        if self.repeat < 1:
            raise PerflabError(f"repeat must be at least 1, not {self.repeat}")
        check_workload(self.kinds, self.threads, self.iterations, self.work)


EXPERIMENT = Experiment(
    name="contention",
    module="perflab.lab.contention.measure",
    verb=None,
    columns=frozenset({"blocked_pct", "kind", "rep", "threads", "utilisation", "wall_ms"}),
    points=("kind", "threads"),
    value="wall_ms",
    plan=ContentionPlan,
)

API = ("run", "summarize", "plot", "summary", "WAITING")
WORKLOAD = {"perflab.lab.profile.workload": ("build", "command")}
__getattr__, __dir__ = lazy_api(__name__, EXPERIMENT.module, API, WORKLOAD)
