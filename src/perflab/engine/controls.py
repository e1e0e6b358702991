"""What a measurement plans, stated once and light: the plan dataclasses whose fields the CLI
turns into options, and the defaults its help shows.

Nothing here imports numpy, pandas or the C core at import time, so `perflab VERB --help`
builds every option without them; the experiment modules re-export their Plan from here and
import what a plan's methods need only when they run.
"""

from dataclasses import asdict, dataclass, field
from typing import Any

from perflab.core import constants
from perflab.errors import PerflabError
from perflab.system import compiler

# The C core counts a timeout in int64 nanoseconds, and 0 ns would mean none at all.
TIMEOUT_S = (1e-6, 1e6)
ORDERS = ("random", "sequential")
ASLR_MODES = constants.ASLR_MODES
OPT_LEVELS = compiler.OPT_LEVELS
DEFAULT_OPT = compiler.DEFAULT_OPT
RUNQ_MODES = constants.RUNQ_MODES


def _cli(flag: str, help: str, **more: Any) -> dict:
    """Field metadata a CLI derives its option from: the flag, its help, click extras."""
    return {"cli": {"flag": flag, "help": help, **more}}


@dataclass(frozen=True)
class Controls:
    """How every child of a sweep runs; the fields every child-run plan shares.

    Subclasses add what their experiment varies; the CLI options come from the fields' metadata.
    """

    aslr: str = field(
        default="off",
        metadata=_cli("--aslr", "off: personality(ADDR_NO_RANDOMIZE) for the child only (no "
                      "root, nothing system-wide); on: force randomisation; system: leave "
                      "randomize_va_space decide.", choices=ASLR_MODES),
    )  # fmt: skip
    cpus: tuple[int, ...] = field(
        default=(),
        metadata=_cli("--cpu", "Pin the child to these CPUs (e.g. 1 or 0-1), as taskset did. "
                      "[default: last usable: online, inside the affinity mask]", kind="cpus"),
    )  # fmt: skip
    seed: int = field(default=0, metadata=_cli("--seed", "Seed of every random draw.", min=0))
    inherit_env: bool = field(
        default=False,
        metadata=_cli("--inherit-env", "Run with perflab's own environment instead of an empty "
                      "one (the post used env -i)."),
    )  # fmt: skip
    timeout: float = field(
        default=10.0,
        metadata=_cli("--timeout", "Seconds before a run is killed and recorded as 'timeout'.",
                      kind="seconds"),
    )  # fmt: skip
    rt: bool = field(
        default=True,
        metadata=_cli("--rt/--no-rt", "Ask SCHED_FIFO priority 1 for the child (as chrt did), "
                      "capped by RLIMIT_RTTIME; refused -> one warning, then normal priority."),
    )  # fmt: skip
    mlock: bool = field(
        default=False,
        metadata=_cli("--mlock", "Ask the probed child to mlockall() (only a child with "
                      "perflab's probe can honour it)."),
    )  # fmt: skip
    jobs: int = field(
        default=1,
        metadata=_cli("--jobs", "Children at once, each pinned to its own CPU (the --cpu list, "
                      "else the last usable CPUs); 0: one per CPU. Rows then carry cpu and "
                      "parallel columns, and a sequential reference slice checks the result.",
                      min=0),
    )  # fmt: skip
    reference: float | None = field(
        default=None,
        metadata=_cli("--reference", "With --jobs: the share of runs made one at a time, to "
                      "compare the parallel ones with. [default: 0.1 / the CPUs, at most 0.05: "
                      "the slice costs about a tenth of the parallel time]", type=float),
    )  # fmt: skip
    allow_siblings: bool = field(
        default=False,
        metadata=_cli("--allow-siblings", "With --jobs: let two children share a core (SMT "
                      "siblings), which perflab otherwise refuses."),
    )  # fmt: skip

    def check_controls(self) -> None:
        """Refuse controls the C core cannot honour, before anything is built or measured."""
        from perflab.system import machine

        check_timeout(self.timeout)
        check_aslr(self.aslr)
        machine.check_cpus(self.cpus)
        self.check_lanes()

    def check_lanes(self, root: str | None = None) -> None:
        """Refuse lanes that share a core, a repeated CPU, or a reference share out of range."""
        from perflab.system import machine

        if self.jobs < 0:
            raise PerflabError(f"--jobs must be 0 (one per CPU) or more, not {self.jobs}")
        if self.reference is not None and not 0 <= self.reference < 1:
            raise PerflabError(f"--reference must be at least 0 and below 1, not {self.reference}")
        if self.jobs <= 1:
            return
        if len(set(self.cpus)) != len(self.cpus):
            raise PerflabError(f"--cpu {machine.format_cpu_list(self.cpus)} repeats a CPU")
        if len(self.cpus) != self.jobs:
            raise PerflabError(f"--jobs {self.jobs} needs {self.jobs} CPUs, not {len(self.cpus)}")
        machine.refuse_siblings(self.cpus, self.allow_siblings, root or machine.SYS_CPU)

    def params(self) -> dict:
        """The plan as a journal stores it: a resume must match it field for field."""
        plan = asdict(self)
        if self.jobs == 1:  # as before --jobs existed, so journals of that time still resume
            for name in ("jobs", "reference", "allow_siblings"):
                del plan[name]
        return plan

    def conditions(self) -> dict:
        """The run conditions every result records next to machine.metadata()."""
        return {
            "aslr": self.aslr,
            "cpus": list(self.cpus),
            "seed": self.seed,
            "inherit_env": self.inherit_env,
            "rt_requested": self.rt,
            "mlock": self.mlock,
            "timeout_s": self.timeout,
        }


def order_field() -> Any:
    """The `order` field of a plan that shuffles its runs."""
    return field(
        default="random",
        metadata=_cli("--order", "random keeps drift over time from posing as an effect.",
                      choices=ORDERS),
    )  # fmt: skip


def check_order(order: str) -> None:
    if order not in ORDERS:
        raise PerflabError(f"order must be random or sequential, not {order!r}")


def check_repeat(repeat: int) -> None:
    if repeat < 1:
        raise PerflabError(f"--repeat must be at least 1, not {repeat}")


def check_aslr(mode: str) -> None:
    """Refuse an ASLR mode the C core does not know (click's --aslr choices parse the same)."""
    if mode not in ASLR_MODES:
        raise PerflabError(f"--aslr must be one of {', '.join(ASLR_MODES)}, not {mode!r}")


def check_timeout(seconds: float) -> None:
    """Refuse a timeout the C core cannot honour (nan, inf, 0, or beyond its int64 ns)."""
    lo, hi = TIMEOUT_S
    if not lo <= seconds <= hi:  # also refuses nan
        raise PerflabError(f"--timeout must be {lo:g} to {hi:g} seconds, not {seconds}")
