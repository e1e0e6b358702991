"""The fake spawner the journal, resume, lanes and interrupt tests run on reads the batches a
sweep packs as the C core does, and is chosen, and stopped, the way the real ones are."""

import signal

import numpy as np
from fakespawner import FakeSpawner, unpack

from perflab.running import childruns, spawn
from perflab.running.interrupt import Interrupt


def test_a_packed_batch_reads_back_as_asked():
    options = spawn.ParallelOptions(cpus=(0, 1), dirs=("", "/tmp"), iterations=3, timeout=2.5)
    programs = [("/bin/true", "x"), ("/bin/echo",)]
    request, nruns, stdio = spawn.request(programs, np.array([0, 1, 1]), np.array([3, -1, 5]),
                                          "B", {"K": "v"}, options)  # fmt: skip
    b = unpack(request)
    assert nruns == 3 and len(stdio) == 3 and b.parallel and b.cpus == (0, 1)
    assert b.programs == (("/bin/true", "x"), ("/bin/echo",)) and b.dirs[1] == "/tmp"
    assert b.prog.tolist() == [0, 1, 1] and b.sizes.tolist() == [3, -1, 5]
    assert b.env == ("K=v",) and b.var == "B" and b.iterations == 3
    assert b.timeout_ns == 2_500_000_000


def test_its_records_are_tidy_rows_and_each_lane_names_its_cpu():
    fake = FakeSpawner(lambda argv: 5_000 if argv[1:] == ("slow",) else 1_000)
    options = spawn.ParallelOptions(cpus=(3, 5), iterations=2)
    with spawn.chosen(fake):
        assert spawn.spawner() is fake
        runs = spawn.run_batch([("/bin/true",), ("/bin/true", "slow")], np.array([0, 1, 0, 1]),
                               np.arange(4), options=options)  # fmt: skip
    assert spawn.spawner() is not fake  # the block chose it, no longer
    assert runs["cpu"].tolist() == [3, 5, 3, 5] and runs["env_size"].tolist() == [0, 1, 2, 3]
    df = spawn.tidy(runs).assign(**spawn.iteration_columns(runs, spawn.tidy(runs)["ticks"]))
    assert (df["status"] == "ok").all() and (df["iterations"] == 2).all()
    assert ((df["ticks"] >= 1_000) & (df["ticks"] < 1_100)).tolist() == [True, False] * 2
    assert (df["utime_ns"] + df["stime_ns"] <= df["wall_ns"]).all()
    assert (df["ticks"] < df["outer_ticks"]).all()


def test_a_signal_after_a_run_keeps_the_runs_made_before_it():
    fake = FakeSpawner(signal_after=(5, signal.SIGINT))
    with spawn.chosen(fake), Interrupt() as stop, fake.pipeline() as pipe:
        for _ in range(2):
            pipe.submit(*spawn.request([("/bin/true",)], np.zeros(4)))
        first, second = pipe.collect(), pipe.collect()
    assert stop.hit and (len(first), len(second)) == (4, 1)


def test_a_sweep_on_it_records_every_planned_run_once():
    runs = childruns.Runs(programs=[("/bin/true",)], prog=np.zeros(40, np.int64),
                          labels={"rep": np.arange(40)}, key=("rep",))  # fmt: skip
    plan = childruns.Controls(rt=False, cpus=(0,))
    with spawn.chosen(FakeSpawner()) as fake:
        df = childruns.measure_sequential(runs, plan, {}, chunk_runs=16)
    assert sorted(df["rep"]) == list(range(40)) and (df["status"] == "ok").all()
    assert [b.prog.size for b in fake.batches] == [1, 16, 16, 8]  # the preflight, then 40


def test_programs_it_is_told_to_leave_run_for_real():
    fake = FakeSpawner(real=lambda path: path == "/bin/false")
    with spawn.chosen(fake):
        ran = spawn.run_batch([("/bin/false",)], np.zeros(2))
    assert (ran["status"] == spawn.STATUS_NAMES.index("exit")).all() and not fake.batches
