"""perflab: low-level performance experiments on Linux, measured honestly.

This module is the public API: `import perflab`, or `from perflab import NAME` for any name
below; the layer folders under it (core, system, analysis, engine, lab, reports, assertions,
cli: docs/architecture.md) may move. Names load on first use (PEP 562), so `import perflab`
imports neither numpy, pandas nor matplotlib:

    import perflab
    df = perflab.env_size.sweep(max_size=4096, step=16, repeat=5)
    perflab.env_size.plot(df)       # a Figure, inline in Jupyter
    perflab.show(df)                # summary table, conditions and figure in one display
    perflab.report("env-size.parquet").summary

Every experiment is a module with run (or sweep), summarize and plot: run returns a tidy
DataFrame (one row per measurement, units in the column names, metadata in df.attrs), plot(df[,
path]) a matplotlib Figure (written too when given a path). EXPERIMENTS lists them by the name
their results carry, with their module and their verb.

Experiments (module: entry point, what it measures):
    env_size     sweep(program, **EnvSizePlan): run time vs environment size (Mytkowicz, DjiBee)
    windows      where the env-size windows fall, predicted from addresses and explained
    link_order   sweep(objects, **LinkOrderPlan): run time vs object-file order on the link line
    compare      compare(a, b, ..., metrics=("time",)): A against B over random setups (env
                 size, link order); a and b from compare.program_side, build_side or objects_side
    bisect       bisect(good, bad, build, run, repo=...): the first commit that made it slower
    history      track(revisions, build, run, ...) into a store; history(store): the series
                 per machine and its change points, each confirmed by a comparison
    threads      core_vs_ht.run, thread_count.run, fauxplat.run, program.run: cores,
                 hyper-threads, scaling and interference (DjiBee, easyperf)
    memcpy       run(max_bytes, trials): copy cost vs size, cache knees (Rubini)
    pagefault    run(pages, reps): page-fault cost per page (Rubini)
    trig         run(calls, ...): libm calls cold and warm (Rubini)
    cswitch      run(n, ...): context switches through pipes (Rubini)
    syscalls     run(calls, trials): system-call costs, trimmed tables (FileGuard)
    clocks       run(samples, names): every clock, its resolution and cost, the TSC (Torpey)
    counters     run(command, events): the perf events that count here, or a command's counts
    profile      run(argv, ...): per-thread CPU, run-queue wait and blocked time (easyperf)
    contention   run(threads, kinds, ...): threads under one lock, waiting or spinning
    warmup       warmup(fn, executions, iterations): a callable's calls in fresh processes,
                 each execution classified flat, warm-up, slowdown or no steady state
                 (Barrett et al.); summary and plot in perflab.lab.warmup, as for the verb

Services:
    results      save/load with metadata (Parquet, or CSV with a JSON sidecar), attach, metadata
    stats        robust summaries, intervals of medians and of their ratios
    plot         the figure style, figure() and save()
    machine      CPUs (online, usable, SMT siblings), topology, caches, the TSC's rate
    provenance   metadata() every result carries, report() of the machine and what spoils a
                 measurement
    compiler     the C workloads, built with the system compiler and cached by content
    timing       what a perf assertion times: C functions, Python callables, programs
    perfsamples  perf record samples: each thread's CPU time by symbol
    progress     the progress display of long runs, in a terminal, a log or Jupyter

Reading results back:
    report(path)         a saved result with its experiment's own tables and conditions
    diff(before, after)  what changed between two results, per parameter value, with intervals
    show(frame)          a result as one notebook display: summary, conditions and figure
    exporters            Markdown and self-contained HTML pages of reports and diffs
    campaign(measure, points, address)  one measurement on every host of a Dask cluster

Performance assertions (the pytest plugin's fixture offers the same; docs/pytest-plugin.md):
    assert_faster, assert_no_slower and assert_ticks_below raise PerfAssertionError unless the
    statistics decide the claim; check_faster, check_no_slower and check_ticks_below return the
    same decision. Targets: a Python callable (as is, or python_callable(fn, name)), a C
    function c_function(ptr), the core's loop spin(n), a program(argv).

Errors: PerflabError, one line for the user. Version: __version__
"""

import importlib
from typing import Any

from perflab.errors import PerflabError

__version__ = "0.1.0"

# public name -> the module that holds it (a module itself when the name is the module's leaf)
MODULES = {
    "env_size": "perflab.lab.env_size",
    "link_order": "perflab.lab.link_order",
    "compare": "perflab.lab.compare",
    "bisect": "perflab.lab.bisect",
    "history": "perflab.lab.history",
    "threads": "perflab.lab.threads",
    "memcpy": "perflab.lab.memcpy",
    "pagefault": "perflab.lab.pagefault",
    "trig": "perflab.lab.trig",
    "cswitch": "perflab.lab.cswitch",
    "syscalls": "perflab.lab.syscalls",
    "clocks": "perflab.lab.clocks",
    "counters": "perflab.lab.counters",
    "profile": "perflab.lab.profile",
    "contention": "perflab.lab.contention",
    "windows": "perflab.lab.env_size.windows",
    "results": "perflab.store.results",
    "timing": "perflab.running.timing",
    "progress": "perflab.running.progress",
    "stats": "perflab.analysis.stats",
    "plot": "perflab.analysis.plot",
    "machine": "perflab.system.public_machine",
    "provenance": "perflab.system.provenance",
    "compiler": "perflab.system.compiler",
    "perfsamples": "perflab.system.perfsamples",
    "exporters": "perflab.reports.exporters",
}
FUNCTIONS = {
    "report": "perflab.reports.report",
    "diff": "perflab.reports.diff",
    "show": "perflab.reports.view",
    "campaign": "perflab.running.campaigns:run",
    "EXPERIMENTS": "perflab.lab.registry",
    "assert_faster": "perflab.assertions.claims",
    "assert_no_slower": "perflab.assertions.claims",
    "assert_ticks_below": "perflab.assertions.claims",
    "check_faster": "perflab.assertions.claims",
    "check_no_slower": "perflab.assertions.claims",
    "check_ticks_below": "perflab.assertions.claims",
    "PerfAssertionError": "perflab.assertions.claims",
    "c_function": "perflab.running.timing",
    "python_callable": "perflab.running.timing",
    "spin": "perflab.running.timing",
    "program": "perflab.running.timing",
    "warmup": "perflab.lab.warmup.callables",
}
__all__ = ["PerflabError", "__version__", *MODULES, *FUNCTIONS]


def __getattr__(name: str) -> Any:
    """perflab.env_size, perflab.report and the rest, imported on first use."""
    if name in MODULES:
        return importlib.import_module(MODULES[name])
    if name in FUNCTIONS:
        module, _, attr = FUNCTIONS[name].partition(":")
        return getattr(importlib.import_module(module), attr or name)
    raise AttributeError(f"module 'perflab' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
