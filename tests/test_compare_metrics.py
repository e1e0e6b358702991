"""compare --metric: each metric decided alone from the columns the runs recorded, exact where
its runs repeat to the unit, and refused in one line before any run where this machine cannot
measure it."""

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import compile_children

from perflab.cli import cli
from perflab.engine import results
from perflab.lab.compare import metrics

ALLOC = r"""
#include <stdlib.h>
#include <string.h>
int main(int argc, char **argv) {
    size_t bytes = (size_t)atol(argv[1]) << 20;
    char *p = malloc(bytes);
    memset(p, 1, bytes);
    volatile char s = 0;
    for (size_t i = 0; i < bytes; i += 4096) s += p[i];
    return s == 42;
}
"""
DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="module")
def alloc(tmp_path_factory) -> str:
    return compile_children(tmp_path_factory.mktemp("alloc"), {"alloc": ALLOC})["alloc"]


@pytest.fixture(scope="module")
def halves(alloc, tmp_path_factory) -> Path:
    """A compare of a program touching 32 MiB against the same touching 64 MiB, saved."""
    out = tmp_path_factory.mktemp("ab") / "ab.parquet"
    res = CliRunner().invoke(cli, ["compare", f"{alloc} 32", f"{alloc} 64", "--setups", "3",
                                   "--repeat", "4", "--no-rt", "--metric", "maxrss,cpu",
                                   "-o", str(out), "--json"])  # fmt: skip
    assert res.exit_code == 0, res.output
    return out


def test_twice_the_memory_is_decided_larger_exactly_and_time_stays_overall(halves):
    doc = json.loads(CliRunner().invoke(cli, ["report", str(halves), "--json"]).stdout)
    assert list(doc["metrics"]) == ["maxrss", "cpu"]
    rss = doc["metrics"]["maxrss"]
    # 32 MiB more of a ~34 MiB peak: B/A near 2 whatever the loader's pages, the same in every run
    assert 1.5 < rss["ratio"] < 2.5 and rss["exact"] is True
    assert rss["ci_low"] == rss["ci_high"] == rss["ratio"]
    assert rss["conclusion"].endswith("B larger") and "exactly" in rss["conclusion"]
    assert rss["median_b"] - rss["median_a"] >= 30 * 1024  # KiB: the 32 MiB B touches more
    assert doc["metrics"]["cpu"]["ratio"] > 1 and doc["overall"]["ratio"] > 1
    text = CliRunner().invoke(cli, ["report", str(halves)]).stdout
    assert "by metric, each decided alone:" in text and rss["conclusion"] in text


def test_a_saved_comparison_is_decided_again_on_another_metric(halves):
    res = CliRunner().invoke(cli, ["report", str(halves), "--metric", "time", "--json"])
    doc = json.loads(res.stdout)
    assert list(doc["metrics"]) == ["time"]
    assert doc["metrics"]["time"]["ratio"] == doc["overall"]["ratio"]


def test_two_copies_of_one_program_never_differ_in_memory(alloc):
    res = CliRunner().invoke(cli, ["compare", f"{alloc} 16", f"{alloc} 16", "--setups", "3",
                                   "--repeat", "4", "--no-rt", "--metric", "maxrss",
                                   "--json"])  # fmt: skip
    assert res.exit_code == 0, res.output
    said = json.loads(res.stdout)["metrics"]["maxrss"]["conclusion"]
    assert "larger" not in said and "smaller" not in said, said


def test_decide_reads_a_recorded_frame(halves):
    frame = results.load(halves)
    cpu = metrics.decide(frame, "cpu")
    assert cpu["column"] == "cpu_ns" and cpu["pairs"] == 12 and cpu["setups"] == 3
    assert cpu["median_a"] > 0
    gone = metrics.decide(frame.assign(maxrss_kb=-1), "maxrss")
    assert "not measured" in gone["conclusion"] and "ratio" not in gone


@pytest.mark.parametrize("metric", list(metrics.METRICS))
def test_a_metric_this_machine_lacks_is_refused_before_any_run(metric, tmp_path):
    out = tmp_path / "x.parquet"
    res = CliRunner().invoke(cli, ["compare", "true", "true", "--metric", metric, "--no-rt",
                                   "--setups", "1", "--repeat", "1", "-o", str(out)])  # fmt: skip
    why = metrics.unavailable(metric)
    if why:
        assert res.exit_code == 1 and not out.exists()
        assert res.stderr.strip().splitlines() == [
            f"Error: --metric {metric}: {why}; this machine offers {', '.join(metrics.available())}"
        ]
    else:
        assert res.exit_code == 0, res.output


def test_unknown_metrics_and_other_results_are_one_line():
    res = CliRunner().invoke(cli, ["compare", "true", "true", "--metric", "joules"])
    assert res.exit_code == 1 and "--metric 'joules': one of time, cpu, maxrss" in res.stderr
    res = CliRunner().invoke(cli, ["report", str(DATA / "env-size-xeon-amx.parquet"),
                                   "--metric", "cpu"])  # fmt: skip
    assert res.exit_code == 1
    assert (
        res.stderr.strip()
        .splitlines()[-1]
        .endswith("--metric decides a compare result, and this result is of env-size")
    )
