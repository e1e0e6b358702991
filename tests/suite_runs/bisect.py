"""The suite's runs of bisect."""

from suite_runs import SuiteRuns

RUNS = SuiteRuns(
    tiny='{good} {bad} --repo {repo} --build "cc -O1 -o prog prog.c" --run ./prog '
    "--setups 4 --repeat 3",
    one_measurement="each comparison is saved as it ends; tests/test_bisect.py stops "
    "one between two and resumes it",
)
