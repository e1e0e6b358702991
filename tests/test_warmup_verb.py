"""perflab warmup on real programs built here: one whose first 20 iterations do ten times the
work (warm-up), one that does ten times the work
from its 20th iteration on (slowdown), and a flat one; and its
refusals of bad input, each one line before anything runs."""

import json

import pytest
from conftest import compile_children

from perflab.cli import cli
from perflab.errors import PerflabError
from perflab.lab import warmup
from perflab.store import results

TIMED = r"""
#include <stdio.h>
#include <time.h>
static void work(long n) { volatile long s = 0; for (long i = 0; i < n; i++) s += i; }
int main(void) {
    for (int it = 0; it < 200; it++) {
        struct timespec a, b;
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
        work(WORK);
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b);
        printf("%lld\n", (b.tv_sec - a.tv_sec) * 1000000000LL + (b.tv_nsec - a.tv_nsec));
    }
    return 0;
}
"""
SHAPES = {
    "warm": "(it < 20 ? 2000000L : 200000L)",  # the first 20 iterations ten times the work
    # the warm-up's mirror: ten times the work from the 20th iteration on (a ramp instead is
    # one segment whose deviation spans the steady state's: flat, by warmup_stats' rule)
    "slow": "(it < 20 ? 200000L : 2000000L)",
    "flat": "200000L",
}


@pytest.fixture(scope="module")
def programs(tmp_path_factory):
    d = tmp_path_factory.mktemp("warmup")
    return compile_children(d, {name: TIMED.replace("WORK", work) for name, work in SHAPES.items()})


def _executions(program):
    """Ten executions of the program, classified."""
    return warmup.classified(warmup.run((program,), executions=10))


# On a quiet machine every execution has the class its program was built to show. On one
# shared with other work (2 vCPUs here), stretches of it shift an execution's iterations by
# more than their spread, even in CPU time: some executions then end in no steady state or
# another class, as warmup_stats classifies them too. What holds on every machine: the class
# the program was built to show is found, and a step of ten times is never flat.


def test_first_iterations_ten_times_longer_are_warm_up(programs):
    counts = _executions(programs["warm"]).counts
    assert counts["warm-up"] >= 1 and counts["flat"] == 0, counts


@pytest.mark.long
def test_work_ten_times_longer_after_20_iterations_is_a_slowdown(programs):
    counts = _executions(programs["slow"]).counts
    assert counts["slowdown"] >= 1 and counts["flat"] == 0, counts


def test_cli_table_json_output_and_plot(programs, runner, tmp_path):
    out, png = tmp_path / "w.parquet", tmp_path / "w.png"
    res = runner.invoke(cli, ["warmup", "--executions", "3", "--seed", "2", "--json", "-o",
                              str(out), "--plot", str(png), "--", programs["flat"]])  # fmt: skip
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert sum(doc["counts"].values()) == 3 and doc["unit"] == "ns"
    assert [e["execution"] for e in doc["executions"]] == [0, 1, 2]
    saved = results.load(out)
    assert len(saved) == 3 * 200 and list(saved["iteration"][:3]) == [0, 1, 2]
    assert saved.groupby("execution")["env_size"].nunique().eq(1).all()
    assert results.metadata(saved)["experiment"] == "warmup"
    assert png.stat().st_size > 0
    text = runner.invoke(cli, ["report", str(out)])
    assert text.exit_code == 0 and "per execution" in text.output, text.output


@pytest.mark.parametrize(
    ("words", "said"),
    [
        ([], "no program"),
        (["--executions", "0", "--", "seq", "40"], "--executions must be at least 1"),
        (["--executions", "x", "--", "seq", "40"], "--executions"),
        (["--unit", "days", "--", "seq", "40"], "--unit"),
        (["--", "/nonexistent/bench"], "/nonexistent/bench"),
        (["--cpu", "9999", "--", "seq", "40"], "CPU 9999"),
    ],
)
def test_bad_input_is_refused_in_one_line(runner, words, said):
    res = runner.invoke(cli, ["warmup", *words])
    assert res.exit_code != 0
    lines = res.output.strip().splitlines()
    assert len(lines) == 1 and said in lines[0], res.output


def test_a_program_printing_too_few_or_no_times_is_refused(tmp_path):
    with pytest.raises(PerflabError, match="printed 5 times"):
        warmup.run(("seq", "5"), executions=1)
    with pytest.raises(PerflabError, match="is not a time"):
        warmup.run(("echo", "hello"), executions=1)
