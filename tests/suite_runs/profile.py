"""The suite's runs of profile."""

from suite_runs import SuiteRuns

RUNS = SuiteRuns(
    tiny="-- sleep 0.1",
    one_measurement="one profiled run of COMMAND, its threads sampled while it runs",
)
