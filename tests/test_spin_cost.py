"""The spin-cost experiment: its loop costs the same per turn at every length."""

from perflab.lab import spin_cost


def test_twice_the_turns_cost_about_twice_the_ticks():
    df = spin_cost.run(turns=(20_000, 40_000), samples=20)
    table = spin_cost.summarize(df).set_index("turns")
    assert list(df.columns) == ["turns", "sample", "ticks"] and len(df) == 40
    # twice the turns, well more and well under three times the ticks: a host's spell or the
    # loop's own start moved one length's median by a third at 2 000 turns (CI read 1.42 and
    # 3.0); at 20 000, about 15 us a sample here, the start weighs a tenth as much
    assert 1.2 < table.loc[40_000, "median_ticks"] / table.loc[20_000, "median_ticks"] < 3.2
