"""Which perf events count here and why the others do not, or what a command counts with every
thread and child it starts, as perf stat does. The plan and registry entry are here, light
enough for --help; run, summarize, plot, summary and exit_status load from measure.py on first
use."""

from dataclasses import dataclass

from perflab.core import constants
from perflab.plan import controls
from perflab.plan.base import Plan, option
from perflab.plan.experiment import Experiment, lazy_api

EVENT_NAMES = tuple(constants.EVENT_INDEX)


@dataclass(frozen=True)
class CountersPlan(Plan):
    """The events counted, the command and its time limit; and the verb's own -o, --json and
    --program-output (how it prints and where the command's streams go, not run's)."""

    as_json: bool = option("--json", False, "Print a machine-readable report.")
    output: str | None = option("--output", None, "Save the counts to FILE (.parquet, or .csv "
                                "with a JSON sidecar).", short="-o", kind="file")  # fmt: skip
    events: tuple[str, ...] = option("--event", (), "Only these events (repeatable).", short="-e",
                                     multiple=True, choices=EVENT_NAMES, shown=False)  # fmt: skip
    program_output: str | None = option(
        "--program-output", None, "the counts go to stderr, or as JSON to stdout, never into "
        "the program's stream", kind="program_output", said="inherit, or null with --json",
        aliases=("--output-child",), needs="command", needs_shown="a COMMAND",
    )  # fmt: skip
    timeout: float | None = option("--timeout", None, "Seconds before COMMAND is killed (its "
                                   "counts up to then are reported).", kind="seconds",
                                   needs="command", needs_shown="a COMMAND")  # fmt: skip
    command: tuple[str, ...] = option("COMMAND", (), "The command counted, and its arguments.",
                                      argument=True, command=True)  # fmt: skip

    def check_more(self) -> None:
        if self.timeout is not None:
            controls.check_timeout(self.timeout)


EXPERIMENT = Experiment(
    name="counters",
    module="perflab.lab.counters.measure",
    verb="counters",
    columns=frozenset({"count", "event", "kind", "status"}),
    points=("event",),
    value="count",
    ok="counts",
    help=(
        "List the perf events that count here (with a sample count), or count COMMAND "
        "(`perflab counters -- make -j2`) with every thread and child it starts."
    ),
    plan=CountersPlan,
    details="""Its counts go to stderr, as perf stat's, so that COMMAND's own stdout stays whole.
        With COMMAND, perflab exits with its status (128+N when signal N killed it), as perf
        stat.""",
    journaled=False,
    outputs=(),
    exit_status="exit_status",
)

API = ("run", "summarize", "plot", "summary", "exit_status", "RUN_KEYS")
__getattr__, __dir__ = lazy_api(__name__, EXPERIMENT.module, API)
