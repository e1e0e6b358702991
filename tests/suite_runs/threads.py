"""The suite's runs of threads."""

from suite_runs import SuiteRuns

RUNS = SuiteRuns(
    tiny="--max 1 -l 1 --repeat 1",
    api={"max_threads": 1, "loops": 1, "repeat": 1},
    changed=("-l", "2", "loops"),
    lasting="--max {ncpus} -l 40 --repeat 40",
)
