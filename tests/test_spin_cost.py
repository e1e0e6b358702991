"""The spin-cost experiment: its loop costs the same per turn at every length."""

from perflab.lab import spin_cost


def test_twice_the_turns_cost_about_twice_the_ticks():
    df = spin_cost.run(turns=(2_000, 4_000), samples=20)
    table = spin_cost.summarize(df).set_index("turns")
    assert list(df.columns) == ["turns", "sample", "ticks"] and len(df) == 40
    assert 1.5 < table.loc[4_000, "median_ticks"] / table.loc[2_000, "median_ticks"] < 2.5
