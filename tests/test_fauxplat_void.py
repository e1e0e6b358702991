"""fauxplat says when a perturbation's change is no result: under load the hogs once made the
index 10-13 % faster and the table read as a finding. Void where a perturbation reads faster
than alone beyond alone's spread, or where alone did not have its CPU to itself; every
column of the table names its unit."""

import pandas as pd
import pytest

from perflab.lab.threads import fauxplat


def _frame(per_s: dict[str, list[float]], wall_over_cpu: dict[str, float]) -> pd.DataFrame:
    """Runs of 100 loops: cpu_ns from the index, wall_ns that many times longer."""
    rows = []
    for cond, values in per_s.items():
        for rep, v in enumerate(values):
            cpu_ns = 100 / v * 1e9
            wall_ns = cpu_ns * wall_over_cpu[cond]
            rows.append({"condition": cond, "rep": rep, "cpu": 0, "kernel": "loop",
                         "loops": 100, "cpu_ns": cpu_ns, "wall_ns": wall_ns, "ticks": 0,
                         "context_switches": 0, "steal_ns": 0, "fauxplat_per_s": v,
                         "fauxplat_wall_per_s": 100 / (wall_ns / 1e9), "status": "ok"})  # fmt: skip
    return pd.DataFrame(rows)


META = {"loops": 100, "loop_factor": 100000, "cpu": 0}


def test_a_quiet_cpu_and_slower_perturbations_are_a_result():
    df = _frame({"alone": [1000, 1002, 998], "cpu@0": [900, 905, 895], "cache@0": [800, 790, 810]},
                {"alone": 1.0, "cpu@0": 2.0, "cache@0": 2.0})  # fmt: skip
    said = fauxplat.summary(df, META)
    table = said.tables[0].frame
    assert table["result"].tolist() == ["baseline", "slower", "slower"]
    assert not any(x.startswith("void") for x in said.lines)
    assert "void" not in said.tables[0].title
    assert table["change_pct"].iloc[1] == pytest.approx(-10.0)


def test_a_perturbation_that_reads_faster_is_void():
    runs = {"alone": [1000, 1002, 998], "cpu@0": [1120, 1130, 1110], "rt@0": [999, 1001, 1000]}
    df = _frame(runs, {"alone": 1.0, "cpu@0": 2.0, "rt@0": 5.0})
    said = fauxplat.summary(df, META)
    table = said.tables[0].frame
    assert table["result"].tolist() == ["baseline", "void: faster than alone", "no change shown"]
    (void,) = [x for x in said.lines if x.startswith("void")]
    assert "cpu@0 +12.0% read faster than alone" in void and "rt@0" not in void
    assert said.tables[0].title.endswith("void for 1 of 2 perturbations")


def test_a_busy_cpu_alone_voids_every_perturbation():
    df = _frame({"alone": [1000, 1002, 998], "cpu@0": [900, 905, 895]},
                {"alone": 4.0, "cpu@0": 6.0})  # fmt: skip
    said = fauxplat.summary(df, META)
    assert said.tables[0].frame["result"].tolist() == ["baseline", "void: CPU busy alone"]
    (void,) = [x for x in said.lines if x.startswith("void")]
    assert "alone, elapsed time was 4.0x the thread's CPU time" in void


def test_every_column_names_its_unit():
    df = _frame({"alone": [1000, 1002], "cpu@0": [900, 905]}, {"alone": 1.0, "cpu@0": 2.0})
    table = fauxplat.summary(df, META).tables[0]
    title = table.title
    for col in table.frame.columns:
        assert col in ("condition", "n", "result", "wall_over_cpu") or col.endswith(
            (f"_{fauxplat.PER_CPU}", f"_{fauxplat.PER_WALL}", "_pct")
        ), col
    assert "per_cpu_s: loops per CPU second" in title and "per_wall_s: per elapsed second" in title
    assert "wall_over_cpu: elapsed over CPU time, x" in title and "n: runs" in title
