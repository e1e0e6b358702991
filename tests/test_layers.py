"""The layers the tree promises: only core/ touches the C core, every experiment module has
one contract (run returns a tidy frame with its metadata), and mypy accepts the package."""

import ast
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import suite_runs
from conftest import long_beyond

import perflab
from perflab.lab import registry
from perflab.store import results
from perflab.system import machine

SRC = Path(perflab.__file__).resolve().parent
C0 = machine.usable_cpus()[0]


CORE = ("perflab.core.bindings", "perflab.core.constants", "perflab.core._core")
# constants loads the core and reads the names --help needs without numpy; bindings wraps it.
BINDINGS = ("core/bindings/", "core/constants.py")


def _imports_core(path: Path) -> list[str]:
    """Names of ffi/lib taken from perflab.core.bindings, constants or _core by one module."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module in CORE:
            found += [a.name for a in node.names if a.name in ("ffi", "lib")]
        elif (
            isinstance(node, ast.Attribute)
            and node.attr in ("ffi", "lib")
            and isinstance(node.value, ast.Name)
            and node.value.id == "bindings"
        ):
            found.append(f"bindings.{node.attr}")
    return found


def test_only_native_imports_ffi_and_lib():
    offenders = {}
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        if rel.startswith(BINDINGS):
            continue
        if names := _imports_core(path):
            offenders[rel] = names
    assert offenders == {}


def test_one_file_speaks_taskstats():
    """One taskstats client: the spawner's query and profile's listener share csrc/taskstats.c."""
    repo = Path(__file__).resolve().parents[1]
    files = [*(repo / "csrc").rglob("*.[ch]"), *(repo / "src").rglob("*.py")]
    speaking = {p.relative_to(repo).as_posix() for p in files
                if any(w in p.read_text() for w in ("NETLINK_GENERIC", "AF_NETLINK"))}  # fmt: skip
    assert speaking == {"csrc/taskstats.c"}


def test_the_walk_would_catch_an_offender(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("from perflab.core.bindings import check, ffi\nx = bindings.lib.perflab_x()\n")
    assert _imports_core(bad) == ["ffi", "bindings.lib"]


# Each experiment whose module has a run() of its own (in-process): its smallest, from the registry.
IN_PROCESS = [e for e in registry.EXPERIMENTS.values() if suite_runs.of(e.name).api is not None]


# A kernel of each shape (a size sweep, a table of events, a table of functions) in the suite,
# every one in CI's long step.
KINDS = {"memcpy", "counters", "trig"}


@pytest.mark.parametrize(
    "experiment",
    long_beyond(IN_PROCESS, {e for e in IN_PROCESS if e.name in KINDS}),
    ids=lambda e: e.name,
)
def test_every_experiment_runs_summarizes_and_plots_through_one_contract(experiment, tmp_path):
    module: Any = experiment.load()
    df = module.run(**suite_runs.of(experiment.name).kwargs(C0))
    assert isinstance(df, pd.DataFrame) and len(df) > 0
    meta = results.metadata(df)
    assert meta["experiment"] == experiment.name and meta["cpu_model"] == machine.cpu_model()
    summary = module.summarize(df)
    assert isinstance(summary, pd.DataFrame) and len(summary) > 0
    module.plot(df, tmp_path / "fig.png")
    assert (tmp_path / "fig.png").stat().st_size > 1000
    back = results.load(results.save(df, tmp_path / "run.parquet"))
    assert results.metadata(back)["experiment"] == meta["experiment"]


LINT_IMPORTS = (
    "import sys; from importlinter.cli import lint_imports_command; "
    "sys.exit(lint_imports_command())"
)


def test_the_layers_import_only_downward_and_hold_no_cycle():
    """import-linter's contracts (pyproject.toml): faces over the read side over the lab over
    running over store over plan over system over analysis over the core, and no import cycle
    inside any package."""
    repo = Path(__file__).resolve().parents[1]
    if not (repo / "src" / "perflab").is_dir():
        pytest.skip("no source checkout beside the tests")
    done = subprocess.run(
        [sys.executable, "-c", LINT_IMPORTS, "--no-cache"],
        cwd=repo,
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PYTHONPATH": str(repo / "src")},
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_top_level_holds_only_the_layers():
    top = {p.name for p in SRC.iterdir() if not p.name.startswith((".", "__pycache__"))}
    layers = {
        "core",
        "running",
        "store",
        "plan",
        "system",
        "analysis",
        "lab",
        "reports",
        "assertions",
        "cli",
    }
    beside = {"__init__.py", "__main__.py", "errors.py", "py.typed", "workloads"}
    assert top == layers | beside


def test_each_class_name_is_used_once_in_the_package():
    """One meaning per name (docs/architecture.md's glossary): no two classes share a name."""
    where: dict[str, list[str]] = {}
    for path in SRC.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                where.setdefault(node.name, []).append(str(path.relative_to(SRC)))
    assert {name: paths for name, paths in where.items() if len(paths) > 1} == {}
    assert {"EnvSizePlan", "ComparePlan", "HelperSpawner", "PrecisionDesign"} <= set(where)


IMPORT_ALL = """
import importlib, pkgutil, sys
import perflab
for m in pkgutil.walk_packages(perflab.__path__, "perflab."):
    if not m.name.endswith(("__main__", ".inline")):  # inline: the Figure a notebook shows
        importlib.import_module(m.name)
print(sorted(m for m in ("pandas", "pyarrow") if m in sys.modules))
"""


def test_no_module_loads_pandas_when_imported():
    """pandas and pyarrow load where a module first uses them (perflab/core/lazy.py): a sweep's
    first runs are queued while they load, and a verb that never needs them never pays."""
    done = subprocess.run([sys.executable, "-c", IMPORT_ALL], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(SRC.parent)})  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["[]"], done.stdout + done.stderr


@pytest.mark.checks
def test_mypy_accepts_the_package():
    """On the checkout's sources with its pyproject settings, wherever perflab is installed
    (mypy run on site-packages would take every installed module for perflab's own)."""
    repo = Path(__file__).resolve().parents[1]
    if not (repo / "src" / "perflab").is_dir():
        pytest.skip("no source checkout beside the tests")
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-error-summary", "src/perflab"],
        cwd=repo,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_architectures_example_experiment_is_the_one_on_main():
    """docs/adding-an-experiment.md shows the files as they are (the measuring module's run)."""
    root = Path(__file__).resolve().parents[1]
    src = root / "src" / "perflab"
    page = (root / "docs" / "adding-an-experiment.md").read_text()
    blocks = [b.split("```", 1)[0] for b in page.split("```python\n")[1:5]]
    package, measure, runs, test = blocks
    assert package == (src / "lab" / "hugepage_fault" / "__init__.py").read_text()
    assert "def run(" in measure
    assert measure in (src / "lab" / "hugepage_fault" / "measure.py").read_text()
    assert runs == (root / "tests" / "suite_runs" / "hugepage_fault.py").read_text()
    assert test == (root / "tests" / "test_hugepage_fault.py").read_text()
    assert '"hugepage_fault",' in (src / "lab" / "registry.py").read_text()
