"""The suite's runs of spin-cost."""

from suite_runs import SuiteRuns

RUNS = SuiteRuns(
    tiny="--samples 3",
    api={"turns": (100, 200), "samples": 3},
    one_measurement="one short loop per length, well under a second at its default",
)
