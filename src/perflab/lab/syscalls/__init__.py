"""System-call costs in FileGuard's table: min, max, mean, also with k best and k worst dropped.
The plan and registry entry are here, light enough for --help; run, summarize, plot and summary
load from measure.py on first use."""

from dataclasses import dataclass

from perflab.core import constants
from perflab.errors import PerflabError
from perflab.plan import controls
from perflab.plan.base import Plan, option
from perflab.plan.experiment import Experiment, lazy_api

NAMES = tuple(constants.SYSCALLS)
DEFAULT_CALLS = ("getpid", "open+close", "read", "write", "stat")


@dataclass(frozen=True)
class SyscallsPlan(Plan):
    """The calls timed, their samples, the samples the table drops at each end, the directory."""

    calls: tuple[str, ...] = option("--call", DEFAULT_CALLS, "Calls to time (repeatable): "
                                    f"{', '.join(NAMES)}.", multiple=True, shown=False)  # fmt: skip
    trials: int = option("--trials", 10000, "Samples of each call, each of enough back-to-back "
                         "calls to last 200 timer steps.", least=1, each_bytes=controls.ROW_BYTES,
                         each_s=controls.CALL_S, what="its rows (one a call timed)")  # fmt: skip
    trim: int = option("--trim", 10, "Drop this many best and worst samples too (FileGuard "
                       "dropped 10 and 10).", least=0)  # fmt: skip
    directory: str | None = option("--dir", None, "Directory of the 4 KiB scratch file (default: "
                                   "the temp dir); its filesystem counts.",
                                   kind="directory")  # fmt: skip

    def check_more(self) -> None:
        if 2 * self.trim >= self.trials:
            raise PerflabError(f"--trim must leave samples: 2*{self.trim} >= {self.trials} trials")


EXPERIMENT = Experiment(
    name="syscalls",
    module="perflab.lab.syscalls.measure",
    verb="run syscalls",
    columns=frozenset({"call", "ns", "rep", "ticks"}),
    points=("call",),
    value="ticks",
    defines=("directory",),
    help="Cost of getpid, open+close, read/write of 4 KiB, stat and more, in ticks and µs.",
    rows=("call", "rep"),
    plan=SyscallsPlan,
)

API = ("run", "summarize", "plot", "summary", "resolve", "time_call", "calls_per_sample",
       "fileguard", "fileguard_text", "CALLS", "ALIASES", "IO_BYTES", "COLUMNS")  # fmt: skip
__getattr__, __dir__ = lazy_api(__name__, EXPERIMENT.module, API)
