"""The run-queue wait of all a child's threads, read by the engine before it reaps the child:
taskstats' per-process sum where perflab may, /proc readings otherwise."""

import itertools
import json

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from conftest import WORKER, compile_children, long_beyond, own_children

from perflab.cli import cli
from perflab.errors import PerflabError
from perflab.lab import threads
from perflab.lab.threads import program, trust
from perflab.running import spawn
from perflab.system import machine

WORK = "20000000"  # tens of ms of CPU: many /proc readings, and a hog's share is plain
RUNS = 5
CPU = machine.usable_cpus()[-1]


@pytest.fixture(scope="module")
def early(tmp_path_factory) -> str:
    return compile_children(tmp_path_factory.mktemp("rq"), {"early": WORKER})["early"]


def _runs(argv: list[str], mode: str, hog: bool) -> pd.DataFrame:
    options = spawn.SpawnOptions(cpus=(CPU,), runq=mode, timeout=120.0)
    hogs = [threads.Perturbation("cpu", CPU)] if hog else []
    with threads.perturbed(hogs):
        out = spawn.run_batch([argv], np.zeros(RUNS, np.int64), options=options)
    df = spawn.tidy(out, runq=True)
    assert (df["status"] == "ok").all(), df
    return df


def _source(mode: str, early: str) -> str:
    """The source this machine gives for mode, or skip saying why the exact one is missing."""
    out = spawn.run_batch([(early, "1", "1000", "0")], np.zeros(1, np.int64),
                          options=spawn.SpawnOptions(runq=mode))  # fmt: skip
    if mode == "auto" and spawn.RUNQ_SOURCES[int(out["runq_source"][0])] != "taskstats":
        pytest.skip(spawn.runq_note(out))  # e.g. not root: taskstats needs CAP_NET_ADMIN
    return {"auto": "taskstats", "proc": "proc"}[mode]


# Each source once and each end of the thread counts once in the suite (main alone; two
# threads gone before it); every pair in the long step.
@pytest.mark.parametrize(("mode", "workers"), long_beyond(itertools.product(["auto", "proc"],
                                                                            [0, 1, 2]),
                                                          {("auto", 0), ("proc", 2)}))  # fmt: skip
def test_a_hog_on_its_cpu_lengthens_the_wait_of_threads_gone_before_main(early, mode, workers):
    source = _source(mode, early)
    argv = [early, str(workers), WORK, "50"]
    quiet, hogged = _runs(argv, mode, hog=False), _runs(argv, mode, hog=True)
    for df in (quiet, hogged):
        assert (df["runq_source"] == source).all()
        # the counted threads can hold most of the CPU time: with workers, main's own share is
        # small, so a sum of the leader alone (all /proc has of a zombie) could not reach it.
        # A reader starved by other load misses threads (cover 0.12 seen as a user on one
        # busy CPU): one run of each set shows the threads were counted, and none counts more
        # than rusage's CPU time (to within the two clocks' rounding: 1.00004 seen).
        cover = df["runq_cover"]
        shown = df[["utime_ns", "stime_ns", "runq_cover"]]
        assert cover.max() > 0.5 and (cover < 1.01).all(), shown
    # An equal hog pinned on the child's CPU takes about half of it, whatever else runs here:
    # the child waits a sizeable share of its own CPU time. Quiet runs are no reference: other
    # load can make them wait longer than hogged ones (1.93 s seen as a user on one CPU).
    cpu = hogged["utime_ns"] + hogged["stime_ns"]
    assert (hogged["runq_ns"] > 0).all()
    assert hogged["runq_ns"].median() > 0.25 * (cpu * hogged["runq_cover"]).median()
    assert own_children() == []


def test_unasked_the_engine_reads_nothing(early):
    out = spawn.run_batch([(early, "1", "1000", "0")], np.zeros(2, np.int64))
    assert (out["runq_source"] == 0).all() and (out["runq_ns"] == 0).all()
    assert not set(spawn.RUNQ_COLUMNS) & set(spawn.tidy(out).columns)
    with pytest.raises(PerflabError, match="runq must be one of"):
        spawn.SpawnOptions(runq="always")


def test_a_sweep_flags_the_runs_that_waited_for_their_cpu(early):
    lines: list[str] = []
    with threads.perturbed([threads.Perturbation("cpu", CPU)]):
        df = program.run([early, "{threads}", WORK, "0"], [1], repeat=3, cpus=[CPU],
                         warn=lines.append)  # fmt: skip
    assert df["runq_ns"].notna().all() and df["runq_source"].isin(["taskstats", "proc"]).all()
    assert df["disturbed_why"].str.contains("waited for a CPU").all(), df["disturbed_why"]
    assert program.summarize(df)["runq_ms"].iloc[0] > 0
    off = program.run([early, "{threads}", "1000", "0"], [1], repeat=1, runq="off",
                      warn=lines.append)  # fmt: skip
    assert "runq_ns" not in off and np.isnan(program.summarize(off)["runq_ms"].iloc[0])


def test_run_queue_share_judges_only_runs_whose_threads_had_a_cpu_each():
    wall = pd.Series([1e9] * 4)
    cpu = pd.Series([1e9] * 4)
    runq = pd.Series([0.01e9, 0.5e9, 0.5e9, np.nan])
    alone = pd.Series([True, True, False, True])
    why = trust.disturbed(cpu, wall, pd.Series([0] * 4), pd.Series([1] * 4), alone, runq)
    assert why.tolist() == ["", "waited for a CPU 50% of the wall time", "", ""]


def test_the_cli_shows_the_wait_and_says_how_it_was_read(early):
    args = ["sweep", "threads", "--threads", "1", "--repeat", "2", "--runq", "proc", "--json",
            "--", early, "{threads}", "1000", "0"]  # fmt: skip
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    # a quiet CPU may give the child no wait at all: a number, where --runq off gives none
    assert doc["runq"].startswith("/proc readings") and doc["scaling"][0]["runq_ms"] >= 0
    assert own_children() == []
