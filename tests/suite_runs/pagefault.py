"""The suite's runs of pagefault."""

from suite_runs import SuiteRuns

RUNS = SuiteRuns(
    tiny="--pages 4 --reps 2",
    api={"pages": 2, "reps": 1},
    changed=("--reps", "3", "reps"),
    lasting="--pages 1024 --reps 800",
)
