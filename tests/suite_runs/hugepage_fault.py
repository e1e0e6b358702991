"""The suite's runs of hugepage-fault."""

from suite_runs import SuiteRuns

RUNS = SuiteRuns(
    tiny="--mib 2 --reps 2",
    api={"mib": 2, "reps": 1},
    changed=("--reps", "3", "reps"),
    lasting="--mib 64 --reps 200",
)
