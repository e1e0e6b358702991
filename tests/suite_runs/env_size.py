"""The suite's runs of env-size."""

from suite_runs import SuiteRuns

RUNS = SuiteRuns(
    tiny="--max 15 --repeat 2 --no-rt",
    changed=("--repeat", "3", "repeat"),
    lasting="--max 0 --repeat 1500 --no-rt -- {worker} 0 1000 2",
)
