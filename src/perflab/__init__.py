"""perflab: low-level performance experiments on Linux, measured honestly.

This module is the public API; everything else may move. Names load on first use (PEP 562), so
`import perflab` imports neither numpy, pandas nor matplotlib:

    import perflab
    df = perflab.env_size.sweep(max_size=4096, step=16, repeat=5)
    perflab.env_size.plot(df)       # a Figure, inline in Jupyter
    perflab.show(df)                # summary table, conditions and figure in one display
    perflab.report("env-size.parquet").summary

Experiments (perflab.EXPERIMENTS lists them with their verbs; docs/architecture.md):
    env_size, link_order, compare, threads, memcpy, pagefault, trig, cswitch, syscalls,
    clocks, counters, profile, contention; windows (why env-size windows are where they are)
Results: results (save/load with metadata), stats, machine, plot, compiler (workload builds),
    timing (in-process targets), perfsamples, progress
Reading back: report(path), diff(before, after), show(frame), exporters, campaign(...)
Errors: PerflabError, one line for the user. Version: __version__
Assertions: assert_faster, assert_no_slower, assert_ticks_below, check_faster, check_no_slower,
    check_ticks_below, and their targets c_function, python_callable, spin, program
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
    "results": "perflab.engine.results",
    "timing": "perflab.engine.timing",
    "progress": "perflab.engine.progress",
    "stats": "perflab.analysis.stats",
    "plot": "perflab.analysis.plot",
    "machine": "perflab.system.machine",
    "compiler": "perflab.system.compiler",
    "perfsamples": "perflab.system.perfsamples",
    "exporters": "perflab.reports.exporters",
}
FUNCTIONS = {
    "report": "perflab.reports.report",
    "diff": "perflab.reports.diff",
    "show": "perflab.reports.view",
    "campaign": "perflab.engine.campaigns:run",
    "EXPERIMENTS": "perflab.lab.registry",
    "assert_faster": "perflab.assertions.claims",
    "assert_no_slower": "perflab.assertions.claims",
    "assert_ticks_below": "perflab.assertions.claims",
    "check_faster": "perflab.assertions.claims",
    "check_no_slower": "perflab.assertions.claims",
    "check_ticks_below": "perflab.assertions.claims",
    "PerfAssertionError": "perflab.assertions.claims",
    "c_function": "perflab.engine.timing",
    "python_callable": "perflab.engine.timing",
    "spin": "perflab.engine.timing",
    "program": "perflab.engine.timing",
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
