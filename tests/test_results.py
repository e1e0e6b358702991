"""Results keep their metadata through save/load, and journals survive interruption."""

import os

import numpy as np
import pandas as pd
import pytest

from perflab.errors import PerflabError
from perflab.store import journal, results


def _frame() -> pd.DataFrame:
    df = pd.DataFrame(
        {
            "env_size": np.arange(5, dtype=np.int64),
            "rep": np.zeros(5, dtype=np.int64),
            "ticks": [1.5, 2.0, np.nan, 4.25, 5.0],
            "status": ["ok", "ok", "crash", "ok", "ok"],
            "link_order": ["", "", "a,b", "", ""],  # compare's, where nothing is linked
        }
    )
    return results.attach(df, {"tsc_hz": 2.5e9, "aslr": "off", "nested": {"a": [1, 2]}})


@pytest.mark.parametrize("suffix", [".parquet", ".csv"])
def test_save_load_round_trip(tmp_path, suffix):
    df = _frame()
    old = os.umask(0o022)
    try:
        path = results.save(df, tmp_path / f"r{suffix}")
    finally:
        os.umask(old)
    back = results.load(path)
    assert path.stat().st_mode & 0o777 == 0o644
    pd.testing.assert_frame_equal(back, df)
    assert results.metadata(back) == results.metadata(df)


@pytest.mark.parametrize("suffix", [".parquet", ".csv"])
def test_categories_come_back_with_those_no_row_has_and_their_order(tmp_path, suffix):
    df = _frame()
    df["status"] = pd.Categorical(df["status"], categories=["ok", "timeout", "crash"])
    df["load"] = pd.Categorical(["lo"] * 5, categories=["lo", "mid", "hi"], ordered=True)
    back = results.load(results.save(df, tmp_path / f"r{suffix}"))
    pd.testing.assert_frame_equal(back, df)
    assert back["status"].cat.categories.tolist() == ["ok", "timeout", "crash"]
    assert back["load"].cat.ordered and back["load"].max() == "lo"


def test_unwritable_and_unknown_outputs_are_refused(tmp_path):
    with pytest.raises(PerflabError, match="does not exist"):
        results.check_output(tmp_path / "missing" / "r.parquet")
    with pytest.raises(PerflabError, match="unknown output format"):
        results.check_output(tmp_path / "r.xlsx")
    for name in ("", f"{tmp_path}/r.parquet/"):  # pathlib would write r.parquet for the second
        with pytest.raises(PerflabError, match="not a file's name"):
            results.check_output(name)


def _journal(path, resume=False, **params):
    return journal.Journal(path, {"n": 10, **params}, {"host": "x"}, ["k"], resume, chunk_rows=3)


def test_journal_resume_after_kill_measures_only_the_rest(tmp_path):
    path = tmp_path / "j.parquet"
    j = _journal(path)
    j.extend({"k": k, "v": k * 2} for k in range(7))
    # A kill: the buffered seventh row is lost, the two flushed chunks stay on disk.
    del j
    j = _journal(path, resume=True)
    done = j.done_keys()
    assert done == {(k,) for k in range(6)}
    j.extend({"k": k, "v": k * 2} for k in range(10) if (k,) not in done)
    df = j.finish()
    assert sorted(df["k"]) == list(range(10))
    assert not (tmp_path / "j.parquet.parts").exists()
    assert results.metadata(results.load(path))["complete"] is True


def test_journal_interrupt_then_resume_twice(tmp_path):
    path = tmp_path / "j.csv"
    j = _journal(path)
    j.extend({"k": k, "v": 0} for k in range(4))
    j.finish(complete=False)
    j = _journal(path, resume=True)
    assert len(j.done_keys()) == 4
    j.extend({"k": k, "v": 0} for k in range(4, 10))
    assert sorted(j.finish()["k"]) == list(range(10))


def test_journal_refuses_other_parameters_and_stale_parts(tmp_path):
    path = tmp_path / "j.parquet"
    j = _journal(path)
    j.extend({"k": k, "v": 0} for k in range(4))
    with pytest.raises(PerflabError, match="interrupted run"):
        _journal(path)
    with pytest.raises(PerflabError, match="different parameters"):
        _journal(path, resume=True, n=11)
    with pytest.raises(PerflabError, match="nothing to resume"):
        _journal(tmp_path / "other.parquet", resume=True)


def test_proc_is_refused_even_for_root():
    with pytest.raises(PerflabError, match="not writable"):
        results.check_output("/proc/perflab-test.csv")


def test_kill_between_final_save_and_cleanup_duplicates_nothing(tmp_path):
    path = tmp_path / "j.parquet"
    j = _journal(path)
    j.extend({"k": k, "v": 0} for k in range(6))
    j.flush()
    parts = sorted((tmp_path / "j.parquet.parts").iterdir())
    saved = {p.name: p.read_bytes() for p in parts}
    j.finish(complete=False)
    # The kill landed after the merged file was written, before the journal was removed.
    (tmp_path / "j.parquet.parts").mkdir()
    for name, data in saved.items():
        (tmp_path / "j.parquet.parts" / name).write_bytes(data)
    j = _journal(path, resume=True)
    assert len(j.done_keys()) == 6
    j.extend({"k": k, "v": 0} for k in range(6, 10))
    df = j.finish()
    assert sorted(df["k"]) == list(range(10))
