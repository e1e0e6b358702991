"""perflab bisect: the first commit between GOOD and BAD whose benchmark is slower than its
parent's, each step a layout-randomised comparison (search.py). The registry entry is here,
light enough for --help; the search, its summary and plot load from search.py on first use."""

from perflab.plan.experiment import Experiment, lazy_api

EXPERIMENT = Experiment(
    name="bisect",
    module="perflab.lab.bisect.search",
    verb="bisect",
    columns=frozenset({"newer", "older", "ratio", "step", "verdict"}),
    points=("newer",),
    value="ratio",
    help="Find the first commit between GOOD and BAD whose benchmark is slower than its parent's.",
)

API = ("bisect", "summary", "plot", "layouts_needed", "decided", "most_comparisons",
       "NOT_SLOWER", "UNRESOLVED", "RANDOMIZE", "LOOKS", "CONTROL_FLAGS")  # fmt: skip
__getattr__, __dir__ = lazy_api(__name__, EXPERIMENT.module, API)
