"""Threads, topology and interference: DjiBee's core-vs-hyper-thread lab and FauxPlat/sec,
easyperf's thread-count scaling, and hog processes that perturb them.

Every worker runs in C (csrc/threads.c): pinned before it waits on a barrier, released with the
others, it times itself with CLOCK_THREAD_CPUTIME_ID, CLOCK_MONOTONIC and the TSC, and counts its
own perf events. One "loop" is 100000 iterations of a kernel, as in the post.

The package: plan (the program sweep's plan and the kernels' names and defaults, light),
runner (the workers and run conditions), hogs (perturbations and the real-time watchdog), and
one module per experiment, each with run/summarize/plot: core_vs_ht (core vs hyper-thread),
thread_count (scaling), fauxplat (FauxPlat/sec), program (scaling of the user's own program,
run as child processes). This module is light (the verbs' --help and the registry read it):
the rest loads on first use.
"""

from perflab.errors import PerflabWarning as PerflabWarning
from perflab.lab.threads.plan import DEFAULT_LOOPS as DEFAULT_LOOPS
from perflab.lab.threads.plan import DEFAULT_STREAM_BYTES as DEFAULT_STREAM_BYTES
from perflab.lab.threads.plan import LOOP_FACTOR as LOOP_FACTOR
from perflab.lab.threads.plan import POST_LOOPS as POST_LOOPS
from perflab.lab.threads.plan import RT_LIMIT_S as RT_LIMIT_S
from perflab.plan.experiment import Experiment, lazy_modules

# `sweep threads` runs a built-in kernel in-process (threads) or the user's program as child
# runs (threads-program); one verb, two results.
EXPERIMENTS = (
    Experiment(
        name="threads",
        module="perflab.lab.threads.thread_count",
        verb="sweep threads",
        columns=frozenset({"bytes", "cpu_ns", "end_ns", "loops", "release_ns", "rep", "threads"}),
        points=("threads",),
        value="cpu_ns",
        defines=("kernel", "loops", "size"),
        help=(
            "Throughput, speedup, efficiency and CPU utilisation vs thread count (easyperf): "
            "of a built-in kernel, or of your program given after -- with {threads} where its "
            "count goes."
        ),
        rows=("threads", "rep", "thread"),
    ),
    Experiment(
        name="threads-program",
        module="perflab.lab.threads.program",
        verb="sweep threads",
        columns=frozenset({"rep", "status", "stime_ns", "threads", "utime_ns", "wall_ns"}),
        points=("threads",),
        value="wall_ns",
        rows=("threads", "rep"),
    ),
    Experiment(
        name="core-vs-ht",
        module="perflab.lab.threads.core_vs_ht",
        verb="run core-vs-ht",
        columns=frozenset({"cpu_ns", "label", "placement", "threads", "wall_ns"}),
        points=("placement", "threads"),
        value="cpu_ns",
        defines=("loops",),
        help=(
            "1 thread, then 2 released together: CPU and wall time per placement "
            "(cputime_core_vs_ht)."
        ),
        rows=("placement", "rep", "threads", "thread"),
    ),
    Experiment(
        name="fauxplat",
        module="perflab.lab.threads.fauxplat",
        verb="run fauxplat",
        columns=frozenset({"condition", "fauxplat_per_s", "fauxplat_wall_per_s"}),
        points=("condition",),
        value="fauxplat_per_s",
        defines=("kernel", "loops", "size"),
        help=(
            "FauxPlat/sec (loops / CPU second) alone and under each perturbation (default: "
            "cpu, cache and rt hogs on --cpu), with its spread and its change vs alone."
        ),
        rows=("rep", "condition"),
    ),
)

__getattr__, __dir__ = lazy_modules(
    __name__,
    {
        "perflab.lab.threads.core_vs_ht": ("core_vs_ht", "ThreadPair", "given_placement",
                                           "placements", "post_lines"),
        "perflab.lab.threads.fauxplat": ("fauxplat",),
        "perflab.lab.threads.program": ("program",),
        "perflab.lab.threads.thread_count": ("thread_count", "split"),
        "perflab.lab.threads.hogs": ("HOG_MAX_S", "HOGS", "RT_PRIORITY", "Perturbation",
                                     "cache_hog_bytes", "default_perturbations", "perturbed",
                                     "rt_watchdog"),
        "perflab.lab.threads.runner": ("KERNELS", "Priority", "Progress", "check_placement",
                                       "counter_status", "run_metadata", "run_threads",
                                       "steal_ns"),
    },
)  # fmt: skip
