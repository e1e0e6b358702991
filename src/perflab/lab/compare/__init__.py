"""A/B comparison under setup randomization, the remedy of Mytkowicz et al. (ASPLOS 2009, §6).

One setup (an environment size, a link order, where the heap and the code start, ASLR) can make
B look faster than A when over many setups it is not. So: draw random setups, run A and B
interleaved in each, report B/A per setup and over all setups, and say so when the sign of the
effect depends on the layout. Every row records its setup's layout, so any one can be run again.

The package: plan (ComparePlan, light), measure (compare() and the names below, loaded on first
use), sides, layouts, runs, precision, verdict, metrics, exact and wording. This module is light
(the verb's --help and the registry read it).
"""

from perflab.lab.compare.plan import HEAP_DIGITS as HEAP_DIGITS
from perflab.lab.compare.plan import RANDOMIZE as RANDOMIZE
from perflab.lab.compare.plan import ComparePlan as ComparePlan
from perflab.lab.compare.plan import parse_layout as parse_layout
from perflab.plan.experiment import Experiment, lazy_modules

EXPERIMENT = Experiment(
    name="compare",
    module="perflab.lab.compare.measure",
    verb="compare",
    weighs_change=True,
    columns=frozenset({"env_size", "setup", "side", "status", "ticks"}),
    points=("side", "env_size", "link_order"),
    help="Run A and B interleaved in random setups; report B/A per setup and over all of them.",
    rows=("setup", "rep", "side"),
)

# measure.py's names, as compare.compare, compare.per_setup, ... (measure itself included)
API = (
    "compare", "CHUNK_RUNS", "FLUSH_S", "PROGRAM_PAGES", "LAYOUT", "NO_PADDING", "Setup",
    "draw_setups", "layout_option", "parse_randomize", "recorded_layout",
    "MIN_LAYOUTS", "MIN_PAIRS", "PILOT", "PREDICTION_CONFIDENCE", "RT_SHARE", "SINGLE_PILOT",
    "Round", "iteration_seconds", "most_iterations", "predicted_time", "HEAP_VAR", "Side",
    "build_command_side", "build_side", "code_placement", "identical", "objects_side",
    "program_side", "refuse_static", "CHANGE", "CONFIDENCE", "EACH_WAY", "POWER", "STALLED",
    "TOO_FEW", "TRIM", "covered", "fewest_pairs", "half_width", "interval", "overall",
    "pair_interval", "pairs_needed", "per_setup", "shown_change", "steady", "LABELLED_SETUPS",
    "SHOWN_SETUPS", "plot", "summary", "value_column"
)  # fmt: skip
# The package's other modules, each found as an attribute (compare.precision) as before.
MODULES = ("exact", "layouts", "metrics", "precision", "runs", "sides", "verdict", "wording")
__getattr__, __dir__ = lazy_modules(
    __name__, {EXPERIMENT.module: (*API, "measure")} | {f"{__name__}.{m}": (m,) for m in MODULES}
)
