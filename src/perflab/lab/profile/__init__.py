"""Where each thread's time goes: per-thread CPU, run-queue wait, time blocked and utilisation of
any program, and time inside each system call per thread when strace is asked for (easyperf's
"Performance analysis of multithreaded applications", seed 003).

Mechanism (no ptrace unless --strace): the program is started without a shell in its own process
group, under the run's supervisor (system/supervisor.py: nothing it leaves outlives perflab or the
run, and strace's and perf's files go with the supervisor's directory); every `interval` its threads
(and those of processes it forks) are read from /proc (proctasks), and where CAP_NET_ADMIN allows,
the kernel's taskstats exit record of every thread gives its figures at its exit (taskstats).
Without records a thread is known as of its last reading, and one that lived and died between two
readings is not seen at all; the leader is read once more as a zombie, so its figures are final.
Nothing is lost: wait4's totals less what the rows account for is one "(between readings)" row, so
the per-thread CPU adds up to the program's.

The package: this light module (the plan and its registry entry), workload (the built-in
reproduction --workload runs), sampling (the run and its readings), report (its tables, summary
and figure); their names load on first use.
"""

from dataclasses import dataclass

from perflab.core import constants
from perflab.errors import Interrupted as Interrupted
from perflab.errors import PerflabError
from perflab.lab.profile.workload import KINDS, MAX_THREADS
from perflab.plan.base import Plan, option
from perflab.plan.experiment import Experiment, lazy_api

INTERVAL_S = 0.01  # between two readings of the threads, on average


@dataclass(frozen=True)
class ProfilePlan(Plan):
    """How often the threads are read, where and how long the program runs, what more is read
    (strace, exit records, perf samples), the built-in workload or COMMAND; and the verb's own
    --program-output (where the program's streams go, not run's)."""

    interval: float = option(
        "--interval", INTERVAL_S, "Seconds between two readings of the threads; a thread that "
        "lives less than this may be seen only in the '(between readings)' row.",
        within=(0.001, 10),
    )  # fmt: skip
    cpus: tuple[int, ...] = option(
        "--cpu", (), "Pin the program (all its threads) to these CPUs, e.g. 0-1. [default: not "
        "pinned]", kind="cpus",
    )  # fmt: skip
    timeout: float | None = option("--timeout", None, "Seconds before the program is killed.",
                                   within=(0.001, 1e6))  # fmt: skip
    strace: bool = option(
        "--strace", False, "Run the program under strace -f -T for the time each thread spends "
        "in each system call (futex, read, ...); ptrace slows every call, so the other figures "
        "grow too.",
    )  # fmt: skip
    exit_records: bool = option(
        "--no-exit-records", True, "Do not use taskstats exit records (exact figures at each "
        "thread's exit, CAP_NET_ADMIN only); /proc readings alone, as for a user without it.",
    )  # fmt: skip
    samples: bool = option(
        "--samples", False, "Sample each thread's CPU by symbol with perf record (the cycles "
        "event, or cpu-clock where there is no PMU): which functions each thread runs.",
    )  # fmt: skip
    sample_hz: int | None = option(
        "--sample-hz", None, "Samples per second of each thread's CPU time (implies --samples): "
        f"finer, and costlier. [default: {constants.SAMPLE_HZ}]",
        within=(1, constants.MAX_SAMPLE_HZ),
    )  # fmt: skip
    workload: str | None = option(
        "--workload", None, "Profile the built-in reproduction instead of COMMAND: threads doing "
        "serial work under one lock, waiting in futex (mutex) or spinning (spin).",
        choices=KINDS,
    )  # fmt: skip
    threads: int | None = option("--threads", None, "Worker threads of --workload. [default: "
                                 "the usable CPUs, at least 2]",
                                 within=(1, MAX_THREADS))  # fmt: skip
    program_output: str | None = option(
        "--program-output", None, "the profile goes to stderr, or as JSON to stdout, never into "
        "the program's stream", kind="program_output", said="inherit, or null with --json",
    )  # fmt: skip
    command: tuple[str, ...] = option("COMMAND", (), "The program profiled, and its arguments.",
                                      argument=True, command=True)  # fmt: skip

    def check_more(self) -> None:
        if self.workload and self.command:
            raise PerflabError("give either --workload or a COMMAND, not both")
        if self.threads is not None and not self.workload:
            raise PerflabError("--threads is for --workload; a COMMAND takes its own options")
        if not self.workload and not self.command:
            raise PerflabError(
                "Missing argument COMMAND: perflab profile -- PROGRAM ARGS, or --workload"
            )


EXPERIMENT = Experiment(
    name="profile",
    module="perflab.lab.profile",
    verb="profile",
    columns=frozenset({"blocked_ns", "comm", "cpu_ns", "lifetime_ns", "pid", "tid"}),
    points=("comm",),
    value="cpu_ns",
    help="Where each thread of COMMAND spends its time: CPU, run-queue wait, blocked.",
    plan=ProfilePlan,
    details="""`perflab profile -- ./app -t 8`: per thread, CPU (user/system), lifetime,
        utilisation, context switches, run-queue wait and time blocked, split by the call each
        thread was seen sleeping in (futex, io, poll, sleep, wait, other; sampled at the
        readings, no ptrace); the program's utilisation (CPU / wall: threads busy on average),
        on stderr, so that the program's own stdout stays whole (`perflab profile -- xz -c data
        > data.xz`); exits with the program's status (130 at Ctrl-C: the program killed, its
        profile up to then kept). `perflab profile --workload mutex --threads 4 --samples`: the
        built-in lock contention, profiled by symbol too.""",
    journaled=False,
    exit_status="exit_status",
    ticker="profiling: {seconds:.0f} s, {count} threads seen",
)

SAMPLING = ("BETWEEN", "OnSampled", "run")
REPORT = ("causes", "exit_status", "overview", "plot", "summarize", "summarize_syscalls",
          "summary", "syscalls", "timeline")  # fmt: skip
__getattr__, __dir__ = lazy_api(
    __name__, f"{__name__}.sampling", SAMPLING, {f"{__name__}.report": REPORT}
)
