"""The suite's runs of clocks."""

from suite_runs import SuiteRuns

RUNS = SuiteRuns(
    tiny="--samples 20",
    one_measurement=(
        "one C loop per clock, well under a second at the default --samples; its "
        "verdicts need every clock at once (a --cluster campaign is journaled by host)"
    ),
)
