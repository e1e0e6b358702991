"""The suite's runs of threads-program."""

from suite_runs import SuiteRuns

RUNS = SuiteRuns(
    tiny="--threads 1,2 --repeat 2 --oversubscribe -- true {threads}",
    changed=("--repeat", "3", "repeat"),
    lasting="--threads 1,2 --repeat 100 --oversubscribe -- {worker} {threads} 1000 20",
)
