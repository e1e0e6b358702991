"""The built-in reproduction for `perflab profile --workload`: N threads doing serial work under
one lock (workloads/contention.c), the situation easyperf's multithreaded analysis (seed 003)
diagnoses: with a mutex the waiters block in futex, with a spin lock they stay busy, and in
neither case do more threads finish the work sooner. Python API only (no verb of its own): the
plan and registry entry are here, light; run, command, summarize, plot and summary load from
measure.py on first use."""

from collections.abc import Iterable
from dataclasses import dataclass

from perflab.core import constants
from perflab.errors import PerflabError
from perflab.plan.base import Plan
from perflab.plan.experiment import Experiment, lazy_api

KINDS = ("mutex", "spin")
MAX_THREADS = 4096
ITERATIONS = 100_000  # critical sections in all, split over the threads
WORK = 2_000  # recurrence steps in each (about 1.5 ns a step here): ~0.3 s of serial work


def check_workload(kinds: Iterable[str], threads: Iterable[int], iterations: int,
                   work: int) -> None:  # fmt: skip
    """Refuse, in one line, a workload the built-in program cannot run."""
    for kind in kinds:
        if kind not in KINDS:
            raise PerflabError(f"unknown workload {kind!r}; built in: {', '.join(KINDS)}")
    for n in threads:
        if not 1 <= n <= MAX_THREADS:
            raise PerflabError(f"threads must be 1..{MAX_THREADS}, not {n}")
    if iterations < 0 or work < 0:
        raise PerflabError("iterations and work must not be negative")


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

API = ("run", "summarize", "plot", "summary", "build", "command", "WAITING")
__getattr__, __dir__ = lazy_api(__name__, EXPERIMENT.module, API)
