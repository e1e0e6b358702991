"""The suite's runs of compare."""

from suite_runs import SuiteRuns

RUNS = SuiteRuns(
    tiny="true true --setups 2 --repeat 3 --no-rt",
    changed=("--repeat", "4", "repeat"),
    lasting='"{worker} 0 1000 2" "{worker} 0 2000 2" --setups 4 --repeat 200 --no-rt',
)
