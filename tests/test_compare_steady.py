"""compare --iterations 20 or more: each run's iterations classified as warmup_stats does, its
warm-up set aside before its median is taken, and the verdict inconclusive where runs reached
no steady state; below 20 iterations a comparison is as it was."""

import json

import numpy as np
import pytest
from conftest import compile_children

from perflab.analysis import steady
from perflab.cli import cli
from perflab.lab import compare
from perflab.running import spawn
from perflab.store import results

# The first 16 iterations do ten times the work of the rest.
WARM = r"""
#include "perflab_probe.h"
#include "chain.h"
int main(void)
{
    int it = 0;
    PERFLAB_PROBE_LOOP() {
        chain(it++ < 16 ? 200000ul : 20000ul);
    }
    return 0;
}
"""


@pytest.fixture(autouse=True)
def cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.getbasetemp() / "cache"))


@pytest.fixture(scope="module")
def warm(tmp_path_factory):
    return compile_children(tmp_path_factory.mktemp("steady"), {"warm": WARM})["warm"]


@pytest.fixture(scope="module")
def compared(warm, tmp_path_factory):
    out = tmp_path_factory.mktemp("steady-out") / "c.parquet"
    sides = compare.program_side("A", warm), compare.program_side("B", warm)
    df = compare.compare(*sides, setups=2, repeat=4, iterations=40, output=out, progress=False)
    return df, out


def test_each_run_s_warm_up_is_set_aside_and_said(compared, runner):
    df, out = compared
    ok = df[df["status"] == "ok"]
    assert {"warmup", "steady_state"} <= set(df.columns)
    classes = ok["steady_state"].astype(str)
    assert set(classes) <= set(steady.RUN_CLASSES[1:])
    # the step of ten times is found; under load a disturbed last stretch can hide it in a run
    # (its wide segment overlaps the first: flat), so not in every run
    assert (classes == "warm-up").any()
    assert (ok.loc[classes == "warm-up", "warmup"] > 0).all()
    states = results.metadata(results.load(out))["steady_state"]
    assert states["runs"] == len(ok) and states["warmup_iterations"] == int(ok["warmup"].sum())
    assert sum(states[c] for c in steady.RUN_CLASSES) == len(ok)
    res = runner.invoke(cli, ["report", str(out), "--json"])
    assert res.exit_code == 0, res.output
    total = json.loads(res.stdout)["overall"]
    assert total["steady_state"] == states
    assert total["inconclusive"] == bool(states["no steady state"])
    assert total["conclusion"].startswith("inconclusive") == total["inconclusive"]
    text = runner.invoke(cli, ["report", str(out)]).output
    assert f"{states['warmup_iterations']} warm-up iterations of" in text, text


def test_runs_without_a_steady_state_make_the_verdict_inconclusive(compared):
    """The recorded runs, one of them read as no steady state: the B/A stays, the claim goes."""
    df, _ = compared
    frame = df.copy()
    frame["steady_state"] = "warm-up"
    settled = compare.summary(frame, results.metadata(df)).values["overall"]
    assert not settled["inconclusive"] and not settled["conclusion"].startswith("inconclusive")
    first = frame.index[frame["status"] == "ok"][0]
    frame.loc[first, "steady_state"] = "no steady state"
    said = compare.summary(frame, results.metadata(df))
    total = said.values["overall"]
    assert total["inconclusive"] and total["steady_state"]["no steady state"] == 1
    assert total["conclusion"].startswith("inconclusive: 1 of ")
    assert settled["conclusion"] in total["conclusion"]  # what the medians read, still said
    assert any("no steady state in 1 run" in line for line in said.lines)


def test_a_run_s_ticks_are_the_median_of_its_steady_iterations(warm):
    runs = spawn.run_env_sizes([warm], np.zeros(2, np.int64),
                               options=spawn.SpawnOptions(iterations=40))  # fmt: skip
    overhead = spawn.timer_overhead()
    tidy = spawn.tidy_columns(runs, overhead)
    cols = spawn.steady_columns(runs, tidy["ticks"].copy(), overhead)
    for i in range(2):
        raw = np.maximum(runs["iteration_ticks"][i, :40].astype(float) - overhead, 1.0)
        cls, start, median = steady.steady_run(raw)
        assert str(cols["steady_state"][i]) == cls and cols["warmup"][i] == start
        assert cols["ticks"][i] == median == np.median(raw[start:])


def test_fewer_iterations_than_a_classification_needs_keep_every_iteration(warm):
    sides = compare.program_side("A", warm), compare.program_side("B", warm)
    df = compare.compare(*sides, setups=2, repeat=2, iterations=4, progress=False)
    assert "warmup" not in df and "steady_state" not in df
    assert "steady_state" not in results.metadata(df)
