"""Hog processes that perturb a measurement, and the real-time watchdog that bounds workers."""

import contextlib
import os
import resource
import signal
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import ClassVar

from perflab.core import bindings
from perflab.errors import PerflabError, warn_once, warning
from perflab.lab.threads.plan import RT_LIMIT_S as RT_LIMIT_S
from perflab.system import machine

HOGS = bindings.HOG_KINDS
RT_PRIORITY = 10
HOG_MAX_S = 600.0


@contextlib.contextmanager
def rt_watchdog(limit_s: float) -> Iterator[None]:
    """Bound real-time computing: past limit_s without blocking, RLIMIT_RTTIME sends SIGXCPU,
    on which the core drops the workers to normal priority and fails the run (perflab lives on),
    so a runaway real-time worker cannot freeze the machine."""
    old = resource.getrlimit(resource.RLIMIT_RTTIME)
    soft = int(limit_s * 1e6)
    if old[1] != resource.RLIM_INFINITY:
        soft = min(soft, old[1])
    resource.setrlimit(resource.RLIMIT_RTTIME, (soft, old[1]))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_RTTIME, old)


@dataclass(frozen=True)
class Perturbation:
    """A hog kind on a CPU, as given on the command line: 'cpu@0', 'cache@1', 'rt@0'."""

    kind: str
    cpu: int
    # how a refusal of something else names it (controls.described)
    described: ClassVar[str] = "a Perturbation (Perturbation.parse('cpu@0'))"

    @classmethod
    def parse(cls, text: str) -> "Perturbation":
        """Read KIND@CPU; bad kinds and CPUs are refused before anything starts."""
        kind, sep, cpu = text.partition("@")
        if kind not in HOGS or not sep or not cpu.strip().isdigit():
            raise PerflabError(
                f"bad perturbation {text!r}: use KIND@CPU with KIND one of {', '.join(HOGS)}"
            )
        machine.check_cpus([int(cpu)])
        return cls(kind, int(cpu))

    def __str__(self) -> str:
        return f"{self.kind}@{self.cpu}"


def default_perturbations(cpu: int) -> list[Perturbation]:
    """The post's trials on the measured CPU: a CPU hog, a cache thrasher, a real-time hog."""
    return [Perturbation(kind, cpu) for kind in HOGS]


def cache_hog_bytes() -> int:
    """Twice the largest cache, so every pass of the hog evicts the measured thread's lines."""
    sizes = [machine.cache_size(name) or 0 for name in ("L3", "L2", "L1d")]
    return max(2 * max(sizes), 8 << 20)


def _start_hog(p: Perturbation, max_s: float, pids: list[int]) -> None:
    """Start one hog and record its pid in pids before anything can raise, so it is stopped."""
    pid, sched = bindings.hog_start(
        HOGS[p.kind], p.cpu, cache_hog_bytes(), int(max_s * 1e9), RT_PRIORITY, f"start {p} hog"
    )
    pids.append(pid)
    if sched:
        warn_once(warning("hog_rt_refused", hog=p, why=bindings.errno_text(sched)))


def _stop_hog(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)


@contextlib.contextmanager
def perturbed(
    perturbations: Sequence[Perturbation], max_s: float = HOG_MAX_S
) -> Iterator[list[int]]:
    """Hogs running for the duration of the block, killed and reaped on any exit (also Ctrl-C);
    each also dies with perflab (PR_SET_PDEATHSIG) and by itself after max_s."""
    pids: list[int] = []
    try:
        for p in perturbations:
            _start_hog(p, max_s, pids)
        yield pids
    finally:
        for pid in pids:
            _stop_hog(pid)
