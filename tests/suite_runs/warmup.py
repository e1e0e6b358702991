"""The suite's runs of warmup."""

from suite_runs import SuiteRuns

RUNS = SuiteRuns(
    tiny="--executions 2 -- seq 40",
    api={"program": ("seq", "40"), "executions": 2},
    changed=("--executions", "3", "executions"),
    one_measurement="a run is saved whole once its executions are classified, not journaled",
)
