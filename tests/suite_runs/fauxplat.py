"""The suite's runs of fauxplat."""

from suite_runs import SuiteRuns

RUNS = SuiteRuns(
    tiny="-l 1 --repeat 1 --cpu {cpu} --perturb cpu@{cpu}",
    api={"loops": 1, "repeat": 1, "cpu": "{cpu}", "perturb": []},
    changed=("-l", "2", "loops"),
    lasting="-l 20 --repeat 30 --cpu {cpu} --perturb cpu@{cpu}",
)
