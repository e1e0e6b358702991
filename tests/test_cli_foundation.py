"""The foundation's verbs through click's runner: tables, JSON, files, and one-line errors."""

import json
import re

from perflab import errors
from perflab.cli import cli
from perflab.store import results


def test_clocks_json_parses(runner):
    res = runner.invoke(cli, ["clocks", "--samples", "20", "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    assert {r["clock"] for r in doc["resolution"]} >= {"CLOCK_MONOTONIC", "gettimeofday"}
    assert all(r["samples"] == 20 for r in doc["cost_ns"])
    assert doc["tsc"]["verdict"]


def test_clocks_writes_data_and_plot(runner, tmp_path):
    out, png = tmp_path / "c.parquet", tmp_path / "c.png"
    res = runner.invoke(
        cli, ["clocks", "--samples", "30", "--clock", "rdtscp", "-o", str(out), "--plot", str(png)]
    )
    assert res.exit_code == 0, res.output
    assert "ClockBench" in res.output and "verdict" in res.output
    df = results.load(out)
    assert set(df["method"]) == {"rdtscp"} and len(df) == 30
    assert results.metadata(df)["unit"] == "ns"
    assert png.stat().st_size > 1000


def test_machine_table_and_json(runner):
    res = runner.invoke(cli, ["machine"])
    assert res.exit_code == 0 and "conditions that spoil measurements" in res.output
    doc = json.loads(runner.invoke(cli, ["machine", "--json"]).output)
    assert doc["topology"] and "hardware_counters" in doc


def _one_line_error(res):
    assert res.exit_code != 0
    assert "Traceback" not in res.output
    assert len(res.output.strip().splitlines()) <= 3


def test_bad_input_gives_one_line_errors(runner, tmp_path):
    for args in (
        ["clocks", "--clock", "CLOCK_SOLAR"],
        ["clocks", "--samples", "0"],
        ["clocks", "--samples", "-5"],
        ["clocks", "-o", str(tmp_path / "nope" / "x.parquet")],
        ["clocks", "--plot", str(tmp_path / "x.gif")],
    ):
        res = runner.invoke(cli, args)
        _one_line_error(res)


def test_every_warning_in_the_catalogue_names_what_fixes_it():
    for name, text in errors.WARNINGS.items():
        assert re.search(r"--[a-z]|root|ulimit", text), f"{name} names no option or step: {text}"


def test_a_warning_of_a_verb_is_one_line_on_stderr(runner, monkeypatch):
    """The one channel: a PerflabWarning raised inside any verb is printed by the CLI as
    'perflab: warning: ...', one line, and the verb goes on."""
    from perflab.lab.pagefault import measure as pagefault

    real = pagefault.run

    def warned(*args, **kwargs):
        errors.warn(errors.warning("rt_refused", why="EPERM"))
        return real(*args, **kwargs)

    monkeypatch.setattr(pagefault, "run", warned)
    res = runner.invoke(cli, ["run", "pagefault", "--pages", "2", "--reps", "1"])
    assert res.exit_code == 0, res.output
    lines = [line for line in res.stderr.splitlines() if "warning" in line]
    assert lines == [f"perflab: warning: {errors.warning('rt_refused', why='EPERM')}"]
