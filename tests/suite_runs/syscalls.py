"""The suite's runs of syscalls."""

from suite_runs import SuiteRuns

RUNS = SuiteRuns(
    tiny="--call getpid --trials 100 --trim 5",
    api={"calls": ["getpid"], "trials": 25},
    changed=("--trials", "101", "trials"),
    lasting="--trials 150000",
)
