"""`diff` compares only what is comparable and `report` says what makes a file's numbers doubtful:
points measured with other loop counts are refused (or, forced, warned first); rows repeated,
missing or outside the plan, a newer perflab and a CSV sidecar without its checksum are warned,
from real small runs and real result files edited."""

import json
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

import perflab
from perflab import errors
from perflab.cli import cli
from perflab.store import results
from perflab.system import machine

C0 = str(machine.usable_cpus()[0])


def _run(*argv: str):
    res = CliRunner().invoke(cli, ["--quiet", *argv])
    assert res.exit_code == 0, res.output
    return res


def _warnings(res) -> list[str]:
    return [x for x in res.stderr.splitlines() if x.startswith("perflab: warning: ")]


@pytest.fixture(scope="module")
def loops(tmp_path_factory) -> tuple[Path, Path, Path]:
    """core-vs-ht at -l 1 twice and at -l 2."""
    where = tmp_path_factory.mktemp("loops")
    paths = where / "l1.parquet", where / "l1-again.parquet", where / "l2.parquet"
    for path, n in zip(paths, ("1", "1", "2"), strict=True):
        _run("run", "core-vs-ht", "-l", n, "-p", C0, "--repeat", "3", "-o", str(path))
    return paths


def test_diff_refuses_points_measured_with_another_loop_count_unless_forced(loops):
    one, same, two = loops
    res = CliRunner().invoke(cli, ["diff", str(one), str(two)])
    assert res.exit_code == 1 and "Traceback" not in res.output
    assert res.stderr.strip().splitlines() == [
        f"Error: {one} and {two} differ in loops (loops: 1 before, 2 after), which define what "
        "a point measures: not comparable; --force compares them anyway"
    ]
    forced = _run("diff", str(one), str(two), "--force")
    said = errors.warning("points_differ", before=one, after=two, names="loops",
                          detail="loops: 1 before, 2 after")  # fmt: skip
    assert forced.stderr.splitlines()[0] == f"perflab: warning: {said}"
    doc = json.loads(_run("diff", str(one), str(two), "--force", "--json").stdout)
    assert doc["warnings"][0] == said
    assert not _warnings(_run("diff", str(one), str(same)))


@pytest.fixture(scope="module")
def sweep(tmp_path_factory) -> Path:
    """A complete env-size result: 16 sizes, 2 runs each, 32 planned runs."""
    out = tmp_path_factory.mktemp("sweep") / "sweep.parquet"
    _run("sweep", "env-size", "--max", "15", "--repeat", "2", "--no-rt", "-o", str(out))
    return out


def _edit(sweep: Path, out: Path, change, **meta) -> Path:
    """The sweep's rows changed by change(frame), saved with its metadata (and these fields)."""
    df = results.load(sweep)
    return results.save(results.attach(change(df), {**results.metadata(df), **meta}), out)


EDITS = {
    "duplicated": (
        lambda df: pd.concat([df, df.iloc[:5]], ignore_index=True),
        lambda p: errors.warning("rows_duplicated", path=p, rows=5, key="env_size, rep"),
    ),
    "missing": (
        lambda df: df.iloc[3:].reset_index(drop=True),
        lambda p: errors.warning("rows_missing", path=p, missing=3, planned=32),
    ),
    "outside the plan": (
        lambda df: df.assign(env_size=df["env_size"].where(df.index > 0, 999)),
        lambda p: errors.warning(
            "rows_unplanned", path=p, what="some of its (env_size, rep) are not the planned ones"
        ),
    ),
    "more than planned": (
        lambda df: pd.concat([df, df.iloc[:2].assign(rep=7)], ignore_index=True),
        lambda p: errors.warning(
            "rows_unplanned", path=p, what="2 more distinct (env_size, rep) than the 32 planned"
        ),
    ),
}


@pytest.mark.parametrize("edit", list(EDITS))
def test_report_and_diff_say_when_rows_are_not_the_plans(edit, sweep, tmp_path):
    change, said = EDITS[edit]
    edited = _edit(sweep, tmp_path / "edited.parquet", change)
    warning = said(str(edited))
    res = _run("report", str(edited))
    assert _warnings(res) == [f"perflab: warning: {warning}"]
    assert warning in res.stdout  # the report itself says it, under its heading
    doc = json.loads(_run("report", str(edited), "--json").stdout)
    assert doc["notes"][0] == warning
    res = _run("diff", str(sweep), str(edited), "--intersect")
    assert _warnings(res)[0] == f"perflab: warning: {warning}"
    assert not _warnings(_run("report", str(sweep)))
    with pytest.warns(errors.PerflabWarning, match="not the runs|twice|missing|never made"):
        assert perflab.report(edited).warnings == [warning]


def test_a_partial_file_is_not_said_to_miss_runs_but_its_repeats_are(sweep, tmp_path):
    cut = _edit(sweep, tmp_path / "cut.parquet", lambda df: df.iloc[3:], complete=False)
    assert not _warnings(_run("report", str(cut)))
    twice = _edit(sweep, tmp_path / "twice.parquet",
                  lambda df: pd.concat([df.iloc[3:], df.iloc[3:4]]), complete=False)  # fmt: skip
    assert len(_warnings(_run("report", str(twice)))) == 1


def test_report_and_diff_say_when_a_newer_perflab_wrote_the_file(sweep, tmp_path):
    newer = _edit(sweep, tmp_path / "newer.parquet", lambda df: df, perflab_version="99.1.0")
    said = errors.warning("newer_perflab", path=newer, theirs="99.1.0", ours=perflab.__version__)
    assert _warnings(_run("report", str(newer))) == [f"perflab: warning: {said}"]
    res = _run("diff", str(sweep), str(newer))
    assert _warnings(res)[0] == f"perflab: warning: {said}"


def test_a_csv_sidecar_without_its_checksum_is_warned_and_a_wrong_one_refused(sweep, tmp_path):
    csv = results.save(results.load(sweep), tmp_path / "sweep.csv")
    side = Path(f"{csv}.json")
    assert not _warnings(_run("report", str(csv)))
    doc = json.loads(side.read_text())
    side.write_text(json.dumps({k: v for k, v in doc.items() if k != "sha256"}))
    said = errors.warning("sidecar_unchecked", path=csv, sidecar=side)
    assert _warnings(_run("report", str(csv))) == [f"perflab: warning: {said}"]
    assert _warnings(_run("diff", str(sweep), str(csv)))[0] == f"perflab: warning: {said}"
    side.write_text(json.dumps({**doc, "sha256": "0" * 64}))
    res = CliRunner().invoke(cli, ["report", str(csv)])
    assert res.exit_code == 1 and len(res.stderr.strip().splitlines()) == 1
    assert f"{csv}: does not match {side}" in res.stderr
