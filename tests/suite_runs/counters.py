"""The suite's runs of counters."""

from suite_runs import SuiteRuns

RUNS = SuiteRuns(
    tiny="-e task-clock -- true",
    api={},
    one_measurement=(
        "without a command it lists the events; with one it counts a single run of "
        "it and exits with its status, as perf stat does"
    ),
)
