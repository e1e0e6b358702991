"""compare --precision: layouts added round by round until B/A's interval is as narrow as asked,
each round planned from the variance and the costs measured so far (Kalibera and Jones)."""

import itertools
import json
import mmap
import shutil

import pytest
from conftest import compile_children

from perflab.analysis import repetitions
from perflab.cli import cli
from perflab.core import constants
from perflab.errors import PerflabWarning
from perflab.lab import compare
from perflab.lab.compare import measure
from perflab.store import results

# Work set by argv[1], so "1" and "2" differ by twice the work and nothing else.
STEADY = r"""
#include "chain.h"
int main(int argc, char **argv)
{
    chain(300000ul * (unsigned long)(argv[1][0] - '0'));
    return 0;
}
"""

# Each run does a random amount of work (1x to 11x): a spread no affordable design narrows
# to 0.1 %.
NOISY = r"""
#include <time.h>
#include <unistd.h>
#include "chain.h"
int main(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    unsigned x = (unsigned)t.tv_nsec * 2654435761u ^ (unsigned)getpid() * 40503u;
    chain(100000ul + (x >> 4) % 1000000ul);
    return 0;
}
"""


# The probe's repeat loop around the same work: its iterations are a level of their own.
LOOPED = r"""
#include "perflab_probe.h"
#include "chain.h"
int main(int argc, char **argv)
{
    unsigned long n = 100000ul * (unsigned long)(argv[1][0] - '0');
    PERFLAB_PROBE_LOOP() {
        chain(n);
    }
    return 0;
}
"""


@pytest.fixture(autouse=True)
def cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.getbasetemp() / "cache"))


@pytest.fixture(scope="module")
def programs(tmp_path_factory) -> dict[str, str]:
    return compile_children(
        tmp_path_factory.mktemp("precision"), {"steady": STEADY, "noisy": NOISY, "looped": LOOPED}
    )


def _sides(a: str, b: str) -> tuple[compare.Side, compare.Side]:
    return compare.program_side("A", a), compare.program_side("B", b)


@pytest.mark.long
def test_a_precision_reached_is_an_interval_that_narrow(programs):
    df = compare.compare(*_sides(f"{programs['steady']} 1", f"{programs['steady']} 2"),
                         precision=0.05, rt=False, progress=False)  # fmt: skip
    record = results.metadata(df)["precision"]
    assert record["reached"] and record["stopped"] == "reached" and record["target"] == 0.05
    value = compare.value_column(df)
    ok = compare.steady(df[df["status"] == "ok"], value)
    # The frame itself says so: its interval over the setups reaches less than 5 % either way.
    ratio, low, high = compare.interval(ok, value)
    assert compare.half_width(ratio, low, high) <= 0.05 and low > 1
    # The pilot first: MIN_LAYOUTS layouts of MIN_PAIRS A/B pairs, every pair run once; no
    # precision is called reached over fewer, no layout holds fewer.
    assert compare.PILOT == (compare.MIN_LAYOUTS, compare.MIN_PAIRS) == (10, 4)
    assert record["rounds"][0] == {**record["rounds"][0], "setups": 10, "repeat": 4}
    assert df.groupby("setup")["rep"].nunique().iloc[:10].eq(4).all()
    assert df.groupby("setup")["rep"].nunique().min() >= compare.MIN_PAIRS
    # A goes first in exactly half the pairs of every layout.
    first = df.groupby(["setup", "rep"])["side"].first().eq("A").groupby("setup").mean()
    assert first.eq(0.5).all()
    assert df["setup"].nunique() >= compare.MIN_LAYOUTS
    assert not df.duplicated(["setup", "rep", "side"]).any()
    assert sum(r["setups"] for r in record["rounds"]) == df["setup"].nunique()


@pytest.mark.long
def test_an_unreachable_precision_stops_at_the_budget_with_its_plan(programs):
    noisy = programs["noisy"]
    df = compare.compare(*_sides(noisy, noisy), precision=0.001, budget=3.0, rt=False,
                         progress=False)  # fmt: skip
    record = results.metadata(df)["precision"]
    assert not record["reached"] and record["stopped"] == "budget spent"
    rounds = record["rounds"]
    assert len(rounds) >= 2  # the pilot, then planned rounds while the budget allowed
    # Every round after the pilot runs what the plan before it asked: that many pairs a layout.
    for before, after in itertools.pairwise(rounds):
        assert before["planned"]
        planned = max(before["planned"][1], compare.MIN_PAIRS)
        assert after["repeat"] == planned + planned % 2  # even: A first in half the pairs
    # The plan was far beyond the budget: the run said so with the time it predicted.
    assert record["predicted_s"] > record["budget_s"]
    # With the range the pilot's 10 layouts leave it (their variance has 9 degrees of freedom).
    low, high = record["predicted_range_s"]
    assert low <= record["predicted_s"] <= high and record["predicted_from_layouts"] == 10
    lines = compare.summary(df, results.metadata(df)).lines
    assert any(f"{low:.1f}-{high:.1f} s at 90% from the variance of 10 layouts" in line
               for line in lines)  # fmt: skip
    assert any(
        line.startswith("precision: ±0.1% asked; not reached (budget spent)") for line in lines
    )
    assert any("a fixed 10 x 10 design would take" in line for line in lines)


@pytest.mark.long
def test_rounds_journal_into_one_file_that_a_resume_extends(programs, runner, tmp_path):
    out = tmp_path / "p.parquet"
    args = ["compare", programs["noisy"], programs["noisy"], "--precision", "0.1%", "--budget",
            "2", "--no-rt"]  # fmt: skip
    first = runner.invoke(cli, [*args, "-o", str(out)])
    assert first.exit_code == 0, first.output
    before = results.load(out)
    again = runner.invoke(cli, [*args, "--resume", str(out)])
    assert again.exit_code == 0, again.output
    after = results.load(out)
    assert before["setup"].nunique() < after["setup"].nunique()
    assert not after.duplicated(["setup", "rep", "side"]).any()
    kept = after.merge(before[["setup", "rep", "side", "wall_ns"]], on=["setup", "rep", "side"])
    assert len(kept) == len(before) and (kept["wall_ns_x"] == kept["wall_ns_y"]).all()
    # The record holds both sessions: the first's rounds, time and prediction, then the resume's.
    was, now = (results.metadata(f)["precision"] for f in (before, after))
    assert now["rounds"][: len(was["rounds"])] == was["rounds"]
    assert len(now["rounds"]) > len(was["rounds"]) and now["seconds"] > was["seconds"]
    assert now["predicted_s"] == was["predicted_s"]
    assert f"after {len(now['rounds'])} rounds" in again.output
    # Another precision is another comparison: refused in one line, the file untouched.
    other = runner.invoke(cli, [*args[:4], "1%", *args[5:], "--resume", str(out)])
    assert other.exit_code != 0 and "precision" in other.output
    assert len(results.load(out)) == len(after)


@pytest.mark.long
def test_where_the_rounds_record_is_said_once(programs, runner, tmp_path, monkeypatch):
    """Without -o, every round used to say 'recording to FILE' again (a new user's trial)."""
    monkeypatch.chdir(tmp_path)
    args = ["compare", programs["noisy"], programs["noisy"], "--precision", "0.1%", "--budget",
            "2", "--no-rt"]  # fmt: skip
    res = runner.invoke(cli, args)
    assert res.exit_code == 0, res.output
    (out,) = tmp_path.glob("compare-*.parquet")
    assert len(results.metadata(results.load(out))["precision"]["rounds"]) >= 2
    assert res.stderr.count("recording to ") == 1


def test_a_layout_cut_short_is_completed_by_the_resume(programs, tmp_path, monkeypatch):
    """Interrupted in the middle of a layout (batches of 3 runs, a layout's 4 pairs are 8),
    the resume completes that layout to the pairs its round planned, every pair whole, and the
    pilot ends with every layout alike. A budget too small for any round after the pilot ends
    it there, whether or not a noisy host left ±50 % unreached (a CI run added a round)."""
    monkeypatch.setattr(measure, "CHUNK_RUNS", 3)
    out = tmp_path / "p.parquet"
    kw = dict(precision=0.5, budget=1e-3, rt=False, output=out)

    def stop_after_first_batch(n: int) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        compare.compare(*_sides(f"{programs['steady']} 1", f"{programs['steady']} 1"),
                        progress=stop_after_first_batch, **kw)  # fmt: skip
    part = results.load(out)
    assert len(part) == 3 and set(part["setup"]) == {0}  # one layout and a half pair
    df = compare.compare(*_sides(f"{programs['steady']} 1", f"{programs['steady']} 1"),
                         resume=True, progress=False, **kw)  # fmt: skip
    per_layout = df.groupby("setup").size()
    assert len(per_layout) == compare.PILOT[0]
    assert (per_layout == 2 * compare.PILOT[1]).all()
    assert not df.duplicated(["setup", "rep", "side"]).any()
    assert results.metadata(df)["precision"]["stopped"] in ("reached", "budget spent")


@pytest.mark.long
def test_what_every_round_warns_is_said_once(programs, tmp_path):
    """A program kept mapped is refused a fresh read in every round: one warning says so."""
    held_path = tmp_path / "held"
    shutil.copy2(programs["steady"], held_path)
    with (
        open(held_path, "rb") as f,
        mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ) as held,
        pytest.warns(PerflabWarning) as caught,
    ):
        assert sum(held[:: mmap.PAGESIZE]) >= 0  # in memory, and mapped here
        df = compare.compare(*_sides(f"{programs['steady']} 1", f"{held_path} 1"),
                             precision=0.001, budget=2, rt=False, progress=False)  # fmt: skip
    assert len(results.metadata(df)["precision"]["rounds"]) >= 2
    assert [str(w.message).split(":")[0] for w in caught].count(str(held_path)) == 1


@pytest.mark.parametrize(
    ("extra", "match"),
    [
        (["--precision", "0"], "above 0 %"),
        (["--precision", "100%"], "above 0 %"),
        (["--precision", "fast"], "a percentage"),
        (["--precision", "nan"], "above 0 %"),
        (["--precision", "1%", "--setups", "5"], "leave --setups out"),
        (["--precision", "1%", "--repeat", "5"], "leave --repeat out"),
        (["--budget", "10"], "--budget needs --precision"),
        (["--precision", "1%", "--budget", "0"], "budget"),
    ],
)
def test_bad_precision_input_is_one_line_and_runs_nothing(programs, runner, tmp_path, extra, match):
    out = tmp_path / "p.parquet"
    res = runner.invoke(
        cli, ["compare", programs["noisy"], programs["noisy"], *extra, "-o", str(out)]
    )
    assert res.exit_code != 0
    said = [x for x in res.output.splitlines() if x.startswith("Error:")]
    assert len(said) == 1 and match in said[0], res.output
    assert not out.exists()


@pytest.mark.long
def test_iterations_are_planned_as_a_level_and_each_round_runs_its_own(programs, runner, tmp_path):
    """--iterations 4 pilots the repeat loop at 4 a run; the plan then chooses the iterations
    a run of the later rounds, and every run of a round sends as many records as it asked.
    0.001 %, beyond any round's reach: A against itself in a register chain reads within
    0.1-0.3 %, so the pilot alone could reach the 0.05 % this asked before."""
    out = tmp_path / "it.parquet"
    looped = programs["looped"]
    r = runner.invoke(cli, ["compare", f"{looped} 1", f"{looped} 1", "--iterations", "4",
                            "--precision", "0.001%", "--budget", "5", "-o", str(out)])  # fmt: skip
    assert r.exit_code == 0, r.output
    df = results.load(out)
    record = results.metadata(df)["precision"]
    rounds = record["rounds"]
    # The pilot: runs of 4, then runs of one, so that what iterations buy is measured.
    assert [r["iterations"] for r in rounds[:2]] == [4, 1] and not rounds[0]["planned"]
    assert len(rounds[1]["planned"]) == 3 and len(rounds) > 2
    assert set(record["costs_s"]) == {"layout", "pair", "iteration"}
    # Each round's runs ran what it asked, and the next round asks what the plan said.
    ok = df[df["status"] == "ok"]
    pilot = ok["setup"] < compare.MIN_LAYOUTS
    single = ok["setup"].between(
        compare.MIN_LAYOUTS, compare.MIN_LAYOUTS + compare.SINGLE_PILOT - 1
    )
    assert (ok.loc[pilot, "iterations"] == 4).all() and (ok.loc[single, "iterations"] == 1).all()
    for before, after in itertools.pairwise(rounds[1:]):
        assert after["iterations"] == before["planned"][2]
    assert "the iterations within them" in r.output and "iterations a run" in r.output
    assert "(the interval covers: setup and run and iteration)" in r.output
    # --json carries the record whole, not only as the text lines.
    shown = runner.invoke(cli, ["report", str(out), "--json"])
    values = json.loads(shown.output)
    assert values["precision"]["rounds"] == rounds and values["iterations"] == 4


def test_a_plans_predicted_time_holds_the_round_about_to_run():
    # 10 layouts asking for 25 at 0.2 s each: 15 more, 3 s. Its range scales the 25 by 0.53
    # and 2.71 (a variance from 10 layouts, 9 degrees of freedom, at 90 %), but never below
    # the round about to run, 10 more.
    predicted, low, high = compare.predicted_time(4.0, 25, 10, 0.2)
    assert predicted == pytest.approx(4.0 + 15 * 0.2)
    assert (low, high) == pytest.approx((4.0 + 10 * 0.2, 4.0 + (25 * 2.7067 - 10) * 0.2), 1e-4)
    # The looped pilot's 15 layouts did not reach, though the plan reads 11 as enough: the round
    # that follows (a quarter more, 3 layouts) is in every outcome.
    predicted, low, high = compare.predicted_time(17.0, 11, 15, 1.0)
    most = repetitions.variance_ratio_range(14, 0.9)[1]
    assert predicted == low == 20.0 and high == pytest.approx(17.0 + 11 * most - 15)


@pytest.mark.long
def test_iterations_asked_of_a_program_without_the_loop_are_said_no_level(programs, runner):
    steady = programs["steady"]
    r = runner.invoke(cli, ["compare", f"{steady} 1", f"{steady} 1", "--iterations", "3",
                            "--setups", "3", "--repeat", "2"])  # fmt: skip
    assert r.exit_code == 0, r.output
    assert "without the probe's repeat loop (PERFLAB_PROBE_LOOP) iterations are no level" in (
        r.output
    )


def test_a_fixed_design_at_one_count_of_iterations_says_it_cannot_split_them(programs, runner):
    """Without --precision every run runs --iterations' count: the iterations' share of B/A's
    variance is not told apart from the runs', and the line says so."""
    looped = programs["looped"]
    r = runner.invoke(cli, ["compare", f"{looped} 1", f"{looped} 1", "--iterations", "3",
                            "--setups", "3", "--repeat", "4"])  # fmt: skip
    assert r.exit_code == 0, r.output
    assert "with their 3 iterations each (runs of one count of iterations cannot tell" in r.output
    assert "(the interval covers: setup and run and iteration)" in r.output


def test_real_time_runs_are_planned_no_longer_than_the_kernels_runtime_allows():
    """An encoder iteration of 45 ms planned 64 times a run made 2.9 s real-time runs, which
    the kernel paused inside every run; a run is held inside RT_SHARE of its runtime."""
    from perflab.system import settings

    costs = [0.0, 0.01, 0.09]  # a layout, a pair's starts, an iteration of both sides (s)
    free = compare.ComparePlan(rt=False)
    assert compare.most_iterations(free, costs) == constants.MAX_ITERATIONS
    bandwidth = settings.rt_bandwidth()
    held = compare.most_iterations(compare.ComparePlan(rt=True), costs)
    if bandwidth is None:  # the kernel does not throttle: nothing to stay inside
        assert held == constants.MAX_ITERATIONS
    else:
        assert held == int((compare.RT_SHARE * bandwidth[0] / 1e9 - 0.005) // 0.045)
        inside = compare.RT_SHARE * bandwidth[0] / 1e9
        assert 0.005 + held * 0.045 <= inside < 0.005 + (held + 1) * 0.045


def test_a_round_of_one_iteration_a_run_still_prices_the_iteration():
    """A round the plan ran at 1 iteration a run used to price iterations at nothing, and the
    next plan asked for 64 of them (2.7 s runs of brotli's encoder)."""
    import pandas as pd

    rows = pd.DataFrame({"ticks": [2.6e6, 2.6e6], "iterations": [1, 1]})
    assert compare.iteration_seconds(rows, 2.6e9) == pytest.approx(2e-3)
    rows["iterations"] = 4
    assert compare.iteration_seconds(rows, 2.6e9) == pytest.approx(8e-3)
    assert compare.iteration_seconds(rows.drop(columns="iterations"), 2.6e9) == 0.0
