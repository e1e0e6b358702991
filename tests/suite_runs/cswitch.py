"""The suite's runs of cswitch."""

from suite_runs import SuiteRuns

RUNS = SuiteRuns(
    tiny="50 --reps 1 --no-rt --cpu {cpu}",
    api={"n": 20, "reps": 1, "realtime": False, "cpus": ["{cpu}"]},
    changed=("--reps", "2", "reps"),
    lasting="5000 --reps 8 --no-rt",
)
