"""The small things a new user trips on in the first hour: a summary a script can see, --md
without a file, the no-PMU reason said once, every call in trig's table, figures that name
their machine."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

import perflab
from perflab.cli import cli
from perflab.lab import pagefault, trig
from perflab.reports import report
from perflab.system import machine, pmu

IMPORT_ROOT = str(Path(perflab.__file__).resolve().parents[1])


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real result, saved as a verb saves it."""
    path = tmp_path_factory.mktemp("first") / "pf.parquet"
    perflab.results.save(pagefault.run(pages=2, reps=1), path)
    return path


def test_show_in_a_script_prints_the_summary(saved: Path):
    code = f"import perflab; perflab.show(perflab.results.load({str(saved)!r}))"
    env = {**os.environ, "PYTHONPATH": IMPORT_ROOT}
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    shown = perflab.report(saved)
    assert done.stdout.startswith("pagefault result ")
    assert shown.summary.tables[0].title in done.stdout
    assert machine.cpu_model() in done.stdout  # the conditions


def test_md_alone_writes_markdown_to_stdout_and_a_result_after_it_is_refused(saved: Path):
    run = CliRunner()
    alone = run.invoke(cli, ["report", str(saved), "--md"])
    assert alone.exit_code == 0, alone.output
    assert alone.stdout == run.invoke(cli, ["report", str(saved), "--md", "-"]).stdout
    assert alone.stdout.startswith("## perflab report: pagefault")
    before = run.invoke(cli, ["report", "--md", str(saved)])
    assert before.exit_code == 2 and not before.stdout
    said = before.stderr.strip().splitlines()
    assert len(said) == 1 and "perflab report FILE --md" in said[0]


def test_the_no_pmu_reason_is_short_in_tables_and_said_once():
    out = CliRunner().invoke(cli, ["counters"])
    assert out.exit_code == 0, out.output
    assert out.output.count(pmu.NO_PMU_WHY) == (0 if pmu.core_pmu() else 1)
    table = [line for line in out.output.splitlines() if pmu.NO_PMU_WHY not in line]
    assert max(map(len, table)) < 120  # no column padded to a paragraph
    assert len(pmu.NO_PMU) < 20


def test_every_call_is_in_the_table_of_most_frequent_values():
    df = trig.run(["sin(1)", "tan(1)", "sin(0)"], repeat=12)
    hist = trig.histogram(df)
    top = trig.most_frequent(hist, per_call=2)
    assert list(dict.fromkeys(top["call"])) == list(dict.fromkeys(hist["call"]))
    for call, mine in top.groupby("call"):
        counts = hist.loc[hist["call"] == call, "count"].sort_values(ascending=False)
        assert mine["count"].tolist() == counts.head(2).tolist()


def test_a_written_figure_names_its_machine_and_version(saved: Path, tmp_path: Path):
    shown = perflab.report(saved)
    label = report.figure_label(shown.meta)
    assert label.startswith(f"perflab {perflab.__version__} · ")
    assert machine.cpu_id() in label
    fig = shown.plot(tmp_path / "pf.png")
    assert label in [t.get_text() for t in fig.texts]
    assert (tmp_path / "pf.png").stat().st_size > 0


def test_the_core_vs_ht_legend_covers_no_bar():
    import pandas as pd

    from perflab.lab.threads import core_vs_ht

    one, two = [66.0, 66.0, None, 66.0], [132.0, 132.0, None, 132.0]
    summary = pd.DataFrame(
        {
            "placement": ["scheduler", "same cpu", "hyper-threads", "two cores"],
            "cpu_ms_1": one,
            "wall_ms_1": one,
            "cpu_ms_2": two,
            "wall_ms_2": [66.0, 99.0, None, 66.0],
        }
    )
    fig = core_vs_ht.plot_summary(summary, None, 100)
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    renderer = FigureCanvasAgg(fig).get_renderer()
    ax = fig.axes[0]
    legend = ax.get_legend().get_window_extent(renderer)
    bars = [p.get_window_extent(renderer) for p in ax.patches if p.get_height() > 0]
    assert len(bars) == 12
    assert not any(legend.overlaps(bar) for bar in bars)


def test_a_sweep_without_o_names_the_whole_path_of_the_file_it_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(cli, ["sweep", "env-size", "--max", "4", "--repeat", "1"])
    assert res.exit_code == 0, res.output
    written = list(tmp_path.glob("env-size-*.parquet"))
    assert len(written) == 1
    assert f"recording to {written[0].resolve()} " in res.stderr
    assert f"data: {written[0].name}" in res.stdout


def test_diff_prints_tick_medians_whole_and_ratios_to_three_decimals(tmp_path: Path):
    paths = []
    for name in ("before", "after"):
        paths.append(tmp_path / f"{name}.parquet")
        perflab.results.save(
            perflab.env_size.sweep(max_size=4, repeat=3, progress=False), paths[-1]
        )
    out = CliRunner().invoke(cli, ["diff", *map(str, paths), "--all"])
    assert out.exit_code == 0, out.output
    lines = out.stdout.splitlines()
    head = next(i for i, line in enumerate(lines) if line.split()[:1] == ["env_size"])
    rows = [line.split() for line in lines[head + 1 : head + 6]]
    assert len(rows) == 5
    for row in rows:
        before, after, ratio = row[3], row[4], row[5]
        assert "." not in before and "." not in after  # ticks, whole
        assert int(before.replace(",", "")) > 0
        assert len(ratio.split(".")[1]) == 3
