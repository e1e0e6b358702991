"""The suite's runs of contention."""

from suite_runs import SuiteRuns

RUNS = SuiteRuns(
    tiny="",
    api={"threads": [2], "kinds": ["mutex"], "iterations": 200, "sample_hz": None},
    one_measurement=(
        "one run of the built-in workload per (kind, threads), through the Python "
        "API only (contention.run; `profile --workload` writes a profile file)"
    ),
)
