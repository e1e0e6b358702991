"""The thread verbs' plans and defaults: the program sweep's ThreadsPlan, whose fields are
`sweep threads`' options for a PROGRAM, the built-in kernels' names and loop counts, without
numpy or pandas."""

import re
from dataclasses import dataclass, field
from typing import Any

from perflab.core import constants
from perflab.errors import PerflabError
from perflab.plan.controls import (
    RUNQ_MODES,
    Controls,
    _cli,
    check_count,
    check_order,
    check_placeholders,
    check_rows,
    most_threads,
    order_field,
)

PLACEHOLDER = "{threads}"
DEFAULT_ENV = "OMP_NUM_THREADS"
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
KERNEL_NAMES = tuple(constants.THREAD_KERNELS)
LOOP_FACTOR = constants.LOOP_FACTOR
POST_LOOPS = 4000  # the post's -l 4000: 10.7 s per thread on its i5-3320M
DEFAULT_LOOPS = 100
DEFAULT_STREAM_BYTES = 1 << 20
RT_LIMIT_S = 10.0


def parse_counts(text: str) -> tuple[int, ...]:
    """'1,2,4,8' as thread counts, in the order given, each once; anything else one error."""
    try:
        counts = tuple(dict.fromkeys(int(p) for p in text.split(",") if p.strip()))
    except ValueError:
        counts = ()
    if not counts or min(counts) < 1:
        raise PerflabError(f"--threads {text!r}: expected positive counts such as 1,2,4,8")
    return counts


def _program(flag: str, help: str, **more: Any) -> dict:
    """The metadata of an option that `sweep threads` takes with -- PROGRAM only."""
    return _cli(flag, f"With -- PROGRAM: {help}", needs="command", needs_shown="-- PROGRAM",
                **more)  # fmt: skip


@dataclass(frozen=True)
class ThreadsPlan(Controls):
    """Everything that decides which runs a program sweep makes and how: a resume must match it.

    The fields with option metadata are `sweep threads`' options for a PROGRAM (PROGRAM_OPTIONS)."""

    command: tuple[str, ...] = ()
    counts: tuple[int, ...] = field(
        default=(1, 2),
        metadata=_program("--threads", "the thread counts to run, e.g. 1,2,4,8 [default: "
                          "1..--max].", parse=parse_counts, default=None, shown=False),
    )  # fmt: skip
    threads_env: str | None = field(
        default=None,
        metadata=_program("--threads-env", "also pass the count as NAME=N (default: "
                          f"{DEFAULT_ENV} when no argument holds {PLACEHOLDER}).", metavar="NAME"),
    )  # fmt: skip
    cpus: tuple[int, ...] = field(
        default=(),
        metadata=_program("--cpu", "CPUs it may use (e.g. 0-1). [default: every usable CPU]",
                          kind="cpus"),
    )  # fmt: skip
    seed: int = field(default=0, metadata=_program("--seed", "seed of the random run order.",
                                                   min=0))  # fmt: skip
    inherit_env: bool = field(
        default=False,
        metadata=_program("--inherit-env", "run it with perflab's environment, not an empty one."),
    )
    repeat: int = field(default=7, metadata=_cli("--repeat", "Runs per thread count."))
    order: str = order_field()
    oversubscribe: bool = False
    timeout: float = field(
        default=600.0,
        metadata=_program("--timeout", "seconds before a run is killed (status 'timeout').",
                          kind="seconds"),
    )  # fmt: skip
    rt: bool = False  # real-time threads that outnumber the CPUs would starve the machine
    runq: str = field(
        default="auto",
        metadata=_program("--runq", "how the run-queue wait of all its threads is read: auto "
                          "(the kernel's exact sum via taskstats where perflab may, else /proc "
                          "readings), proc, off.", choices=RUNQ_MODES),
    )  # fmt: skip

    def check(self) -> "ThreadsPlan":
        """Refuse bad input before anything runs."""
        from perflab.system import machine

        if not self.command:
            raise PerflabError("give the program to run after --, e.g. -- xz -T{threads} -c FILE")
        if self.repeat < 1:
            raise PerflabError(f"--repeat must be at least 1, not {self.repeat}")
        check_placeholders(self.command[1:], (PLACEHOLDER[1:-1],), "the program's arguments")
        check_count("--threads", max(self.counts, default=1), most=most_threads())
        check_rows({"--repeat": self.repeat}, len(self.counts))
        if self.threads_env is not None and not ENV_NAME.match(self.threads_env):
            raise PerflabError(f"--threads-env {self.threads_env!r} is not a variable name")
        check_order(self.order)
        if self.runq not in RUNQ_MODES:
            raise PerflabError(f"--runq must be one of {', '.join(RUNQ_MODES)}, not {self.runq!r}")
        self.check_controls()
        most = max(self.counts)
        if most > len(self.cpus) and not self.oversubscribe:
            raise PerflabError(
                f"{most} threads on {len(self.cpus)} CPUs ({machine.format_cpu_list(self.cpus)}): "
                "add --oversubscribe to run more threads than CPUs, or --cpu to give more CPUs"
            )
        return self

    def argv(self, n: int) -> tuple[str, ...]:
        """The command for n threads: the placeholder replaced in every argument, and the
        variable set by env(1), which execs the program (no shell sees the arguments)."""
        from perflab.running import spawn

        program = spawn.check_program(self.command[0])
        args = tuple(a.replace(PLACEHOLDER, str(n)) for a in self.command[1:])
        if self.threads_env is None:
            return (program, *args)
        return (spawn.check_program("env"), f"{self.threads_env}={n}", program, *args)


# The options `sweep threads` takes for a PROGRAM, in the order its help lists them.
PROGRAM_OPTIONS = ("counts", "threads_env", "cpus", "seed", "timeout", "inherit_env", "runq")
