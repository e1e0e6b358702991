"""`sweep threads -- PROGRAM`: a real pthread program run at each thread count, and the
warnings that say when its measurements cannot be trusted."""

import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from conftest import WORKER, compile_children, own_children

from perflab.cli import cli
from perflab.lab import threads
from perflab.lab.threads import program, trust
from perflab.running import childruns
from perflab.store import results
from perflab.system import machine, pmu

WORK = "4000000"  # iterations per thread: tens of ms of CPU, enough to be preempted


@pytest.fixture(scope="module")
def worker(tmp_path_factory) -> str:
    return compile_children(tmp_path_factory.mktemp("mt"), {"worker": WORKER})["worker"]


def test_cpu_time_grows_with_threads_by_argument_and_by_environment(worker):
    for command, env in (([worker, "{threads}", WORK], None), ([worker, "-", WORK], "NTHREADS")):
        df = program.run(command, [1, 2], repeat=3, oversubscribe=True, threads_env=env,
                         warn=lambda line: None, seed=5)  # fmt: skip
        assert (df["status"] == "ok").all(), df
        cpu = df.groupby("threads")["cpu_ns"].median()
        assert cpu[2] > 1.5 * cpu[1]  # twice the work: CPU time, not wall, so load cannot hide it
        planned, _ = childruns.run_order(2, 3, "random", 5)
        assert df["threads"].tolist() == [(1, 2)[i] for i in planned]  # the seeded order
    assert results.metadata(df)["threads_via"].startswith("NTHREADS=N through env(1)")
    assert own_children() == []


def test_summary_frame_and_plot(worker, tmp_path):
    df = program.run([worker, "{threads}", "1000"], [1, 2], repeat=7, oversubscribe=True,
                     warn=lambda line: None)  # fmt: skip
    meta = results.metadata(df)
    assert meta["experiment"] == "threads-program" and meta["counts"] == [1, 2]
    assert {"floor", "counters", "trust_warnings", "cpu_model"} <= meta.keys()
    assert {"wall_ns", "cpu_ns", "utilisation", "nvcsw", "nivcsw", "disturbed"} <= set(df)
    table = program.summarize(df)
    assert table["threads"].tolist() == [1, 2] and table["runs"].tolist() == [7, 7]
    assert table["speedup"].iloc[0] == 1.0
    assert (table["wall_lo"] <= table["wall_ms"]).all() and (
        table["wall_ms"] <= table["wall_hi"]
    ).all()
    assert (table["efficiency"] == table["speedup"] / table["threads"]).all()
    if not pmu.hardware_counters():
        assert table["ipc"].isna().all()
    program.plot(df, tmp_path / "s.png")
    assert (tmp_path / "s.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_run_of_a_few_milliseconds_is_called_too_short(worker):
    lines: list[str] = []
    df = program.run([worker, "{threads}", "1000"], [1], repeat=3, warn=lines.append)
    short = [w for w in results.metadata(df)["trust_warnings"] if "shorter than the" in w]
    assert short and "give the program more work" in short[0]
    # said once, by the summary the verb prints, not also as a warning (issue 48: twice)
    said = program.summary(df, results.metadata(df)).lines
    assert [line for line in said if "shorter than the" in line] == [f"warning: {short[0]}"]
    assert not [line for line in lines if "shorter than the" in line]


def test_the_floor_follows_tick_spawn_cost_and_jitter():
    idle = np.array([1e6] * 9 + [3e6])  # 1 ms children, one in ten 2 ms late
    floor = trust.derive(4_000_000, idle)
    assert floor.spawn_ns == 1e6 and floor.jitter_ns == pytest.approx(0.2e6)
    assert floor.min_ns == 4_000_000 / trust.TOLERANCE  # the tick dominates here
    noisy = trust.derive(1000, np.array([1e6] * 8 + [9e6] * 2))  # two in ten 8 ms late
    assert noisy.jitter_ns == pytest.approx(8e6) and noisy.min_ns == pytest.approx(8e6 / 0.05)
    assert trust.too_short(floor.min_ns, 0.1, "x", floor, "longer") is None
    line = trust.too_short(floor.min_ns / 10, 0.001, "x", floor, "longer")
    assert "does not make it trustworthy" in line and line.endswith("longer")


def test_disturbed_runs_from_preemptions_and_lost_utilisation():
    cpu = pd.Series([1e9, 1e9, 1e9, 2e9, 2e9])
    wall = pd.Series([1e9, 1e9, 2e9, 1e9, 1e9])
    nivcsw = pd.Series([2, 2, 2, 400, 400])
    group = pd.Series([1, 1, 1, 4, 4])
    why = trust.disturbed(cpu, wall, nivcsw, group, group <= 2)
    assert why.tolist()[:2] == ["", ""]
    assert why[2].startswith("utilisation 0.50")
    assert why[3] == "" and why[4] == ""  # 4 threads on 2 CPUs preempt each other: their own


def test_runs_whose_cpus_others_left_alone_are_not_called_disturbed_for_their_own_threads():
    # Recorded on an idle 2-CPU guest: xz -T2 (its main thread beside two workers preempts
    # them 59 times per CPU-second and makes them wait 7 % of the wall time; other tasks took
    # 1 %), the same beside a CPU hog, a 100 ms run, and xz -T1 beside a hog on the CPU it
    # did not need (others took half of the two CPUs, and it lost nothing)
    wall = pd.Series([430e6, 430e6, 630e6, 100e6, 800e6])
    cpu = pd.Series([808e6, 808e6, 814e6, 180e6, 795e6])
    busy = pd.Series([818e6, 818e6, 1250e6, 200e6, 1595e6])
    others = trust.others_share(busy, cpu, wall, 2)
    assert others[0] == pytest.approx(10 / 860) and others[2] == pytest.approx(436 / 1260)
    assert np.isnan(others[3])  # 100 ms: a 10 ms step of /proc/stat is too coarse to judge
    nivcsw, group = pd.Series([48, 48, 138, 48, 9]), pd.Series([2, 2, 2, 2, 1])
    runq = pd.Series([32e6, 32e6, 438e6, 30e6, 2.7e6])
    why = trust.disturbed(cpu, wall, nivcsw, group, group <= 2, runq, others)
    assert why[0] == why[1] == why[4] == ""
    assert why[2] == (
        "preempted 170/CPU-s, waited for a CPU 70% of the wall time, other tasks took 35% of "
        "its CPUs, utilisation 1.29 vs 1.84"
    )
    assert why[3].startswith("preempted 267/CPU-s, waited")  # not judged: the rules alone
    unknown = trust.disturbed(cpu, wall, nivcsw, group, group <= 2, runq)
    assert unknown[0] == "preempted 59/CPU-s"  # as before others were read


def test_the_busy_time_of_cpus_counts_a_spinning_child():
    cpus = machine.usable_cpus()[-1:]
    before = machine.busy_ns(cpus)
    code = (
        f"import os, time\nos.sched_setaffinity(0, {{{cpus[0]}}})\n"
        "t = time.process_time()\nwhile time.process_time() - t < 0.3: pass"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
    assert machine.busy_ns(cpus) - before >= 0.25e9  # its 0.3 s of CPU, in 10 ms steps
    assert np.isnan(machine.busy_ns([*cpus, 1 << 20])) and np.isnan(machine.busy_ns([]))


@pytest.mark.long
def test_a_run_sharing_its_cpu_with_a_hog_is_flagged(worker):
    cpu = machine.usable_cpus()[-1]
    lines: list[str] = []
    with threads.perturbed([threads.Perturbation.parse(f"cpu@{cpu}")]):
        # 300 million steps of a dependent chain: over 0.4 s of CPU on any machine, so the
        # share of its CPU the hog took is judged
        df = program.run([worker, "{threads}", "300000000"], [1], repeat=3, cpus=[cpu],
                         warn=lines.append)  # fmt: skip
    shown = df[["wall_ns", "cpu_ns", "nivcsw", "others_share", "disturbed_why"]]
    assert df["disturbed"].all(), shown
    assert df["disturbed_why"].str.contains("preempted").all(), shown
    assert (df["others_share"] > 0.2).all(), shown  # the hog had about half of the CPU
    assert df["disturbed_why"].str.contains("other tasks took").all(), shown
    said = program.summary(df, results.metadata(df)).lines
    assert len([line for line in said if "look disturbed" in line]) == 1
    assert not [line for line in lines if "look disturbed" in line]
    assert program.summarize(df)["disturbed"].tolist() == [3]
    assert own_children() == []


@pytest.mark.parametrize(
    "args, message",
    [
        (["--threads", "1,x", "--", "true"], "--threads '1,x'"),
        (["--threads", "0", "--", "true"], "--threads '0'"),
        (["--threads", "1,9999", "--", "true"], "add --oversubscribe"),
        (["--", "no-such-program-22"], "command not found"),
        (["--threads-env", "1X", "--", "true"], "not a variable name"),
        (["--kernel", "spin", "--", "true"], "--kernel is for the built-in kernels"),
        (["--threads", "1"], "--threads needs -- PROGRAM"),
        (["--runq", "proc"], "--runq needs -- PROGRAM"),
        (["--runq", "sometimes", "--", "true"], "'sometimes' is not one of"),
        (["--cpu", "9999", "--", "true"], "9999"),
    ],
)
def test_bad_input_is_one_line(args, message):
    result = CliRunner().invoke(cli, ["sweep", "threads", *args])
    assert result.exit_code != 0
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error:") and message in lines[0], lines
    assert own_children() == []


@pytest.mark.parametrize(
    "args, said, unsaid",
    [
        (["--", "sh", "-c", "exit 3"], "{'exit': 2}, exit codes [3])", "signals"),
        (["--", "sh", "-c", "kill -SEGV $$"], "{'crash': 2}, signals SIGSEGV)", "exit codes"),
        (["--timeout", "0.2", "--", "sleep", "5"], "{'timeout': 2}):", "exit codes"),
    ],
)
def test_a_program_that_never_ends_ok_is_one_line_saying_how_it_ended(args, said, unsaid):
    argv = ["sweep", "threads", "--threads", "1", "--repeat", "2", *args]
    result = CliRunner().invoke(cli, argv)
    last = result.output.strip().splitlines()[-1]
    assert result.exit_code == 1 and last.startswith("Error: no run ended ok (")
    assert said in last and unsaid not in last, last
    assert own_children() == []


def test_cli_json_data_and_plot(worker, tmp_path):
    out, png = tmp_path / "t.parquet", tmp_path / "t.png"
    args = ["sweep", "threads", "--threads", "1,2", "--oversubscribe", "--repeat", "2", "--json",
            "-o", str(out), "--plot", str(png), "--", worker, "{threads}", "1000"]  # fmt: skip
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert [r["threads"] for r in doc["scaling"]] == [1, 2] and doc["status"] == {"ok": 4}
    assert any("shorter than the" in w for w in doc["warnings"])
    saved = results.load(out)
    assert len(saved) == 4 and program.summarize(saved)["runs"].tolist() == [2, 2]
    assert png.stat().st_size > 0
    assert own_children() == []
