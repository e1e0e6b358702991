"""The environment-size experiment of Mytkowicz et al.: plan, run, summarise, find windows, plot.

A program runs with an environment holding only VAR= padded by 0..N characters (as in
DjiBee's script), each size many times, in a seeded random order; each run is one row.

The package: plan (EnvSizePlan and the built-in loops' layouts, light), measure (the sweep,
its summary, windows and figure), windows, loop_layouts, shifted, alias_counters, aliasing,
clusters and excess (what explains the windows). This module is light (the verb's --help and
the registry read it): the rest loads on first use.
"""

from perflab.lab.env_size.plan import AUTO as AUTO
from perflab.lab.env_size.plan import MAX_ARG_STRLEN as MAX_ARG_STRLEN
from perflab.lab.env_size.plan import PARAMS as PARAMS
from perflab.lab.env_size.plan import EnvSizePlan as EnvSizePlan
from perflab.plan.experiment import Experiment, lazy_modules

EXPERIMENT = Experiment(
    name="env-size",
    module="perflab.lab.env_size.measure",
    verb="sweep env-size",
    columns=frozenset({"env_size", "rep", "status", "ticks"}),
    points=("env_size",),
    help="Run PROGRAM (default: the paper's loop) with env sizes MIN..MAX, REPEAT times each.",
    rows=("env_size", "rep"),
)

API = (
    "sweep", "sweep_block", "campaign_points", "resolve_program", "binary_meta",
    "run_conditions", "summarize", "detect_windows", "with_clusters", "spacing_shown",
    "per_host_windows", "per_cpu_windows", "parse_zoom", "plot", "summary", "status_counts",
    "value_column", "KEY", "COLUMNS", "CHUNK_RUNS", "SHIFT_CHUNK_POINTS", "STACK_ALIGN",
    "VERDICTS_TITLE", "LAYOUTS_TITLE",
)  # fmt: skip
# The package's other modules, each found as an attribute (env_size.windows) as before.
MODULES = ("alias_counters", "aliasing", "clusters", "excess", "loop_layouts", "shifted",
           "windows")  # fmt: skip
__getattr__, __dir__ = lazy_modules(
    __name__, {EXPERIMENT.module: (*API, "measure")} | {f"{__name__}.{m}": (m,) for m in MODULES}
)
