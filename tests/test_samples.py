"""docs/samples.py: markers parsed, blocks filled with a real run's output under a line that
names the machine, commands other than perflab's refused; and no developer's path in the docs."""

import datetime
import importlib.util
import re
from pathlib import Path

import pytest

import perflab

ROOT = Path(__file__).resolve().parents[1]
DEVELOPER_PATHS = ("/work/", "/root/", "/home/")


def _load():
    spec = importlib.util.spec_from_file_location("samples", ROOT / "docs" / "samples.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


samples = _load()

PAGE = """# a page

<!-- sample: perflab --version -->
```
an old output
```

Prose between the samples stays.

<!-- sample: perflab --version
setup: perflab --help
input: pyproject.toml
sample: perflab report pyproject.toml
-->
```
```
"""


def _blocks(text: str) -> list[list[str]]:
    return [b.strip("\n").splitlines() for b in re.findall(r"```\n(.*?)```", text, re.S)]


def test_markers_are_parsed_with_their_commands_inputs_and_images(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(PAGE.replace("input: pyproject.toml", "input: pyproject.toml\nimage: r.png"))
    first, second = samples.parse(page)
    assert (first.line, first.index, first.commands) == (3, 0, ["perflab --version"])
    assert second.commands == ["perflab --version", "perflab report pyproject.toml"]
    assert second.setups == ["perflab --help"]
    assert (second.inputs, second.images, second.kept) == (["pyproject.toml"], ["r.png"], "")


def test_a_run_fills_each_block_with_the_real_output_under_its_machine_line(tmp_path, capsys):
    page = tmp_path / "page.md"
    page.write_text(PAGE)
    assert samples.main([str(page)]) == 0
    text = page.read_text()
    assert "Prose between the samples stays." in text and "an old output" not in text
    first, second = _blocks(text)
    machine = first[0]
    assert re.fullmatch(
        rf"# perflab {re.escape(perflab.__version__)}( \(\w+(\+dirty)?\))? · .+ · "
        r"\S+ [\d.]+ GHz, step \d+ ticks · \d+-v?CPU .+, load [\d.]+ · \d{4}-\d\d-\d\d, [\d.]+ s",
        machine,
    ), machine
    assert first[1:] == ["$ perflab --version", f"perflab, version {perflab.__version__}"]
    # The setup ran unseen; the input was copied in and the error names it by its own name.
    assert second[1:3] == first[1:3]
    assert second[3] == "$ perflab report pyproject.toml"
    assert second[4].startswith("Error: pyproject.toml") and second[-1] == "[exit 1]"
    assert not any("--help" in line or str(tmp_path) in line for line in second)
    assert "page.md:10: perflab --version ; perflab report pyproject.toml ..." in (
        capsys.readouterr().out
    )
    assert samples.main([str(page), "--list", "--only", "report"]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert len(listed) == 1 and re.fullmatch(
        r".*page\.md:\d+: perflab --version ; perflab report \S+  \[[\d.]+ s\]", listed[0]
    )


@pytest.mark.parametrize(
    ("marker", "error"),
    [
        ("<!-- sample: ls -l -->\n```\n```\n", "refusing 'ls -l'"),
        ("<!-- sample: python setup.py -->\n```\n```\n", "refusing 'python setup.py'"),
        ("<!-- sample: perflab machine\nsetup: cc -c a.c\ninput: no/such.c\n-->\n```\n```\n",
         "input no/such.c is not a file"),
        ("<!-- sample: perflab machine -->\nprose\n```\n```\n", "right before a ``` block"),
        ("<!-- sample: perflab machine\n```\n```\n", "never closed"),
        ("<!-- sample: perflab machine\nplot: x.png -->\n```\n```\n", "expected 'KEY: VALUE'"),
        ("<!-- sample\nsetup: perflab --help -->\n```\n```\n", "at least one 'sample: COMMAND'"),
        ("<!-- sample: perflab machine\nresult: My Run -->\n```\n```\n", "not 'My Run'"),
        ("<!-- sample: perflab machine\nresult: a -->\n```\n```\n"
         "<!-- sample: perflab --version\nresult: a -->\n```\n```\n", "result a is "),
    ],
)  # fmt: skip
def test_a_marker_that_cannot_run_is_refused_in_one_line_before_anything_runs(
    tmp_path, capsys, marker, error
):
    page = tmp_path / "page.md"
    page.write_text(PAGE + marker)
    assert samples.main([str(page)]) == 2
    said = capsys.readouterr()
    assert said.out == "" and error in said.err and len(said.err.strip().splitlines()) == 1
    assert page.read_text() == PAGE + marker


def test_an_image_the_commands_did_not_write_fails_that_sample_only(tmp_path, capsys):
    page = tmp_path / "page.md"
    page.write_text(PAGE.replace("input: pyproject.toml", "input: pyproject.toml\nimage: r.png"))
    assert samples.main([str(page)]) == 1
    assert "the commands wrote no r.png" in capsys.readouterr().err
    first, second = _blocks(page.read_text())
    assert first[1] == "$ perflab --version" and second == []


MACHINE_LINE = re.compile(r"# perflab .+ · \d{4}-\d\d-\d\d, [\d.]+ s")


def _result(name: str) -> Path:
    """Where today's result NAME of this CPU is written (samples.RESULTS set by the test)."""
    return samples.result_path(name, datetime.date.today())


def test_a_result_marker_also_writes_the_whole_output_under_its_commands_and_machine_line(
    tmp_path, monkeypatch, capsys
):
    monkeypatch.setattr(samples, "RESULTS", tmp_path)
    page = tmp_path / "page.md"
    page.write_text("<!-- sample: perflab machine\nhead: 2\nresult: machine\n-->\n```\n```\n")
    assert samples.main([str(page)]) == 0
    (shown,) = _blocks(page.read_text())
    written = _result("machine")
    assert f"{written.name}" in capsys.readouterr().out
    lines = written.read_text().splitlines()
    assert lines[0] == f"# result: machine · perflab machine (the sample at {page}:1)"
    assert lines[1] == shown[0] and MACHINE_LINE.fullmatch(lines[1]), lines[1]
    # The block is cut after two lines of output; the result keeps them all.
    assert shown[1:] == [*lines[2:5], "..."]
    assert lines[2] == "$ perflab machine" and len(lines) > 10
    assert any(line.startswith("topology") for line in lines)
    assert [p.name for p in tmp_path.glob("*.txt")] == [written.name]


def test_result_option_writes_one_command_s_result_and_a_rerun_that_day_replaces_it(
    tmp_path, monkeypatch, capsys
):
    monkeypatch.setattr(samples, "RESULTS", tmp_path)
    written = _result("startup")
    assert re.fullmatch(r"\d{4}-\d\d-\d\d-[a-z0-9]+(-[a-z0-9]+)*-startup\.txt", written.name)
    yesterday = tmp_path / written.name.replace(
        datetime.date.today().isoformat(),
        (datetime.date.today() - datetime.timedelta(days=1)).isoformat(),
    )
    yesterday.write_text("# result: startup · perflab --help\nyesterday's figures\n")
    assert samples.main(["--result", "startup", "--", "perflab", "--version"]) == 0
    assert capsys.readouterr().out.startswith("--result startup: perflab --version ... ")
    first = written.read_text().splitlines()
    assert first[0] == "# result: startup · perflab --version"
    assert MACHINE_LINE.fullmatch(first[1]) and first[1].startswith(
        f"# perflab {perflab.__version__}"
    )
    assert first[2:] == ["$ perflab --version", f"perflab, version {perflab.__version__}"]
    # The same day's rerun replaces its own file (through a rename: no temporary left beside);
    # another day's is another file, left as it was.
    assert samples.main(["--result", "startup", "--", "perflab", "machine"]) == 0
    second = written.read_text().splitlines()
    assert second[0] == "# result: startup · perflab machine" and second[2] == "$ perflab machine"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([written.name, yesterday.name])
    assert yesterday.read_text() == "# result: startup · perflab --help\nyesterday's figures\n"


@pytest.mark.long
def test_a_result_names_the_workload_digest_its_result_file_and_output_name(tmp_path, monkeypatch):
    from perflab.system import compiler

    monkeypatch.setattr(samples, "RESULTS", tmp_path)
    sweep = "perflab sweep env-size --aslr off --max 128 --step 64 --repeat 2 -o e.parquet"
    assert samples.main(["--result", "env", "--", *sweep.split()]) == 0
    lines = _result("env").read_text().splitlines()
    digest = compiler.source_digest(compiler.WORKLOADS / "mytkowicz.c")[:12]
    assert re.fullmatch(
        rf"# workload: mytkowicz\.c, source {digest}, build [0-9a-f]{{12}} "
        r"\(the metadata of e\.parquet\)",
        lines[2],
    ), lines[2]
    assert lines[3] == f"$ {sweep}" and any(line.endswith(f"; source {digest}") for line in lines)


@pytest.mark.parametrize(
    ("args", "status", "error"),
    [
        (["--result", "x", "--", "ls", "-l"], 2, "refusing 'ls -l'"),
        (["--result", "x", "--", "python", "setup.py"], 2, "refusing 'python setup.py'"),
        (["--result", "a/b", "--", "perflab", "machine"], 2, "not 'a/b'"),
        (["--result", "x"], 2, "--result NAME takes one `-- COMMAND ...`"),
        (["--", "perflab", "machine"], 2, "needs --result NAME"),
        (["--result", "x", "--", "perflab", "report", "no.parquet"], 1, "no result written"),
    ],
)
def test_a_result_that_cannot_be_made_writes_no_file(
    tmp_path, monkeypatch, capsys, args, status, error
):
    monkeypatch.setattr(samples, "RESULTS", tmp_path)
    assert samples.main(args) == status
    said = capsys.readouterr()
    assert error in said.err and len(said.err.strip().splitlines()) == 1
    assert list(tmp_path.iterdir()) == []


def test_a_result_file_not_written_there_that_day_is_never_replaced(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(samples, "RESULTS", tmp_path)
    by_hand = _result("startup")
    by_hand.write_text("# figures measured by hand\n")
    assert samples.main(["--result", "startup", "--", "perflab", "--version"]) == 2
    said = capsys.readouterr()
    assert said.out == "" and "is not this day's result 'startup'" in said.err
    assert by_hand.read_text() == "# figures measured by hand\n"


def test_output_shows_relative_paths_home_as_tilde_and_each_progress_bars_last_line(tmp_path):
    raw = (
        f"env-size: 0/20 (0%)\nenv-size: 10/20 (50%), 9.0/s, ETA 1s\ndata: {tmp_path}/s.parquet\n"
        f"env-size: 20/20 (100%), 9.5/s, 2s\nbuilt in {Path.home()}/.cache/perflab\n"
        f"rootdir: {tmp_path}\nsource {ROOT}/benchmarks/heldlock.c\n"
    )
    assert samples.clean(raw, tmp_path).splitlines() == [
        "data: s.parquet",
        "env-size: 20/20 (100%), 9.5/s, 2s",
        "built in ~/.cache/perflab",
        "rootdir: .",
        "source benchmarks/heldlock.c",
    ]


def test_every_marker_in_the_docs_runs_perflab_and_a_kept_block_says_where_it_was_made():
    found = [s for path in samples.documents() for s in samples.parse(path)]
    assert found
    for s in found:
        if s.kept:
            assert samples.block(s)[0].startswith("# "), f"{s.where}: kept without its origin"


def test_no_developer_path_in_the_readme_or_the_docs():
    for path in samples.documents():
        for n, line in enumerate(path.read_text().splitlines(), 1):
            assert not any(p in line for p in DEVELOPER_PATHS), f"{path.name}:{n}: {line}"


LAYOUT_LINE = re.compile(r"^layout \d+:0x[0-9a-f]+: the loop .*; source ([0-9a-f]{12})$")


def test_every_sample_of_a_built_in_loop_names_the_source_that_built_it():
    """A figure of a loop perflab no longer builds fails here: each regenerated sample's layout
    line names the source digest of the loop it ran (compiler.source_digest), which must be
    the current one's; a kept sample names the commit that made it in its first line."""
    from perflab.system import compiler

    current = {
        name: compiler.source_digest(compiler.WORKLOADS / name)[:12]
        for name in ("mytkowicz.c", "stacksplit.c")
    }
    named = []
    for page in samples.documents():
        for sample in samples.parse(page):
            body = samples.block(sample)
            if sample.kept:
                continue
            for line in body:
                if m := LAYOUT_LINE.match(line):
                    split = any("--workload split" in c for c in sample.commands)
                    want = current["stacksplit.c" if split else "mytkowicz.c"]
                    assert m.group(1) == want, f"{sample.where}: {line}"
                    named.append(sample.where)
    assert any(w.startswith("README.md:") for w in named), named
