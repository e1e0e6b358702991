"""The hugepage-fault experiment, on real fresh memory: what holds on every Linux machine, with
or without transparent huge pages (their number and their cost are the kernel's to decide)."""

import json

import pytest
from click.testing import CliRunner

from perflab.cli import cli
from perflab.lab import hugepage_fault
from perflab.store import results
from perflab.store.recording import Recording


def test_every_region_is_touched_and_timed_in_both_page_sizes():
    df = hugepage_fault.run(mib=4, reps=3)
    assert list(df.columns) == list(hugepage_fault.COLUMNS) and len(df) == 6
    assert set(df["condition"]) == set(hugepage_fault.CONDITIONS)
    assert (df["ns"] > 0).all() and (df["faults"] >= 1).all() and (df["mib"] == 4).all()
    assert (df["ns_per_mib"] == df["ns"] / 4).all()
    meta = results.metadata(df)
    assert meta["experiment"] == "hugepage-fault" and meta["thp"] and meta["complete"] is True
    table = hugepage_fault.summarize(df).set_index("condition")
    assert table.loc["4 KiB pages", "x_4k_pages"] == 1.0


def test_an_interrupted_run_resumes_to_every_region_once(tmp_path):
    out = tmp_path / "h.parquet"

    def stop(n: int) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        hugepage_fault.run(mib=2, reps=4, recording=Recording(out, progress=stop))
    kept = results.load(out)
    assert 0 < len(kept) < 8 and results.metadata(kept)["complete"] is False
    df = hugepage_fault.run(mib=2, reps=4, recording=Recording(out, resume=True))
    assert results.metadata(df)["complete"] is True
    assert sorted(df[["rep", "condition"]].itertuples(index=False, name=None)) == sorted(
        (r, c) for r in range(4) for c in hugepage_fault.CONDITIONS
    )
    merged = kept.merge(df, on=["rep", "condition"], suffixes=("", "_after"))
    assert (merged["ns"] == merged["ns_after"]).all()  # the kept regions were not touched again


def test_the_verb_prints_per_mib_medians_and_refuses_a_bad_count_before_measuring(tmp_path):
    runner = CliRunner()
    res = runner.invoke(cli, ["run", "hugepage-fault", "--mib", "2", "--reps", "2", "--json"])
    assert res.exit_code == 0, res.output
    rows = {r["condition"]: r for r in json.loads(res.stdout)["per_mib"]}
    assert set(rows) == set(hugepage_fault.CONDITIONS)
    assert all(r["median_ns_per_mib"] > 0 for r in rows.values())
    out = tmp_path / "h.parquet"
    for argv, said in ((["--mib", "0"], "--mib must be at least 1, not 0"),
                       (["--reps", "0"], "--reps must be at least 1, not 0")):  # fmt: skip
        res = runner.invoke(cli, ["run", "hugepage-fault", *argv, "-o", str(out)])
        assert res.exit_code == 2 and said in res.output, res.output
        assert len(res.output.strip().splitlines()) == 1 and not out.exists()
