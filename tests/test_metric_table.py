"""One table of metrics (plan/metrics.py): docs/metrics.md's table is its rows (`python
tests/test_metric_table.py` writes them), and every face that takes a --metric refuses one in
the same line, naming what it takes."""

import re
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from perflab.assertions import claims
from perflab.cli import cli
from perflab.errors import PerflabError
from perflab.plan import metrics
from perflab.running import timing

PAGE = Path(__file__).resolve().parents[1] / "docs" / "metrics.md"
HEADER = ["| metric | what it reads | where it can be had | exact? |", "|---|---|---|---|"]
ROWS = re.compile(r"^\| metric \| what it reads .*?\n(?:\|.*\n)+", re.M)


def rows() -> list[str]:
    """The page's table, from the metric table."""
    return [*HEADER, *(f"| `{m.name}` | {m.measured} | {m.where} | {m.exact or 'no'} |"
                       for m in metrics.METRICS.values())]  # fmt: skip


def test_the_pages_table_is_the_metric_table():
    found = ROWS.search(PAGE.read_text())
    assert found, f"{PAGE}: no metric table"
    assert found.group(0).splitlines() == rows(), "run python tests/test_metric_table.py"


def test_each_face_takes_what_the_table_says():
    assert metrics.taken("compare") == tuple(metrics.METRICS)
    assert metrics.taken("assertions") == ("time", "instructions-exact")
    for face in ("diff", "history"):  # they read runs, and valgrind counts apart from them
        assert "instructions-exact" not in metrics.taken(face)
    assert set(metrics.FACES) == {face for m in metrics.METRICS.values() for face in m.refused} | {
        "compare", "report", "bisect"}  # fmt: skip


def _refused(face: str, tmp_path: Path, name: str) -> str:
    """The line `face` refuses --metric NAME with, before anything is built, run or read."""
    missing = str(tmp_path / "none.parquet")
    argv = {
        "compare": ["compare", "true", "true"],
        "report": ["report", str(Path(__file__).parent / "data" / "env-size-xeon-amx.parquet")],
        "bisect": ["bisect", "HEAD~1", "HEAD", "--repo", str(tmp_path), "--build", "true",
                   "--run", "true"],
        "history": ["history", "--store", str(tmp_path), "--no-confirm"],
        "diff": ["diff", missing, missing],
    }  # fmt: skip
    if face == "assertions":
        with pytest.raises(PerflabError) as got:
            claims.check_faster(timing.spin(100), timing.spin(200), metric=name)
        return str(got.value)
    res = CliRunner().invoke(cli, [*argv[face], "--metric", name])
    assert res.exit_code == 1, res.output
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    return lines[0].removeprefix("Error: ")


@pytest.mark.parametrize("face", list(metrics.FACES))
def test_every_face_refuses_a_metric_in_the_one_line(face, tmp_path):
    said = _refused(face, tmp_path, "joules")
    assert said.endswith(metrics.refusal(face, "joules", "not a metric"))  # report names the file
    offered = metrics.available(face) if metrics.FACES[face].here else metrics.taken(face)
    assert said.endswith(", ".join(offered))
    for name in metrics.METRICS:
        why = metrics.METRICS[name].refused.get(face)
        if why:
            assert _refused(face, tmp_path, name).endswith(metrics.refusal(face, name, why))


def test_the_table_loads_no_numpy_or_pandas():
    code = ("import sys; from perflab.plan import metrics; metrics.listed('compare'); "
            "print(sorted(m for m in ('numpy', 'pandas') if m in sys.modules))")  # fmt: skip
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)  # fmt: skip
    assert done.stdout.strip() == "[]"


if __name__ == "__main__":
    text = PAGE.read_text()
    found = ROWS.search(text)
    assert found, f"{PAGE}: no metric table"
    PAGE.write_text(text[: found.start()] + "\n".join(rows()) + "\n" + text[found.end() :])
