"""The suite's runs of trig."""

from suite_runs import SuiteRuns

RUNS = SuiteRuns(
    tiny="--repeat 3",
    api={"calls": ["sin(1.0)"], "repeat": 2},
    changed=("--repeat", "4", "repeat"),
    lasting="--cold 600 --repeat 10",
)
