"""The suite's runs of link-order."""

from suite_runs import SuiteRuns

RUNS = SuiteRuns(
    tiny="--permutations 2 --repeat 2 --no-rt",
    changed=("--repeat", "3", "repeat"),
    lasting="--permutations 2 --repeat 1000 --no-rt",
)
