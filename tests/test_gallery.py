"""The reproduction gallery runs: every experiment script in --quick mode, every notebook.
Two minutes of demos, not the suite's: CI runs them as its own step (`pytest -m gallery`)."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import perflab
from perflab.store import results

ROOT = Path(__file__).resolve().parents[1]
CANNOT_RUN_HERE = 77  # experiments/_common.py: a tool the script needs is missing here
pytestmark = pytest.mark.gallery
SCRIPTS = sorted(p for p in (ROOT / "experiments").glob("*.py") if not p.name.startswith("_"))
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
# The directory perflab is imported from (src/ in a checkout, site-packages once installed):
# absolute, because scripts and kernels run from a temporary directory.
IMPORT_ROOT = str(Path(perflab.__file__).resolve().parents[1])
# Guards against a hung run only: quick scripts take 2-15 s here, more on a loaded machine.
SCRIPT_TIMEOUT_S = 600
CELL_TIMEOUT_S = 300


def _env() -> dict[str, str]:
    path = os.environ.get("PYTHONPATH", "")
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (IMPORT_ROOT, path) if p)}


def test_the_gallery_is_complete():
    names = {p.stem for p in SCRIPTS}
    assert {
        "mytkowicz_env_size",
        "mytkowicz_link_order",
        "djibee_env_size",
        "djibee_core_vs_ht",
        "djibee_fauxplat",
        "rubini_trig",
        "rubini_cswitch",
        "rubini_memcpy",
        "torpey_clocks",
        "fileguard_syscalls",
        "easyperf_threads",
        "easyperf_profile",
    } <= names
    readme = (ROOT / "experiments" / "README.md").read_text()
    for script in SCRIPTS:
        assert script.name in readme, f"{script.name} missing from experiments/README.md"
    assert len(NOTEBOOKS) >= 4


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.stem)
def test_experiment_runs_quick(script: Path, tmp_path: Path):
    proc = subprocess.run(
        [sys.executable, str(script), "--quick", "--out", str(tmp_path)],
        cwd=tmp_path,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=SCRIPT_TIMEOUT_S,
        check=False,
    )
    if proc.returncode == CANNOT_RUN_HERE:
        pytest.skip(proc.stderr.strip())
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "article" in proc.stdout and "here" in proc.stdout  # the side-by-side table
    data = sorted(tmp_path.glob(f"{script.stem}*.parquet"))
    figures = sorted(tmp_path.glob(f"{script.stem}*.png"))
    assert data and figures, f"no data or figure in {sorted(tmp_path.iterdir())}"
    for path in data:
        df = results.load(path)
        meta = results.metadata(df)
        assert len(df) > 0
        assert meta["quick"] is True and meta["gallery"].startswith(script.stem)
        assert "tsc_hz" in meta or "hostname" in meta or "cpu_model" in meta
    for path in figures:
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_experiment_refuses_bad_arguments(tmp_path: Path):
    proc = subprocess.run(
        [sys.executable, str(SCRIPTS[0]), "--nosuch"],
        cwd=tmp_path,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=SCRIPT_TIMEOUT_S,
        check=False,
    )
    assert proc.returncode == 2 and "--nosuch" in proc.stderr
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs_top_to_bottom(notebook: Path, tmp_path: Path, monkeypatch):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    nb = nbformat.read(notebook, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(not c.outputs and c.execution_count is None for c in code), "strip the outputs"
    monkeypatch.setenv("PYTHONPATH", _env()["PYTHONPATH"])
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # the notebooks' mkdtemp() work directories
    before = _tree()
    client = nbclient.NotebookClient(
        nb,
        timeout=CELL_TIMEOUT_S,
        kernel_name="python3",
        resources={"metadata": {"path": str(tmp_path)}},
    )
    client.execute()
    errors = [o for c in nb.cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors
    assert _tree() == before, "a notebook wrote into the repository"
    for cell in code:
        _check_shown(cell)


# What a cell tagged so must show once executed with the inline backend, as a user sees it.
SHOWN = {
    "figure": lambda data: "image/png" in data,
    "result": lambda data: "data:image/png;base64," in data.get("text/html", ""),
    "progress": lambda data: re.match(r"\S+: [\d,]+/[\d,]+ \(100%\)", data.get("text/plain", "")),
}


def _check_shown(cell) -> None:
    """Every tagged cell showed its figure, rich result or finished progress line; every cell
    that draws is tagged (so a figure that vanishes cannot go unnoticed)."""
    tags = set(cell.metadata.get("tags", []))
    first = cell.source.splitlines()[0]
    if re.search(r"\.plot\(|plot\.figure\(|perflab\.show\(", cell.source):
        assert tags & {"figure", "result"}, f"cell {first!r} draws but is not tagged 'figure'"
    outputs = [o.get("data", {}) for o in cell.outputs if "data" in o]
    for tag in tags & set(SHOWN):
        assert any(SHOWN[tag](data) for data in outputs), f"cell {first!r} shows no {tag}"


def _tree() -> set[Path]:
    """Files of the checkout outside build products: what a notebook must leave alone."""
    skip = {".git", "build", ".pytest_cache", ".ruff_cache", "__pycache__"}
    return {
        p
        for p in ROOT.rglob("*")
        if not skip.intersection(p.relative_to(ROOT).parts) and "out" not in p.parts
    }
