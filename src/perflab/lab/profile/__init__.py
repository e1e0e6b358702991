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

The package: sampling (the run and its readings), report (its tables, summary and figure).
"""

from perflab.lab.profile.report import (
    causes,
    overview,
    plot,
    summarize,
    summarize_syscalls,
    summary,
    syscalls,
    timeline,
)
from perflab.lab.profile.sampling import BETWEEN, INTERVAL_S, Interrupted, run

__all__ = [
    "BETWEEN",
    "INTERVAL_S",
    "Interrupted",
    "causes",
    "overview",
    "plot",
    "run",
    "summarize",
    "summarize_syscalls",
    "summary",
    "syscalls",
    "timeline",
]
