"""Warm-up and steady state of a program's in-process iterations: P fresh processes
of a program that prints one time per iteration, or is built with perflab's probe loop, each
series classified as warmup_stats does (analysis/warmup.py). The plan and registry entry are
here, light enough for --help; run, summary and plot load from measure.py on first use."""

from dataclasses import dataclass

from perflab.core import constants
from perflab.errors import PerflabError
from perflab.plan import controls
from perflab.plan.base import Plan, option
from perflab.plan.experiment import Experiment, lazy_api

UNITS = ("ns", "us", "ms", "s", "ticks")
LEAST_ITERATIONS = 20  # analysis.warmup.MIN_ITERATIONS, which loads numpy: a test holds them equal
# --until-steady's width: Laaber et al.'s RCIW threshold (FSE 2020), an interval's whole width
# over its centre; from a timer's rounding to wider than any claim is worth
STEADY_WIDTH = 0.03
STEADY_WIDTHS = (0.001, 0.5)
UNTIL_STEADY_LEAST = 6  # the fewest values whose median has a finite 95 % interval


@dataclass(frozen=True)
class WarmupPlan(Plan):
    """The program, how many fresh processes run it, the unit of the times it prints, and how
    each is run: its env sizes drawn, its timeout, its CPUs."""

    program: tuple[str, ...] = option("PROGRAM", (), "The program and its arguments.",
                                      argument=True)  # fmt: skip
    executions: int = option("--executions", 10, "Fresh processes of PROGRAM, each classified.",
                             least=1, each_bytes=controls.ROW_BYTES, each_s=controls.CALL_S,
                             what="its executions", most=100_000,
                             most_why="the executions one run classifies")  # fmt: skip
    unit: str = option("--unit", "ns", "The unit of the times PROGRAM prints.", choices=UNITS)
    env_max: int = option("--env-max", 4096, "Each execution's env size is drawn in 0..ENV_MAX "
                          "bytes.", min=0)  # fmt: skip
    seed: int = option("--seed", 0, "Seed of the env sizes drawn.", within=(0, controls.SEED_MAX))
    timeout: float = option("--timeout", 60.0, "Seconds one execution may take.",
                            kind="seconds")  # fmt: skip
    cpus: tuple[int, ...] = option("--cpu", (), "Pin each execution to these CPUs (e.g. 1 or "
                                   "0-1). [default: the quietest usable one, said at the start]",
                                   kind="cpus")  # fmt: skip
    iterations: int = option("--iterations", constants.MAX_ITERATIONS, "Iterations of "
                             "PROGRAM's repeat loop in each execution, where it is built with "
                             "perflab's probe (PERFLAB_PROBE_LOOP): the probe times each. A "
                             "program that prints its times runs its own count.",
                             least=LEAST_ITERATIONS, most=constants.MAX_ITERATIONS,
                             most_why="the probe records a run carries")  # fmt: skip
    until_steady: bool = option("--until-steady", False, "Stop adding executions once the "
                                "steady value over them is as narrow as --steady-width; "
                                "--executions is then the most.")  # fmt: skip
    steady_width: float = option("--steady-width", STEADY_WIDTH, "With --until-steady: the "
                                 "width of the steady value's 95 % interval over executions, "
                                 "over its median, at which executions stop (0.03: 3 %).",
                                 within=STEADY_WIDTHS, needs="until_steady")  # fmt: skip

    def check_more(self) -> None:
        """A program to run, a unit known, sizes and a timeout that can be, and executions
        enough for --until-steady's interval."""
        if not self.program:
            raise PerflabError("no program: give it after --, `perflab warmup -- ./bench 1000`")
        if self.unit not in UNITS:
            raise PerflabError(f"--unit is one of {', '.join(UNITS)}, not {self.unit!r}")
        if self.env_max < 0:
            raise PerflabError(f"--env-max is 0 or more, not {self.env_max}")
        controls.check_timeout(self.timeout)
        controls.check_cpu_list("--cpu", tuple(self.cpus or ()), allow_empty=True)
        if self.until_steady:
            check_until_steady("--until-steady", "--executions", self.executions)


def check_until_steady(flag: str, executions_name: str, executions: int) -> None:
    """Executions enough for the stop's interval: the verb's and the callables' one rule."""
    if executions < UNTIL_STEADY_LEAST:
        raise PerflabError(
            f"{flag} needs {executions_name} {UNTIL_STEADY_LEAST} or more (a 95 % interval of "
            f"a median over executions needs {UNTIL_STEADY_LEAST}), not {executions}"
        )


EXPERIMENT = Experiment(
    name="warmup",
    module="perflab.lab.warmup.measure",
    verb="warmup",
    columns=frozenset({"execution", "iteration", "time"}),
    points=("execution",),
    value="time",
    help="Run PROGRAM, which prints one time per iteration or repeats its region in "
    "PERFLAB_PROBE_LOOP, in fresh processes; classify each execution's iterations as flat, "
    "warm-up, slowdown or no steady state (Barrett et al.).",
    rows=("execution", "iteration"),
    plan=WarmupPlan,
    examples="""
    perflab warmup -- ./bench 1000
    perflab warmup --executions 20 --unit us --plot warmup.png -- ./bench
    perflab warmup --iterations 64 --until-steady --executions 40 -- ./probed""",
    journaled=False,
    label="warm-up executions",
)

API = ("run", "summary", "summarize", "plot", "classified", "parse")
__getattr__, __dir__ = lazy_api(__name__, EXPERIMENT.module, API)
