"""docs/samples.py: markers parsed, blocks filled with a real run's output under a line that
names the machine, commands other than perflab's refused; and no developer's path in the docs."""

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
