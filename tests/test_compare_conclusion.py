"""compare's per-setup lines agree with its conclusion: gzip -9 against -1 (10x slower) once
printed "B slower in 0, faster in 0, unclear in 4 of 4", nan intervals, and "would each need
about 57 pairs to show a 2% change". Setups too few in pairs to decide alone say so and what
they read as a group; pairs needed are weighed only for a change the data have not shown."""

import math

import numpy as np
import pandas as pd
from click.testing import CliRunner

from perflab.cli import cli
from perflab.lab import compare


def _frame(effects, pairs, noise, seed=5):
    """Setups of `pairs` A/B pairs, B/A of each its effect, each run off by `noise` (log sd),
    as gzip -1 against -9 on a loaded 2-vCPU guest read (4 setups of 3 pairs, B/A 9.7-12.4)."""
    rng = np.random.default_rng(seed)
    rows = [
        {"setup": s, "env_size": 100 * s, "link_order": "", "side": side, "rep": rep,
         "status": "ok", "ticks": 2e8 * (e if side == "B" else 1) * math.exp(rng.normal(0, noise))}
        for s, e in enumerate(effects) for rep in range(pairs) for side in "AB"
    ]  # fmt: skip
    return pd.DataFrame(rows)


def _text(frame):
    said = compare.summary(frame, {"randomize": ["env-size"], "a": "gzip -1", "b": "gzip -9"})
    shown = said.tables[0].display
    return said, said.lines, shown


def _no_contradiction(lines, shown, conclusion_start):
    text = "\n".join(lines) + shown.to_string()
    assert "nan" not in text
    assert not any("would each need" in x for x in lines)
    assert not any("slower in 0, faster in 0" in x for x in lines)
    (concl,) = [x for x in lines if x.startswith(("B is", "no difference", "the conclusion"))]
    assert concl.startswith(conclusion_start)


def test_four_setups_of_three_pairs_ten_times_slower_read_as_a_group():
    said, lines, shown = _text(_frame([12.4, 10.1, 9.7, 11.5], pairs=3, noise=0.15))
    _no_contradiction(lines, shown, "B is slower than A")
    per = next(x for x in lines if x.startswith("per setup:"))
    assert (
        "no setup can decide alone (3 pairs each, where an interval of its own at 95% "
        "needs 6)" in per
    )
    assert "as a group all 4 read B/A above 1, and the interval over them all weighs" in per
    assert (shown["interval"] == "none: 3 pairs").all()
    assert (shown["verdict"] == compare.TOO_FEW).all()
    assert said.values["overall"]["too_few_pairs"] == 4 and said.values["overall"]["unclear"] == 0


def test_eighty_layouts_of_two_pairs_as_precision_plans_them():
    _said, lines, shown = _text(_frame(np.full(80, 10.0), pairs=2, noise=0.1))
    _no_contradiction(lines, shown, "B is slower than A")
    assert any("as a group all 80 read B/A above 1" in x for x in lines)


def test_setups_that_hold_one_pair_say_they_have_no_interval():
    _said, lines, shown = _text(_frame([1.5, 1.4, 1.6], pairs=1, noise=0.01))
    assert (shown["interval"] == "none: 1 pair").all()
    assert any("1 pair each" in x for x in lines)


def test_pairs_needed_are_weighed_only_where_no_change_is_shown():
    """B/A 1.000 with 4 pairs a setup: nothing shown, so the 2 % question stands."""
    said, lines, shown = _text(_frame(np.ones(6), pairs=4, noise=0.02))
    assert said.values["overall"]["ci_low"] < 1 < said.values["overall"]["ci_high"]
    assert any("would each need about" in x for x in lines)
    assert any("as a group B/A reads above 1 in" in x for x in lines)
    assert "nan" not in shown.to_string()


def test_decided_setups_keep_their_count_and_mix_with_undecided_ones():
    frame = pd.concat(
        [
            _frame([2.0, 2.0], pairs=8, noise=0.01),
            _frame([2.0], pairs=2, noise=0.01, seed=9).assign(setup=2, env_size=200),
        ]
    )
    _said, lines, shown = _text(frame)
    per = next(x for x in lines if x.startswith("per setup:"))
    assert "B slower in 2, faster in 0, unclear in 0, too few pairs in 1 (2 pairs each" in per
    assert "of 3" in per and "as a group all 3 read B/A above 1" in per
    assert shown["interval"].iloc[2] == "none: 2 pairs" and "-" in shown["interval"].iloc[0]


def test_a_real_comparison_of_too_few_pairs_a_setup_prints_no_contradiction(program, tmp_path):
    out = tmp_path / "ab.parquet"
    args = ["compare", program, f"{program} 4", "--setups", "3", "--repeat", "3", "-o", str(out)]
    done = CliRunner().invoke(cli, args)
    assert done.exit_code == 0, done.output
    lines = done.stdout.splitlines()
    assert "nan" not in done.stdout
    assert not any("slower in 0, faster in 0" in x for x in lines)
    per = next(x for x in lines if x.startswith("per setup:"))
    assert "no setup can decide alone (3 pairs each" in per
    (concl,) = [x for x in lines if x.startswith(("B is", "no difference", "the conclusion"))]
    if concl.startswith("B is slower"):  # 4x the work: where the interval says so
        assert "as a group all 3 read B/A above 1" in per
        assert not any("would each need" in x for x in lines)
