"""The built-in reproduction `perflab profile --workload` runs: N threads doing serial work under
one lock (workloads/contention.c), the situation easyperf's multithreaded analysis (seed 003)
diagnoses: with a mutex the waiters block in futex, with a spin lock they stay busy, and in
neither case do more threads finish the work sooner. Light: the plan reads its kinds and bounds;
the contention experiment profiles it over kinds and thread counts."""

from collections.abc import Iterable

from perflab.errors import PerflabError
from perflab.system import compiler

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


def build() -> compiler.Workload:
    """The workload, compiled once: dynamically linked, so libc's lock code keeps its name."""
    return compiler.build(
        compiler.WORKLOADS / "contention.c", "2", static=False, extra=["-pthread"]
    )


def command(kind: str, threads: int, iterations: int = ITERATIONS, work: int = WORK) -> list[str]:
    """The argv that runs it; refused in one line before anything is built."""
    check_workload([kind], [threads], iterations, work)
    return [str(build().path), kind, str(threads), str(iterations), str(work)]
