"""Text from a result file reaches an exported page as text (issue 47): metadata holding HTML,
a table's cell separator, backticks, a link or terminal escapes cannot add markup to --md or
--html, end a table cell, or reach the page raw."""

import re

import pytest
from click.testing import CliRunner

from perflab.cli import cli
from perflab.store import results

HOSTILE = "<script>alert(1)</script> | `x` [link](http://example.invalid) \x1b[2J\x1b]0;t\x07"


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    """A real result whose recorded host name and whose path hold markup."""
    where = tmp_path_factory.mktemp("escaping")
    out = where / "result.parquet"
    argv = ["run", "pagefault", "--pages", "1", "--reps", "2", "-o", str(out)]
    done = CliRunner().invoke(cli, argv)
    assert done.exit_code == 0, done.output
    df = results.load(out)
    results.attach(df, {**results.metadata(df), "hostname": HOSTILE})
    evil = where / "a`b<i>.parquet"
    results.save(df, evil)
    return evil


def _cells(line: str) -> list[str]:
    """A Markdown table row's cells: split at the pipes no backslash escapes."""
    return re.split(r"(?<!\\)\|", line.strip().strip("|"))


def test_markdown_shows_the_text_and_adds_no_markup(hostile):
    res = CliRunner().invoke(cli, ["report", str(hostile), "--md", "-"])
    assert res.exit_code == 0, res.output
    md = res.stdout
    assert "<script>" not in md and "[link](" not in md  # the path's <i> is in a code span
    assert "\x1b" not in md and "\x07" not in md and "\\x1b" in md
    host = next(line for line in md.splitlines() if line.startswith("| host |"))
    assert len(_cells(host)) == 2, host  # the host's | did not open a third cell
    # the path's backtick cannot close its code span: a fence of two
    assert md.splitlines()[0].endswith(f"(``{hostile}``)"), md.splitlines()[0]


def test_html_escapes_every_value(hostile):
    res = CliRunner().invoke(cli, ["report", str(hostile), "--html", "-"])
    assert res.exit_code == 0, res.output
    page = res.stdout
    assert "<script>" not in page and "<i>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "\x1b" not in page and "\x07" not in page  # an ESC spelled out, as on a terminal
    assert "\\x1b[2J" in page


def test_a_figure_s_text_is_escaped_before_matplotlib_draws_it(tmp_path, recwarn):
    """ESC and BEL in a host label would be drawn as missing glyphs and named, raw, in
    matplotlib's warning on the terminal: the figure says \\x1b and \\x07 instead."""
    from perflab.analysis import plot

    fig, ax = plot.figure()
    ax.plot([0, 1], [0, 1], label="host\x1b[2J\x07")
    ax.legend()
    plot.save(fig, tmp_path / "f.png", title="hosts: evil\x1b]0;title\x07")
    texts = [t.get_text() for t in fig.findobj(lambda a: hasattr(a, "get_text"))]
    assert "hosts: evil\\x1b]0;title\\x07" in texts and "host\\x1b[2J\\x07" in texts
    assert not [w for w in recwarn if "Glyph" in str(w.message)]
    assert (tmp_path / "f.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize("args", [["--json", "--md", "-"], ["--md", "-", "--html", "-"]])
def test_two_outputs_for_stdout_are_refused(hostile, args):
    res = CliRunner().invoke(cli, ["report", str(hostile), *args])
    assert res.exit_code == 2 and "would both write to stdout" in res.output
    assert not res.stdout.strip() or res.stdout.startswith("Usage")
