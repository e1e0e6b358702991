"""perflab: low-level performance experiments on Linux, measured honestly.

Each experiment is a module with run (or sweep), summarize and plot; results are tidy pandas
DataFrames (one row per measurement, units in the column names, metadata in df.attrs), and
plot(df[, path]) returns a matplotlib Figure (shown inline in Jupyter, written when given a
path). Submodules load on first use, so `import perflab` stays cheap:

    import perflab
    df = perflab.env_size.sweep(max_size=4096, step=16, repeat=5)
    perflab.env_size.plot(df)       # a Figure, inline in Jupyter
    perflab.show(df)                # summary table, conditions and figure in one display

Experiments (module: entry point -> what it measures):
    env_size      sweep(program, **Plan)   run time vs environment size (Mytkowicz, DjiBee)
    link_order    sweep(objects, **Plan)   run time vs object-file order on the link line
    compare       compare(a, b, ...)       A against B over random setups (env size, link order)
    threads       ht_pairs.run, thread_count.run, fauxplat_sec.run: cores, hyper-threads,
                  scaling and interference (DjiBee, easyperf)
    memcpy        run(max_bytes, trials)   memcpy cost vs size, cache knees (Rubini)
    trig          run(calls, ...)          libm calls cold and warm (Rubini)
    cswitch       run(n, ...)              context switches through pipes (Rubini)
    pagefault     run(pages, reps)         page-fault cost per page (Rubini)
    syscalls      run(calls, trials)       system-call costs, trimmed tables (FileGuard)
    clocks        read_costs(samples)      what reading each clock costs (Torpey)
    counters      run(command, events)     perf_event counts of a command
    profile       run(command, ...)        per-thread CPU, run-queue wait and blocked time

Reading results back:
    report(path)                           a saved result with its experiment's own tables
    diff(before, after)                    what changed between two results, with intervals
    reports       report(path): the experiment, its tables, conditions, partial or not
    diffs         diff(before, after): per parameter value, ratio of medians and its interval
    exports       Markdown tables and self-contained HTML pages of reports and diffs
    windows       env-size windows predicted from addresses, with a verdict for each

Services:
    results       save/load with metadata (Parquet, CSV + JSON sidecar), attach, metadata
    stats         robust summaries, bootstrap intervals of medians and ratios
    machine       CPUs, topology, caches, TSC, ASLR and what spoils a measurement
    plot          the figure style, figure() and save()
    perfassert    performance claims decided by statistics (also the pytest plugin)
    timing        in-process timing targets (C loops, Python callables, programs)
    progress      progress display for long runs in a terminal, a log or Jupyter
    resultview    show(df): a result's summary, conditions and figure as one notebook display
    campaigns     campaign(...): the same measurement on every host of a Dask cluster
    fleet         which hosts of a campaign stand out, judged robustly
"""

import importlib
from typing import Any

from perflab.errors import PerflabError

__version__ = "0.1.0"

SUBMODULES = (
    "env_size",
    "link_order",
    "compare",
    "threads",
    "memcpy",
    "trig",
    "cswitch",
    "pagefault",
    "syscalls",
    "clocks",
    "counters",
    "results",
    "stats",
    "machine",
    "plot",
    "perfassert",
    "timing",
    "progress",
    "campaigns",
    "fleet",
    "resultview",
    "profile",
    "windows",
    "reports",
    "diffs",
    "exports",
)
__all__ = ["PerflabError", "__version__", "campaign", "diff", "report", "show", *SUBMODULES]


def __getattr__(name: str) -> Any:
    """perflab.env_size and the like, imported on first use (PEP 562)."""
    if name in SUBMODULES:
        return importlib.import_module(f"perflab.{name}")
    raise AttributeError(f"module 'perflab' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(SUBMODULES))


def show(frame: Any) -> Any:
    """A result as Jupyter shows it: the experiment's summary, conditions and figure."""
    from perflab.resultview import Result

    return Result(frame)


def report(path: Any) -> Any:
    """A saved result read back: .tables, .summary, .conditions(), .plot(); see perflab.reports."""
    from perflab.reports import report as read

    return read(path)


def diff(before: Any, after: Any, confidence: float = 0.95, intersect: bool = False) -> Any:
    """Two saved results of one experiment compared: .table, .verdict, .plot() (perflab.diffs)."""
    from perflab.diffs import diff as compare_files

    return compare_files(before, after, confidence, intersect)


def campaign(*args, **kwargs):
    """Run one measurement on every host of a Dask cluster: see perflab.campaigns.run."""
    from perflab.campaigns import run

    return run(*args, **kwargs)
