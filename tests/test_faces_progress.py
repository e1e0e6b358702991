"""A long API call shows progress without being asked: updated in place in Jupyter, as lines in a
log; progress=False keeps it silent, and a caller's own callbacks replace the display."""

import subprocess
import sys

import pytest

from perflab.lab import env_size

SWEEP = "env_size.sweep(max_size=16, step=4, repeat=2, rt=False{})"  # 5 sizes x 2 = 10 runs


@pytest.mark.long
def test_a_sweep_in_a_notebook_shows_its_progress_unasked():
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    nb = nbformat.v4.new_notebook()
    code = f"from perflab import env_size\ndf = {SWEEP.format('')}\nlen(df)"
    nb.cells.append(nbformat.v4.new_code_cell(code))
    nbclient.NotebookClient(nb, timeout=300, kernel_name="python3").execute()
    outputs = nb.cells[0].outputs
    shown = [o for o in outputs if o.output_type == "display_data"]
    assert len(shown) == 1, outputs  # one display, updated in place, not a line per update
    assert shown[0]["data"]["text/plain"].startswith("env-size: 10/10 (100%), ")
    assert '<progress value="10" max="10"' in shown[0]["data"]["text/html"]
    assert [o["data"]["text/plain"] for o in outputs if o.output_type == "execute_result"] == ["10"]
    assert not [o for o in outputs if o.output_type == "stream" and o.name == "stderr"]


@pytest.mark.parametrize("quiet", [False, True])
def test_a_sweep_logs_progress_lines_to_a_file_unless_told_progress_false(tmp_path, quiet):
    log = tmp_path / "stderr.log"
    code = f"from perflab import env_size\n{SWEEP.format(', progress=False' if quiet else '')}"
    with log.open("w") as err:
        done = subprocess.run([sys.executable, "-c", code], stderr=err, timeout=300)
    assert done.returncode == 0, log.read_text()
    text = log.read_text()
    if quiet:
        assert text == ""
        return
    lines = text.splitlines()
    assert lines[0] == "env-size: 0/10 (0%)"
    assert lines[-1].startswith("env-size: 10/10 (100%), ")
    assert all(line.startswith("env-size: ") for line in lines), lines


def test_a_callers_callbacks_replace_the_display(capfd):
    seen: list[int] = []
    starts: list[tuple[int, int]] = []
    df = env_size.sweep(
        max_size=16,
        step=4,
        repeat=2,
        rt=False,
        on_start=lambda todo, done: starts.append((todo, done)),
        progress=seen.append,
    )
    assert starts == [(10, 0)] and sum(seen) == len(df) == 10
    assert "env-size:" not in capfd.readouterr().err
