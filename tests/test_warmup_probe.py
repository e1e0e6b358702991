"""perflab warmup on programs built with perflab's probe loop: the series is the probe's ticks
per iteration, as many as --iterations asks (at most the 64 records a run carries), and
--until-steady stops adding executions once the steady value over them is narrow enough."""

import json
import math

import numpy as np
import pytest
from conftest import compile_children

from perflab.analysis import steady
from perflab.analysis import warmup as analysis
from perflab.cli import cli
from perflab.core import constants
from perflab.errors import PerflabError
from perflab.lab import warmup
from perflab.lab.warmup import LEAST_ITERATIONS
from perflab.store import results

# The first 16 iterations do ten times the work of the rest: a warm-up, timed by the probe.
PROBED = r"""
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
# One region, BEGIN and END: one record a run, no series.
ONCE = r"""
#include "perflab_probe.h"
#include "chain.h"
int main(void)
{
    PERFLAB_PROBE_BEGIN();
    chain(20000ul);
    PERFLAB_PROBE_END();
    return 0;
}
"""


@pytest.fixture(scope="module")
def programs(tmp_path_factory):
    return compile_children(tmp_path_factory.mktemp("probe"), {"probed": PROBED, "once": ONCE})


def test_a_probed_program_s_series_is_its_ticks_per_iteration(programs):
    df = warmup.run((programs["probed"],), executions=3, iterations=40)
    meta = results.metadata(df)
    assert meta["unit"] == "ticks" and meta["source"] == "probe"
    assert meta["timer_overhead_ticks"] >= 0
    assert df.groupby("execution")["iteration"].count().eq(40).all()
    assert (df["time"] >= 1).all()
    # the first 16 iterations do ten times the work: each execution's slower on the whole
    first = df[df["iteration"] < 16].groupby("execution")["time"].median()
    rest = df[df["iteration"] >= 16].groupby("execution")["time"].median()
    assert (first > rest).all()
    counts = warmup.classified(df).counts
    assert counts["warm-up"] >= 1, counts


def test_a_program_neither_printing_nor_looping_is_one_line(programs):
    with pytest.raises(PerflabError, match=r"sent one probe record .* PERFLAB_PROBE_LOOP"):
        warmup.run((programs["once"],), executions=1)
    with pytest.raises(PerflabError, match="printed no times and sent no probe records"):
        warmup.run(("true",), executions=1)


def test_the_plan_s_least_iterations_is_the_classification_s():
    assert LEAST_ITERATIONS == analysis.MIN_ITERATIONS


@pytest.mark.parametrize(
    ("words", "said"),
    [
        (
            ["--iterations", "65"],
            f"more than the probe records a run carries ({constants.MAX_ITERATIONS})",
        ),
        (["--iterations", "19"], "--iterations must be at least 20"),
        (["--until-steady", "--executions", "5"], "--until-steady needs --executions 6 or more"),
        (["--steady-width", "0.1"], "--steady-width needs --until-steady"),
        (["--until-steady", "--steady-width", "0.9"], "--steady-width"),
    ],
)
def test_bad_iterations_and_widths_are_refused_in_one_line(runner, words, said):
    res = runner.invoke(cli, ["warmup", *words, "--", "seq", "40"])
    assert res.exit_code != 0
    lines = res.output.strip().splitlines()
    assert len(lines) == 1 and said in lines[0], res.output


def test_until_steady_stops_where_the_interval_is_narrow_enough(programs, runner, tmp_path):
    """On a quiet machine it stops after six to a few executions; on a loaded one an execution
    may reach no steady state and it runs them all. Either way what it says holds of the
    saved executions."""
    out = tmp_path / "u.parquet"
    res = runner.invoke(cli, ["warmup", "--iterations", "40", "--executions", "12",
                              "--until-steady", "--steady-width", "0.5", "--json", "-o", str(out),
                              "--", programs["probed"]])  # fmt: skip
    assert res.exit_code == 0, res.output
    said = json.loads(res.stdout)["until_steady"]
    saved = results.load(out)
    ran = saved["execution"].nunique()
    assert said == results.metadata(saved)["until_steady"]
    assert said["executions"] == ran and said["most"] == 12 and said["width"] == 0.5
    assert said["saved_executions"] == 12 - ran and said["seconds"] > 0
    width = steady.relative_width(warmup.classified(saved).executions)
    if said["reached"]:
        assert 6 <= ran <= 12 and width <= 0.5 and said["width_reached"] == pytest.approx(width)
        # the rule held at no earlier execution: the run stopped at the first that met it
        earlier = saved[saved["execution"] < ran - 1]
        assert steady.relative_width(warmup.classified(earlier).executions) > 0.5
    else:
        assert ran == 12 and said["saved_s"] == 0
    line = "until steady: stopped after" if said["reached"] else "until steady: not reached"
    text = runner.invoke(cli, ["report", str(out)])
    assert line in text.output, text.output


def _series(level: float, warm: int = 0, n: int = 40, seed: int = 0) -> np.ndarray:
    """A series of `n` iterations at `level`, the first `warm` of them at ten times it."""
    x = level * (1 + 0.01 * np.random.default_rng(seed).standard_normal(n))
    x[:warm] *= 10
    return x


def test_the_stopping_rule_on_series_of_known_shape():
    """Six executions are the fewest whose median has a finite 95 % interval; one without a
    steady state leaves none to narrow."""
    runs = [analysis.classify(_series(100 + i, warm=8, seed=i)) for i in range(6)]
    assert all(e.classification == "warm-up" for e in runs)
    assert math.isinf(steady.relative_width(runs[:5]))
    assert steady.relative_width(runs) == pytest.approx((105 - 100) / 102.5, rel=0.05)
    late = _series(100)
    late[34:] *= 3  # a step in the last quarter: nothing settles before the series ends
    unsettled = analysis.classify(late)
    assert unsettled.classification == "no steady state"
    assert math.isinf(steady.relative_width([*runs, unsettled]))


def test_a_run_s_steady_iterations_are_those_after_its_warm_up():
    cls, start, median = steady.steady_run(_series(100, warm=10))
    assert (cls, start) == ("warm-up", 10)
    assert median == pytest.approx(100, rel=0.01)
    assert steady.steady_run(np.ones(10))[:2] == ("unclassified", 0)
