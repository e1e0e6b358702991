"""What a new user meets first: an import that changes nothing, a CLI that starts without pandas
or matplotlib, figures that are returned, an API found from `import perflab`, progress in logs."""

import importlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import click
import pytest

import perflab
from perflab.analysis import plot
from perflab.cli import VERBS, cli
from perflab.lab import env_size
from perflab.running import progress
from perflab.store import results

HEAVY = ("pandas", "matplotlib")
ROOT = Path(__file__).resolve().parents[1]


def _python(code: str, **env: str) -> str:
    """Run code in a fresh interpreter (sys.modules as a user's) and return its stdout."""
    done = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_import_perflab_cli_loads_neither_pandas_nor_matplotlib():
    out = _python(
        f"import sys, perflab, perflab.cli; print([m for m in {HEAVY} if m in sys.modules])"
    )
    assert out.strip() == "[]"


def test_perflab_help_loads_neither_pandas_nor_matplotlib_and_lists_every_verb():
    code = (
        "import sys\nfrom perflab.cli import main\nsys.argv = ['perflab', '--help']\n"
        "try:\n    main()\nexcept SystemExit as e:\n    assert not e.code, e.code\n"
        f"print('LOADED', [m for m in {HEAVY} if m in sys.modules])"
    )
    out = _python(code)
    assert out.rstrip().endswith("LOADED []")
    for verb in ("clocks", "compare", "counters", "machine", "report", "sweep", "run"):
        assert f"\n  {verb} " in out
    assert "_PERFLAB_COMPLETE=bash_source" in out


def test_a_verb_loads_its_module_when_it_runs(runner):
    out = _python(
        "import sys\nfrom click.testing import CliRunner\nfrom perflab.cli import cli\n"
        "r = CliRunner().invoke(cli, ['sweep', '--help'])\nassert r.exit_code == 0, r.output\n"
        "print(sorted(m for m in sys.modules if m.startswith('perflab.cli.')))\n"
        "r = CliRunner().invoke(cli, ['run', 'trig', '--repeat', '2', '--json'])\n"
        "assert r.exit_code == 0, r.output\nprint('perflab.lab.trig.measure' in sys.modules)"
    )
    listed, ran = out.strip().splitlines()
    assert listed == "[]"  # the sweep verbs' help came from VERBS
    assert ran == "True"  # built from its plan, the verb loaded its measuring module to run


def test_the_lazy_listing_says_what_each_verb_says(runner):
    """VERBS is read instead of the verbs' modules: it must match their own help, all of it."""
    here = Path(importlib.import_module("perflab.cli").__file__).parent
    # Helpers of the verbs (these, _private) define none; every other module is a verb's.
    helpers = ("__init__", "params", "options", "interference", "exports", "running", "printing",
               "verbs")  # fmt: skip
    modules = {p.stem for p in here.glob("*.py") if p.stem not in helpers}
    modules = {m for m in modules if not m.startswith("_")}
    assert modules <= {module for module, _ in VERBS.values()}, "a cli module no verb names"
    for module in modules:
        importlib.import_module(f"perflab.cli.{module}")
    for path, (_, text) in VERBS.items():
        *groups, name = path.split()
        group = cli
        for g in groups:
            group = group.commands[g]
        # a verb with a module of its own is loaded; one built from its plan is built here
        command = group.get_command(click.Context(group, info_name=groups[-1] if groups else None,
                                                  parent=click.Context(cli)), name)  # fmt: skip
        assert command is not None, path
        told = click.Command(name, help=text).get_short_help_str(200)
        assert told == command.get_short_help_str(200), path
    for group in (cli, cli.commands["sweep"], cli.commands["run"]):
        for name in group.commands:
            prefix = "" if group is cli else f"{group.name} "
            if name not in ("sweep", "run"):
                assert f"{prefix}{name}" in VERBS, f"{prefix}{name} is missing from VERBS"
    result = runner.invoke(cli, ["sweep", "nosuch"])
    assert result.exit_code == 2 and "nosuch" in result.output


def test_shell_completion_lists_verbs_from_the_table():
    out = subprocess.run(
        [sys.executable, "-m", "perflab"],
        env={**os.environ, "_PERFLAB_COMPLETE": "bash_complete", "COMP_WORDS": "perflab sw",
             "COMP_CWORD": "1"},
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "plain,sweep" in out.stdout.split()


def test_importing_and_plotting_leave_matplotlib_as_the_user_set_it(tmp_path):
    """No backend switch, no rcParams change, no pyplot: a notebook's inline backend survives."""
    code = f"""
import json, sys
import matplotlib
before = dict(matplotlib.rcParams)
import perflab
for name in perflab.__all__:
    getattr(perflab, name)
from perflab.analysis import plot
fig, ax = plot.figure()
ax.plot([1, 2, 3], [1, 4, 9])
plot.save(fig, {str(tmp_path / "f.png")!r}, title="t")
png = fig._repr_png_()
after = dict(matplotlib.rcParams)
print(json.dumps({{
    "backend": matplotlib.get_backend(),
    "changed": sorted(k for k in before if str(before[k]) != str(after[k])),
    "pyplot": "matplotlib.pyplot" in sys.modules,
    "png": png[:8] == b"\\x89PNG\\r\\n\\x1a\\n",
}}))
"""
    got = json.loads(_python(code, MPLBACKEND="pdf").strip().splitlines()[-1])
    assert got == {"backend": "pdf", "changed": [], "pyplot": False, "png": True}
    assert (tmp_path / "f.png").read_bytes()[:4] == b"\x89PNG"


def test_plot_returns_the_figure_and_writes_only_when_given_a_path(tmp_path):
    from matplotlib.figure import Figure

    df = results.attach(
        __import__("pandas").DataFrame(
            {"env_size": [0, 0, 16, 16], "rep": [0, 1, 0, 1], "ticks": [10.0, 11, 20, 21],
             "status": ["ok"] * 4}
        ),
        {"experiment": "env-size", "aslr": "off"},
    )  # fmt: skip
    os.chdir(tmp_path)
    fig = env_size.plot(df)
    assert isinstance(fig, Figure) and list(tmp_path.iterdir()) == []
    assert fig._repr_png_()[:4] == b"\x89PNG"
    saved = env_size.plot(df, tmp_path / "e.svg")
    assert isinstance(saved, Figure) and b"<svg" in (tmp_path / "e.svg").read_bytes()[:500]
    with pytest.raises(perflab.PerflabError, match="unknown plot format"):
        plot.save(fig, tmp_path / "e.gif")


def test_the_api_is_found_from_import_perflab():
    """perflab/__init__.py is the one public API: each of its names resolves by either import
    form, `import perflab` alone stays light, help(perflab) explains every one (in the module's
    docstring, which help shows first), and the rest loads on first use."""
    out = _python(
        "import json, pydoc, re, sys, types, perflab\n"
        "heavy = [m for m in ('numpy', 'pandas', 'matplotlib') if m in sys.modules]\n"
        "lazy = 'perflab.lab.env_size' in sys.modules\n"
        "f = perflab.env_size.sweep\n"
        "kinds = {}\n"
        "for name in perflab.__all__:\n"
        "    got = getattr(perflab, name)\n"
        "    scope = {}\n"
        "    exec(f'from perflab import {name}', scope)\n"
        "    assert scope[name] is got, name\n"
        "    kinds[name] = isinstance(got, types.ModuleType)\n"
        "shown = pydoc.render_doc(perflab, renderer=pydoc.plaintext)\n"
        "assert perflab.__doc__.splitlines()[2] in shown\n"
        "unnamed = [n for n in perflab.__all__ if not re.search(rf'\\b{n}\\b', perflab.__doc__)]\n"
        "print(json.dumps({'heavy': heavy, 'lazy': lazy, 'sweep': f.__name__,\n"
        "                  'kinds': kinds, 'unnamed': unnamed}))"
    )
    found = json.loads(out)
    assert found["heavy"] == [], "import perflab alone imported these"
    assert found["lazy"] is False and found["sweep"] == "sweep"
    assert found["unnamed"] == [], "help(perflab) does not name these"
    assert set(found["kinds"]) == set(perflab.__all__)
    assert {n for n, is_module in found["kinds"].items() if is_module} == set(perflab.MODULES)
    with pytest.raises(AttributeError, match="no attribute 'nosuch'"):
        perflab.nosuch  # noqa: B018
    with pytest.raises(ImportError):
        exec("from perflab import nosuch", {})
    assert set(perflab.__all__) <= set(dir(perflab))
    doc = env_size.sweep.__doc__
    for column in ("env_size", "rep", "ticks", "wall_ns", "status", "program"):
        assert column in doc


class Clock:
    """A clock the test moves by hand: when a progress line is due is what is tested."""

    def __init__(self):
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_progress_lines_come_every_five_percent_or_ten_seconds():
    out, clock = io.StringIO(), Clock()
    p = progress.Progress("sweep", file=out, mode="lines", clock=clock)
    p.on_start(1000)
    for _ in range(50):  # 5 % in 5 s: one line, at the 5 % step
        clock.t += 0.1
        p.update(1)
    for _ in range(10):  # 1 % in 30 s: a line after 10 s without one, twice
        clock.t += 3
        p.update(1)
    clock.t += 1
    p.update(940)
    p.close()
    assert out.getvalue().splitlines() == [
        "sweep: 0/1,000 (0%)",
        "sweep: 50/1,000 (5%), 10.0/s, ETA 1m35s",
        "sweep: 54/1,000 (5%), 3.2/s, ETA 4m58s",
        "sweep: 58/1,000 (6%), 2.0/s, ETA 7m51s",
        "sweep: 1,000/1,000 (100%), 27.8/s, 36s",
    ]


def test_quiet_and_off_show_nothing():
    out = io.StringIO()
    with progress.Progress("x", 10, file=out, mode="off") as p:
        p.update(10)
    assert out.getvalue() == ""
    with pytest.raises(ValueError, match="mode must be one of"):
        progress.Progress(mode="loud")


@pytest.mark.long
def test_a_sweep_with_stderr_in_a_file_logs_progress_lines(tmp_path):
    log = tmp_path / "log"
    args = ["sweep", "env-size", "--max", "63", "--step", "16", "--repeat", "3", "--no-rt",
            "-o", str(tmp_path / "e.parquet"), "--json"]  # fmt: skip
    for quiet in ([], ["--quiet"]):
        with log.open("w") as err:
            done = subprocess.run(
                [sys.executable, "-m", "perflab", *quiet, *args], stdout=subprocess.PIPE,
                stderr=err, text=True, timeout=300, check=False,
            )  # fmt: skip
        text = log.read_text()
        assert done.returncode == 0, text
        assert json.loads(done.stdout)["runs"] == 12
        lines = [ln for ln in text.splitlines() if ln.startswith("env-size: ")]
        if quiet:
            assert lines == []
        else:
            assert lines[0] == "env-size: 0/12 (0%)"
            assert lines[-1].startswith("env-size: 12/12 (100%), ")
        (tmp_path / "e.parquet").unlink()


def test_progress_in_a_notebook_is_one_display_updated_in_place():
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    nb = nbformat.v4.new_notebook()
    nb.cells.append(
        nbformat.v4.new_code_cell(
            "from perflab.running.progress import Progress\n"
            "with Progress('work', 40, every_s=0) as p:\n"
            "    for _ in range(40):\n"
            "        p.update(1)\n"
        )
    )
    nbclient.NotebookClient(nb, timeout=120, kernel_name="python3").execute()
    outputs = nb.cells[0].outputs
    assert [o.output_type for o in outputs] == ["display_data"], outputs
    shown = outputs[0]["data"]
    assert shown["text/plain"].startswith("work: 40/40 (100%)")
    assert '<progress value="40" max="40"' in shown["text/html"]


def test_show_displays_summary_conditions_and_figure_of_a_real_result():
    import pandas as pd

    from perflab.lab import pagefault
    from perflab.reports import exporters
    from perflab.system import machine

    df = pagefault.run(pages=2, reps=1)
    shown = perflab.show(df)
    assert shown.frame is df
    page = shown._repr_html_()
    assert "perflab pagefault" in page
    assert html_escape(machine.cpu_model()) in page  # the conditions
    table = shown.summary.tables[0]
    assert table.frame.equals(pagefault.summarize(df))
    assert exporters.html_table(table.display, table.title, table.floatfmt) in page  # as --html
    assert page.count('<img alt="figure" src="data:image/png;base64,') == 1
    bare = df.copy()
    bare.attrs = {}  # no metadata: recognised by its columns, as `perflab report` does
    assert "recognised as pagefault by its columns" in perflab.show(bare)._repr_html_()
    foreign = pd.DataFrame({"x": [1.0, 2.0, 3.0]})  # not a result: its rows are still shown
    page = perflab.show(foreign)._repr_html_()
    assert "<img" not in page and f"{len(foreign):,} rows" in page


def html_escape(text: str) -> str:
    import html

    return html.escape(text)
