"""perflab diff --metric: two env-size sweeps of programs that touch 32 and 64 MiB compared on
their peak memory (after is larger at every size, by the ratio of their peaks), and the
metrics a result cannot give refused in one line."""

import json

import pytest
from conftest import compile_children

from perflab.cli import cli

TOUCH = r"""
#include <stdlib.h>
int main(void) {
    size_t n = (size_t)%d << 20;
    volatile char *p = malloc(n);
    for (size_t i = 0; i < n; i += 4096) p[i] = 1;
    return p[n - 4096] != 1;
}
"""


@pytest.fixture(scope="module")
def sweeps(tmp_path_factory):
    """Env-size sweeps of the two programs, saved."""
    d = tmp_path_factory.mktemp("diffmetric")
    progs = compile_children(d, {f"t{m}": TOUCH % m for m in (32, 64)})
    out = {}
    from click.testing import CliRunner

    for m in (32, 64):
        out[m] = d / f"t{m}.parquet"
        res = CliRunner().invoke(cli, ["sweep", "env-size", "--max", "3", "--repeat", "5", "-o",
                                       str(out[m]), "--", progs[f"t{m}"]])  # fmt: skip
        assert res.exit_code == 0, res.output
    return out


def test_peak_memory_is_compared_in_its_own_words(runner, sweeps):
    res = runner.invoke(cli, ["diff", str(sweeps[32]), str(sweeps[64]), "--metric", "maxrss",
                              "--json"])  # fmt: skip
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["value"] == "maxrss_kb" and doc["flagged"] == doc["points"] == 4
    for row in doc["points_table"]:
        assert row["change"] == "larger" and 1.9 < row["ratio"] < 2.05  # 64 MiB + the loader's
    said = runner.invoke(cli, ["diff", str(sweeps[32]), str(sweeps[64]), "--metric", "maxrss"])
    assert "after is larger at 4" in said.output


@pytest.mark.parametrize(
    ("metric", "said"),
    [
        ("nope", "one of time, cpu"),
        ("instructions-exact", "counted once per layout"),
    ],
)
def test_a_metric_the_results_cannot_give_is_one_line(runner, sweeps, metric, said):
    res = runner.invoke(cli, ["diff", str(sweeps[32]), str(sweeps[64]), "--metric", metric])
    lines = [x for x in res.output.splitlines() if x.startswith("Error:")]
    assert res.exit_code != 0 and len(lines) == 1 and said in lines[0], res.output


def test_counters_where_none_counted_say_so(runner, sweeps):
    from perflab.system import pmu

    if pmu.hardware_counters():
        pytest.skip("this machine's PMU counted the runs")
    res = runner.invoke(cli, ["diff", str(sweeps[32]), str(sweeps[64]), "--metric", "cycles"])
    assert res.exit_code != 0 and "no PMU" in res.output
