"""Threads, topology and interference: DjiBee's core-vs-hyper-thread lab and FauxPlat/sec,
easyperf's thread-count scaling, and hog processes that perturb them.

Every worker runs in C (csrc/threads.c): pinned before it waits on a barrier, released with the
others, it times itself with CLOCK_THREAD_CPUTIME_ID, CLOCK_MONOTONIC and the TSC, and counts its
own perf events. One "loop" is 100000 iterations of a kernel, as in the post.

The package: runner (the workers and run conditions), hogs (perturbations and the real-time
watchdog), and one module per experiment, each with run/summarize/plot: core_vs_ht (core vs
hyper-thread), thread_count (scaling), fauxplat (FauxPlat/sec), program (scaling of
the user's own program, run as child processes).
"""

from perflab.errors import PerflabWarning
from perflab.lab.threads import core_vs_ht, fauxplat, program, thread_count
from perflab.lab.threads.core_vs_ht import ThreadPair, given_placement, placements, post_lines
from perflab.lab.threads.hogs import (
    HOG_MAX_S,
    HOGS,
    RT_LIMIT_S,
    RT_PRIORITY,
    Perturbation,
    cache_hog_bytes,
    default_perturbations,
    perturbed,
    rt_watchdog,
)
from perflab.lab.threads.runner import (
    DEFAULT_LOOPS,
    DEFAULT_STREAM_BYTES,
    KERNELS,
    LOOP_FACTOR,
    POST_LOOPS,
    Priority,
    Progress,
    check_placement,
    counter_status,
    run_metadata,
    run_threads,
    steal_ns,
)
from perflab.lab.threads.thread_count import split

__all__ = [
    "DEFAULT_LOOPS",
    "DEFAULT_STREAM_BYTES",
    "HOGS",
    "HOG_MAX_S",
    "KERNELS",
    "LOOP_FACTOR",
    "POST_LOOPS",
    "RT_LIMIT_S",
    "RT_PRIORITY",
    "PerflabWarning",
    "Perturbation",
    "Priority",
    "Progress",
    "ThreadPair",
    "cache_hog_bytes",
    "check_placement",
    "core_vs_ht",
    "counter_status",
    "default_perturbations",
    "fauxplat",
    "given_placement",
    "perturbed",
    "placements",
    "post_lines",
    "program",
    "rt_watchdog",
    "run_metadata",
    "run_threads",
    "split",
    "steal_ns",
    "thread_count",
]
