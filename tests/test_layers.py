"""The layers the tree promises: only _native touches the C core, every experiment module has
one contract (run returns a tidy frame with its metadata), and mypy accepts the package."""

import ast
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import perflab
from perflab import (
    contention,
    counters,
    cswitch,
    machine,
    memcpy,
    pagefault,
    results,
    syscalls,
    trig,
)
from perflab.threads import fauxplat_sec, ht_pairs, thread_count

SRC = Path(perflab.__file__).resolve().parent
C0 = machine.usable_cpus()[0]


CORE = ("perflab._native", "perflab._constants", "perflab._core")
# _constants loads the core and reads the names --help needs without numpy; _native wraps it.
BINDINGS = ("_native.py", "_constants.py")


def _imports_core(path: Path) -> list[str]:
    """Names of ffi/lib taken from perflab._native, _constants or _core by one module."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module in CORE:
            found += [a.name for a in node.names if a.name in ("ffi", "lib")]
        elif (
            isinstance(node, ast.Attribute)
            and node.attr in ("ffi", "lib")
            and isinstance(node.value, ast.Name)
            and node.value.id == "_native"
        ):
            found.append(f"_native.{node.attr}")
    return found


def test_only_native_imports_ffi_and_lib():
    offenders = {}
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        if rel in BINDINGS:
            continue
        if names := _imports_core(path):
            offenders[rel] = names
    assert offenders == {}


def test_the_walk_would_catch_an_offender(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("from perflab._native import check, ffi\nx = _native.lib.perflab_x()\n")
    assert _imports_core(bad) == ["ffi", "_native.lib"]


# Each experiment module with the smallest run() that still measures something real.
TINY = {
    memcpy: {"max_bytes": 256, "trials": 1, "lock": False},
    trig: {"call_texts": ["sin(1.0)"], "repeat": 2},
    cswitch: {"n": 20, "reps": 1, "realtime": False, "cpus": [C0]},
    syscalls: {"calls": ["getpid"], "trials": 25},
    pagefault: {"pages": 2, "reps": 1},
    counters: {},
    ht_pairs: {"loops": 1, "cpus": [C0]},
    thread_count: {"max_threads": 1, "loops": 1, "repeat": 1},
    fauxplat_sec: {"loops": 1, "repeat": 1, "cpu": C0, "perturb": []},
    contention: {"threads": [2], "kinds": ["mutex"], "iterations": 200, "sample_hz": None},
}


@pytest.mark.parametrize("module", list(TINY), ids=lambda m: m.__name__.rsplit(".", 1)[-1])
def test_every_experiment_runs_summarizes_and_plots_through_one_contract(module, tmp_path):
    df = module.run(**TINY[module])
    assert isinstance(df, pd.DataFrame) and len(df) > 0
    meta = results.metadata(df)
    assert meta["experiment"] and meta["cpu_model"] == machine.cpu_model()
    summary = module.summarize(df)
    assert isinstance(summary, pd.DataFrame) and len(summary) > 0
    module.plot(df, tmp_path / "fig.png")
    assert (tmp_path / "fig.png").stat().st_size > 1000
    back = results.load(results.save(df, tmp_path / "run.parquet"))
    assert results.metadata(back)["experiment"] == meta["experiment"]


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
