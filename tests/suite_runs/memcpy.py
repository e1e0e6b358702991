"""The suite's runs of memcpy."""

from suite_runs import SuiteRuns

RUNS = SuiteRuns(
    tiny="--max 4K --trials 2 --no-mlock",
    api={"max_bytes": 256, "trials": 1, "lock": False},
    changed=("--trials", "3", "trials"),
    lasting="--max 32M --trials 20 --no-mlock",
)
