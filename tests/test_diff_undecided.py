"""What `perflab diff` says of points without a decision: the runs per point that would show a
change of interest, from the spread the two real sweeps measured."""

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from conftest import compile_children

from perflab.analysis import repetitions
from perflab.cli import cli
from perflab.reports import diff
from perflab.store import results

# A probed loop whose length each run draws from its pid: a real program with a real spread of
# about 7 %, so a few runs decide nothing at 2 % and the runs needed are many.
JITTER = r"""
#include <unistd.h>
#include "perflab_probe.h"
#include "chain.h"
int main(void)
{
    long iters = 100000 + 5000 * (getpid() % 5);
    PERFLAB_PROBE_BEGIN();
    chain((unsigned long)iters);
    PERFLAB_PROBE_END();
    return 0;
}
"""


@pytest.fixture(scope="module")
def sweeps(tmp_path_factory) -> tuple[Path, Path]:
    """Two sweeps of one program, made again when the host slowed one of them for a spell
    (its median 1.2x the other's: this guest's host slows it 1.2-1.7x for a second at times,
    longer than a sweep here), and a skip that says so if it does three times."""
    where = tmp_path_factory.mktemp("undecided")
    program = compile_children(where, {"jitter": JITTER})["jitter"]
    for _ in range(3):
        out = []
        for name in ("before", "after"):
            path = where / f"{name}.parquet"
            path.unlink(missing_ok=True)
            argv = ["sweep", "env-size", "--max", "3", "--repeat", "6", "--no-rt", "-o", str(path)]
            res = CliRunner().invoke(cli, [*argv, "--", program])
            assert res.exit_code == 0, res.output
            out.append(path)
        a, b = (results.load(p)["ticks"].median() for p in out)
        if max(a, b) / min(a, b) < 1.2:
            return out[0], out[1]
    pytest.skip(f"one of two sweeps of one program ran {max(a, b) / min(a, b):.2f}x the other, "
                "three times (the host slowed this guest for a spell)")  # fmt: skip


def _json(*argv: str) -> dict:
    res = CliRunner().invoke(cli, ["diff", *argv, "--json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def _spread(x: np.ndarray) -> np.ndarray:
    return np.abs(x - np.median(x)) / np.median(x)


def test_each_point_is_told_the_runs_its_measured_spread_needs(sweeps):
    before, after = sweeps
    out = _json(str(before), str(after), "--change", "10%")
    assert out["change"] == 0.1 and out["power"] == 0.8
    t = pd.DataFrame(out["points_table"]).set_index("env_size")
    a, b = (results.load(p) for p in sweeps)
    fewest = diff.fewest_runs(out["level_per_point"], "bootstrap")
    for size, row in t.iterrows():
        x, y = (f.loc[f["env_size"] == size, "ticks"].to_numpy(float) for f in (a, b))
        spread = 1.4826 * np.median(np.concatenate([_spread(x), _spread(y)]))
        want = repetitions.runs_for_spreads(np.array([spread]), 0.1, out["level_per_point"],
                                       out["power"], "median")[0]  # fmt: skip
        assert row["runs_needed"] == max(want, fewest), (size, spread)
    open_ = t[(t["change"] == "") & (t["runs_needed"] > 6)]
    assert len(open_), t  # a 7 % spread in 6 runs cannot show 10 % at 98.75 % a point
    median = int(open_["runs_needed"].median())
    assert (
        f"{len(open_)} without a decision need about {median:,} runs per point in each result "
        "to show a 10% change (80% power; they have 6" in out["verdict"]
    )


def _recorded(sweep: Path, out: Path, seed: int) -> Path:
    """A real sweep's file (its columns, runs and metadata) with ticks of a known 7 % spread
    drawn anew (lognormal, seeded): what diff says of it follows from the frames, not from
    this machine's noise."""
    df = results.load(sweep)
    meta = results.metadata(df)
    df["ticks"] = np.round(100_000 * np.random.default_rng(seed).lognormal(0, 0.07, len(df)))
    return results.save(results.attach(df, meta), out)


def test_a_smaller_change_needs_more_runs_and_a_large_one_none(sweeps, tmp_path):
    """On frames of a known spread, 6 runs a point are too few for a 2 % change and enough for
    90 %; on the real sweeps, a smaller change never needs fewer runs, and the verdict counts
    what the table says (how many points had runs enough follows this machine's noise)."""
    # The same draws both sides: no change to find, the spread alone sets the runs needed.
    before, after = (str(_recorded(p, tmp_path / p.name, seed=7)) for p in sweeps)
    small = pd.DataFrame(_json(before, after)["points_table"])
    assert (small["change"] == "").all() and (small["runs_needed"] > 6).all(), small
    large = _json(before, after, "--change", "90%")
    assert large["verdict"].endswith(
        "; the 4 without a decision had runs enough to show a 90% change (80% power): a change "
        "there is likely smaller"
    )
    text = CliRunner().invoke(cli, ["diff", before, after, "--change", "2%"])
    assert text.exit_code == 0 and "to show a 2% change" in text.output.splitlines()[-1]

    real = [str(p) for p in sweeps]
    small = pd.DataFrame(_json(*real)["points_table"])["runs_needed"]
    middle = pd.DataFrame(_json(*real, "--change", "0.1")["points_table"])["runs_needed"]
    assert (small >= middle).all()
    large = _json(*real, "--change", "90%")
    t = pd.DataFrame(large["points_table"])
    open_ = t[(t["change"] == "") & (t["runs_needed"] > 0)]
    enough = int((open_["runs_needed"] <= open_[["n_before", "n_after"]].min(axis=1)).sum())
    said = f"{enough} without a decision had runs enough to show a 90% change"
    assert (said in large["verdict"]) == (enough > 0), (large["verdict"], t)


def test_a_change_that_is_no_fraction_is_one_line(sweeps):
    before, after = (str(p) for p in sweeps)
    for bad in ("abc", "0%", "150%", "1.5"):
        res = CliRunner().invoke(cli, ["diff", before, after, "--change", bad])
        assert res.exit_code == 2 and "Invalid value for '--change'" in res.output, res.output
