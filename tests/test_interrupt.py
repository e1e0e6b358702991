"""Every measuring verb records as it goes: stopped by a signal after its first chunk it keeps
that chunk and exits 128 + the signal, and --resume completes the rest, no point twice."""

import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest
from conftest import WORKER, compile_children, wait_for

from perflab.cli import VERBS, cli
from perflab.engine import results
from perflab.lab import cswitch, memcpy
from perflab.lab.registry import EXPERIMENTS
from perflab.lab.threads import core_vs_ht
from perflab.system import machine

CPU = machine.usable_cpus()[-1]
THREADS = min(2, len(machine.usable_cpus()))


@dataclass(frozen=True)
class Case:
    """A verb's arguments for a run of a few seconds ({worker}: the tests' pthread program),
    the columns that name one of its points, and how many rows a complete run has."""

    args: tuple[str, ...]
    key: tuple[str, ...]
    rows: int


def _core_vs_ht_rows(repeat: int) -> int:
    """Three thread runs per placement and repeat, one row for each placement not here."""
    places = core_vs_ht.placements()
    return sum(3 * repeat if p.available else 1 for p in places)


# Each verb with arguments that make it last a few seconds, its first chunk on disk long before
# the last: in-process verbs flush their first unit at once, child runs their first C batch
# (512 runs) once a second has passed.
CASES = {
    "env-size": Case(("sweep", "env-size", "--max", "0", "--repeat", "1500", "--no-rt", "--",
                      "{worker}", "0", "1000", "2"), ("env_size", "rep"), 1500),
    "link-order": Case(("sweep", "link-order", "--permutations", "2", "--repeat", "1500",
                        "--no-rt"), ("perm", "rep"), 3000),
    "compare": Case(("compare", "{worker} 0 1000 2", "{worker} 0 2000 2", "--setups", "4",
                     "--repeat", "200", "--no-rt"), ("setup", "rep", "side"), 1600),
    "threads-program": Case(("sweep", "threads", "--threads", "1,2", "--repeat", "100",
                             "--oversubscribe", "--", "{worker}", "{threads}", "1000", "20"),
                            ("threads", "rep"), 200),
    "memcpy": Case(("sweep", "memcpy", "--max", "64M", "--trials", "20", "--no-mlock"),
                   ("size",), len(memcpy.sizes(64 << 20))),
    "pagefault": Case(("run", "pagefault", "--pages", "1024", "--reps", "800"),
                      ("rep", "condition"), 2400),
    "trig": Case(("run", "trig", "--cold", "1000", "--repeat", "10"), ("mode", "rep", "position"),
                 (1000 + 10) * 3),
    "cswitch": Case(("run", "cswitch", "5000", "--reps", "8", "--no-rt"),
                    ("placement", "realtime", "rep"), len(cswitch.placements()) * 8),
    "syscalls": Case(("run", "syscalls", "--trials", "300000"), ("call", "rep"), 5 * 300000),
    "core-vs-ht": Case(("run", "core-vs-ht", "-l", "20", "--repeat", "30"),
                       ("placement", "rep", "threads", "thread"), _core_vs_ht_rows(30)),
    "threads": Case(("sweep", "threads", "--max", str(THREADS), "-l", "40", "--repeat", "40"),
                    ("threads", "rep", "thread"), 40 * THREADS * (THREADS + 1) // 2),
    "fauxplat": Case(("run", "fauxplat", "-l", "20", "--repeat", "30", "--cpu", str(CPU),
                      "--perturb", f"cpu@{CPU}"), ("rep", "condition"), 60),
}  # fmt: skip

# Experiments whose verb makes one measurement: nothing between two chunks to stop at.
ONE_MEASUREMENT = {
    "counters": "without a command it lists the events; with one it counts a single run of "
    "it and exits with its status, as perf stat does",
    "clocks": "one C loop per clock, well under a second at the default --samples; its "
    "verdicts need every clock at once (a --cluster campaign is journaled by host)",
    "profile": "one profiled run of COMMAND, its threads sampled while it runs",
    "contention": "one run of the built-in workload per (kind, threads), through the Python "
    "API only (contention.run; `profile --workload` writes a profile file)",
}
# Verbs that measure nothing: they read results or describe the machine.
NOT_MEASURING = {
    "machine": "describes the machine (CPU, topology, clocks, counters) in well under a second",
    "report": "reads a result saved with -o",
    "diff": "reads two results saved with -o",
}


def test_every_experiment_and_verb_is_covered():
    """A new experiment or verb must say how it is stopped, here, before it ships."""
    assert set(CASES) | set(ONE_MEASUREMENT) == set(EXPERIMENTS)
    assert not set(CASES) & set(ONE_MEASUREMENT)
    verbs = {e.verb for e in EXPERIMENTS.values() if e.verb is not None}
    assert verbs | set(NOT_MEASURING) == set(VERBS)


@pytest.fixture(scope="module")
def worker(tmp_path_factory) -> str:
    return compile_children(tmp_path_factory.mktemp("worker"), {"worker": WORKER})["worker"]


def _argv(case: Case, worker: str, *record: str) -> list[str]:
    """perflab VERB... -o FILE (or --resume FILE) ARGS, the worker's path in place."""
    words = [a.replace("{worker}", worker) for a in case.args]
    at = 1 if words[0] not in ("sweep", "run") else 2
    return [sys.executable, "-m", "perflab", *words[:at], *record, *words[at:]]


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
    stop takes, engine/journal's), and env-size by both: every verb and every signal at half
    the cost of every pair."""
    turn = (signal.SIGINT, signal.SIGTERM)
    pairs = [(name, turn[i % 2]) for i, name in enumerate(sorted(CASES))]
    pairs += [("env-size", s) for s in turn if ("env-size", s) not in pairs]
    return [pytest.param(n, s, id=f"{n}-{s.name}") for n, s in pairs]


@pytest.mark.parametrize(("name", "sig"), _stops())
def test_a_stopped_verb_keeps_its_chunks_and_resumes(name, sig, worker, tmp_path):
    case = CASES[name]
    out = tmp_path / f"{name}.parquet"
    proc = subprocess.Popen(_argv(case, worker, "-o", str(out)), stdout=subprocess.PIPE,
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
    assert len(first) and _within(first, kept, case.key)
    assert len(kept) < case.rows

    done = subprocess.run(_argv(case, worker, "--resume", str(out)), capture_output=True,
                          text=True, timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stderr
    df = results.load(out)
    assert results.metadata(df)["complete"] is True
    assert not df.duplicated(list(case.key)).any()
    assert len(df) == case.rows
    assert _within(kept, df, case.key)
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
