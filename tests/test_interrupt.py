"""Every measuring verb records as it goes: stopped by a signal after its first chunk it keeps
that chunk and exits 128 + the signal, and --resume completes the rest, no point twice."""

import signal
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import suite_runs
from conftest import WORKER, compile_children, wait_for

from perflab.cli import VERBS, cli
from perflab.lab.registry import EXPERIMENTS, Experiment
from perflab.store import results
from perflab.system import machine

CPU = machine.usable_cpus()[-1]
THREADS = min(2, len(machine.usable_cpus()))


# Each experiment that records chunk by chunk, with the registry's run of a few seconds.
CASES = {e.name: e for e in EXPERIMENTS.values() if suite_runs.of(e.name).lasting}
# Verbs that measure nothing: they read results or describe the machine.
NOT_MEASURING = {
    "machine": "describes the machine (CPU, topology, clocks, counters) in well under a second",
    "report": "reads a result saved with -o",
    "diff": "reads two results saved with -o",
    # each commit's runs are written whole as it ends; tests/test_history.py kills a track
    "track": "keeps every commit it finished in its store; --untracked-only completes the rest",
    "history": "keeps each comparison it made in the store; the next history reuses them",
}


def test_every_experiment_and_verb_is_covered():
    """A new experiment or verb must say how it is stopped, in the registry, before it ships."""
    for e in EXPERIMENTS.values():
        assert bool(suite_runs.of(e.name).lasting) != bool(suite_runs.of(e.name).one_measurement), (
            e.name
        )
        assert not suite_runs.of(e.name).lasting or e.rows, e.name
    verbs = {e.verb for e in EXPERIMENTS.values() if e.verb is not None}
    assert verbs | set(NOT_MEASURING) == set(VERBS)


@pytest.fixture(scope="module")
def worker(tmp_path_factory) -> str:
    return compile_children(tmp_path_factory.mktemp("worker"), {"worker": WORKER})["worker"]


def _argv(e: Experiment, worker: str, *record: str) -> list[str]:
    """perflab VERB... -o FILE (or --resume FILE) ARGS, the worker's path in place."""
    args = suite_runs.of(e.name).argv("lasting", worker=worker, cpu=str(CPU), ncpus=str(THREADS))
    assert e.verb is not None
    return [sys.executable, "-m", "perflab", *e.verb.split(), *record, *args]


def _first_chunk(out: Path, proc: subprocess.Popen) -> pd.DataFrame:
    """The rows of the first chunk the run flushed, read while the run goes on."""
    parts = out.with_name(out.name + ".parts")
    found: list[pd.DataFrame] = []

    def flushed() -> bool:
        assert proc.poll() is None, f"the run ended first: give it more work {proc.communicate()}"
        chunks = sorted(parts.glob("chunk-*.parquet"))
        if chunks:
            found.append(pd.read_parquet(chunks[0]))
        return bool(found)

    wait_for(flushed, "a first chunk")
    return found[0]


def _within(rows: pd.DataFrame, others: pd.DataFrame, key: tuple[str, ...]) -> bool:
    """Every point of rows is one of others' (a placement not here has a NaN thread)."""
    mine = pd.MultiIndex.from_frame(rows[list(key)])
    return bool(mine.isin(pd.MultiIndex.from_frame(others[list(key)])).all())


def _stops() -> list:
    """Each verb stopped by one signal, SIGINT and SIGTERM in turn (both take the one path a
    stop takes, store/journal's), and env-size by both: every verb and every signal at half
    the cost of every pair."""
    turn = (signal.SIGINT, signal.SIGTERM)
    pairs = [(name, turn[i % 2]) for i, name in enumerate(sorted(CASES))]
    pairs += [("env-size", s) for s in turn if ("env-size", s) not in pairs]
    return [pytest.param(n, s, id=f"{n}-{s.name}") for n, s in pairs]


@pytest.mark.long
@pytest.mark.parametrize(("name", "sig"), _stops())
def test_a_stopped_verb_keeps_its_chunks_and_resumes(name, sig, worker, tmp_path):
    e = CASES[name]
    out = tmp_path / f"{name}.parquet"
    proc = subprocess.Popen(_argv(e, worker, "-o", str(out)), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        first = _first_chunk(out, proc)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=300)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == 128 + sig, err
    assert f"--resume {out}" in err and "Traceback" not in err
    kept = results.load(out)
    assert results.metadata(kept)["complete"] is False
    planned = results.metadata(kept)["identity"]["plan"]["runs"]  # recorded before the stop
    assert len(first) and _within(first, kept, e.rows)
    assert len(kept) < planned

    done = subprocess.run(_argv(e, worker, "--resume", str(out)), capture_output=True,
                          text=True, timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stderr
    df = results.load(out)
    assert results.metadata(df)["complete"] is True
    assert not df.duplicated(list(e.rows)).any()
    assert len(df) == planned
    assert _within(kept, df, e.rows)
    assert not out.with_name(out.name + ".parts").exists()


def test_a_resume_with_other_parameters_is_refused_in_one_line(runner, tmp_path):
    out = tmp_path / "pf.parquet"
    args = ["run", "pagefault", "--pages", "2", "--reps", "3"]
    assert runner.invoke(cli, [*args, "-o", str(out)]).exit_code == 0
    result = runner.invoke(cli, [*args[:-1], "4", "--resume", str(out)])
    assert result.exit_code == 1
    assert result.output.strip().splitlines() == [
        f"Error: {out}: refusing to resume with different parameters (reps: recorded 3, asked 4)"
    ]
    assert len(results.load(out)) == 9
