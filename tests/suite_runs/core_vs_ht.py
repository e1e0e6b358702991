"""The suite's runs of core-vs-ht."""

from suite_runs import SuiteRuns

RUNS = SuiteRuns(
    tiny="-l 1 -p {cpu}",
    api={"loops": 1, "cpus": ["{cpu}"]},
    changed=("-l", "2", "loops"),
    lasting="-l 20 --repeat 20",
)
