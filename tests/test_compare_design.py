"""compare --precision's design on given numbers: a fake run source hands the PrecisionDesign
each round's rows and seconds, so what it chooses next and why it stops is checked fast and the
same on every machine (the real runs are tests/test_compare_precision.py's)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from perflab.lab.compare import MIN_LAYOUTS, PILOT, ComparePlan
from perflab.lab.compare.precision import PrecisionDesign
from perflab.store import results


def fake_round(
    design: PrecisionDesign, layout_sd: float, pair_sd: float, seed: int = 0
) -> pd.DataFrame:
    """The rows of the round design.todo asks for, B/A 1 but for each layout's own effect
    (normal on the log scale, drawn per layout) and each run's noise, joined to the earlier
    ones as a journaled comparison's file holds them."""
    rows = []
    for setup, pairs in design.todo.items():
        rng = np.random.default_rng((seed, setup))
        effect = rng.normal(0, layout_sd)
        for rep in range(pairs):
            for side, shift in (("A", 0.0), ("B", effect)):
                ticks = 1e6 * math.exp(shift + rng.normal(0, pair_sd))
                rows.append({"setup": setup, "side": side, "rep": rep, "status": "ok",
                             "ticks": ticks, "wall_ns": ticks})  # fmt: skip
    part = pd.DataFrame(rows)
    if design.frame is not None:
        part = pd.concat([design.frame, part], ignore_index=True)
    return results.attach(part, {"build_s": 0.0})


def drive(design: PrecisionDesign, seconds: float, layout_sd: float, pair_sd: float) -> list[dict]:
    """Run the design's rounds, each taking `seconds`, until it stops: each round's layouts,
    pairs and iterations."""
    asked = []
    while True:
        if design.todo:
            asked.append({"layouts": len(design.todo), "pairs": set(design.todo.values()),
                          "iterations": design.iterations})  # fmt: skip
            design.ran(fake_round(design, layout_sd, pair_sd), seconds, 0.0)
        if not design.next_round():
            return asked


def test_the_pilot_alone_reaches_a_loose_target():
    """Quiet layouts and a ±5 % target: the pilot of PILOT reaches it, and nothing more runs."""
    design = PrecisionDesign(ComparePlan(precision=0.05, budget=60), None, journaled=True)
    asked = drive(design, 1.0, layout_sd=0.001, pair_sd=0.001)
    assert asked == [{"layouts": PILOT[0], "pairs": {PILOT[1]}, "iterations": 1}]
    record = design.record()
    assert record["reached"] and record["stopped"] == "reached"
    assert record["rounds"][0]["half_width"] <= 0.05
    assert record["seconds"] == 1.0 and math.isnan(record["predicted_s"])


def test_a_tight_target_plans_more_layouts_and_stops_at_the_budget():
    """Layouts spread 2 % and a ±0.1 % target: the plan after the pilot asks for hundreds of
    layouts; each round adds at most as many as have run (10 after the pilot) and only what
    the budget left pays for, then the comparison stops saying the budget was spent, with the
    time the plan after the pilot predicted."""
    design = PrecisionDesign(ComparePlan(precision=0.001, budget=3.0), None, journaled=True)
    asked = drive(design, 1.0, layout_sd=0.02, pair_sd=0.005)
    record = design.record()
    assert not record["reached"] and record["stopped"] == "budget spent"
    # each round took 1 s: the pilot and a second round of 10 layouts of 4 pairs (0.1 s a
    # layout), then the 1 s left paid for 9 more (1.0 // 0.1 is 9 in floating point)
    assert [r["layouts"] for r in asked] == [PILOT[0], PILOT[0], 9]
    assert all(r["pairs"] == {PILOT[1]} for r in asked)
    assert record["seconds"] == 3.0 and not design.todo
    assert record["rounds"][0]["planned"][0] > 10 * MIN_LAYOUTS
    assert record["predicted_s"] > 3.0 and record["predicted_from_layouts"] == PILOT[0]


def test_reached_needs_min_layouts():
    """A resume left with fewer than MIN_LAYOUTS layouts, however narrow B/A's interval, is not
    reached: the design asks for more layouts."""
    design = PrecisionDesign(ComparePlan(precision=0.5, budget=60), None, journaled=True)
    design.todo = {s: PILOT[1] for s in range(3)}
    design.ran(fake_round(design, 0.001, 0.001), 1.0, 0.0)
    assert design.next_round()
    assert len(design.todo) >= 1 and min(design.todo) == 3
    assert design.reason == ""
