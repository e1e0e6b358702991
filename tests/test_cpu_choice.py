"""The CPU perflab measures on when none is asked (the quietest, said and recorded), and the one
rule that flags runs other tasks disturbed, on recorded readings and on real ones."""

import contextlib
import json
import os
import subprocess
import sys
import time
import warnings
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

from perflab import errors
from perflab.analysis import disturbance
from perflab.cli import cli
from perflab.errors import PerflabNote, PerflabWarning
from perflab.lab.env_size.plan import EnvSizePlan
from perflab.running import cpuchoice, lanes
from perflab.system import cpuload, machine, settings

STEP = 1 / 15  # one USER_HZ step of a 150 ms window, as a real reading has it


def task(pid: int, comm: str, cpu: int, share: float, policy: int = 0, prio: int = 0):
    return cpuload.Task(pid, pid, comm, cpu, policy, prio, share)


def load(busy: dict[int, float], *tasks: cpuload.Task) -> cpuload.Load:
    return cpuload.Load(0.15, busy, tasks, STEP)


# Recorded on the 2-CPU guest of issue 48: a real-time hog on CPU 1, the kernel's own FIFO 99
# migration threads on both (they ran for microseconds), a shell on CPU 0.
HOG_ON_1 = load(
    {0: STEP, 1: 0.95},  # one 10 ms step on CPU 0: within what the reading resolves
    task(1234, "hog", 1, 0.95, policy=1, prio=50),
    task(18, "migration/0", 0, 1e-5, policy=1, prio=99),
    task(21, "migration/1", 1, 1e-5, policy=1, prio=99),
    task(900, "bash", 0, 0.01),
)


def test_a_real_time_task_busy_on_the_last_cpu_sends_the_sweep_to_another_and_is_named():
    choice = cpuchoice.choose([0, 1], HOG_ON_1)
    assert choice.cpus == (0,)
    assert choice.line.startswith("cpu 0: cpu 1 runs pid 1234 (hog) SCHED_FIFO 50 (95% busy)")
    assert choice.busy == {0: "", 1: "cpu 1 runs pid 1234 (hog) SCHED_FIFO 50 (95% busy)"}


def test_quiet_cpus_tie_within_one_step_and_the_last_wins():
    quiet = load({0: 0.0, 1: STEP * 0.9, 2: 0.0}, task(18, "migration/0", 0, 1e-5, 1, 99))
    choice = cpuchoice.choose([0, 1, 2], quiet)
    assert choice.cpus == (2,) and "quiet" in choice.line and "0-2" in choice.line
    assert set(choice.busy.values()) == {""}
    # over half a step on the last CPU is still quiet: it wins, as the line says
    choice = cpuchoice.choose([0, 1], load({0: 0.0, 1: STEP * 0.6}))
    assert choice.cpus == (1,) and "the last" in choice.line


def test_an_ordinary_hog_sends_the_sweep_to_the_quieter_cpu():
    reading = load({0: 0.2, 1: 1.0}, task(77, "make", 1, 0.98), task(78, "cc1", 0, 0.2))
    assert cpuchoice.choose([0, 1], reading).cpus == (0,)
    # a real-time task outranks a busier ordinary one: it cannot be preempted by the child
    rt = load({0: 1.0, 1: 0.6}, task(77, "make", 0, 0.99), task(5, "rt", 1, 0.6, 1, 10))
    choice = cpuchoice.choose([0, 1], rt)
    assert choice.cpus == (0,)
    assert choice.line.startswith("every CPU perflab may use is busy over 150 ms: ")
    assert "cpu 0 runs pid 77 (make) SCHED_OTHER (100% busy)" in choice.line
    assert "cpu 1 runs pid 5 (rt) SCHED_FIFO 10 (60% busy)" in choice.line
    assert choice.line.endswith("measuring on cpu 0, the least busy (--cpu chooses)")


def test_real_time_on_every_cpu_leaves_the_least_busy_and_lanes_take_the_quietest():
    both = load({0: 0.9, 1: 0.5}, task(5, "a", 0, 0.9, 2, 1), task(6, "b", 1, 0.5, 1, 1))
    assert cpuchoice.choose([0, 1], both).cpus == (1,)
    four = load({0: 0.0, 1: 0.9, 2: 0.0, 3: 0.3}, task(9, "hog", 1, 0.9))
    assert cpuchoice.choose([0, 1, 2, 3], four, count=2).cpus == (0, 2)


def test_one_eligible_cpu_is_taken_and_said_busy_with_what():
    quiet = cpuchoice.choose([0], load({0: 0.0, 1: 1.0}, task(9, "hog", 1, 1.0)))
    assert quiet.cpus == (0,)
    assert quiet.line == "cpu 0: the only CPU perflab may use (its affinity mask)"
    busy = cpuchoice.choose([1], load({0: 0.0, 1: 1.0}, task(9, "hog", 1, 1.0, 1, 3)))
    assert busy.cpus == (1,)
    assert "busy over 150 ms: cpu 1 runs pid 9 (hog) SCHED_FIFO 3" in busy.line
    assert "taskset" in busy.line


def test_a_task_name_reaches_the_terminal_escaped():
    evil = load({0: 0.0, 1: 1.0}, task(9, "\x1b[2Jx\n", 1, 1.0))
    line = cpuchoice.choose([0, 1], evil).line
    assert "\x1b" not in line and "\n" not in line and "\\x1b[2Jx\\n" in line


def test_cpus_asked_for_warn_only_of_a_busy_real_time_task():
    said = cpuchoice.asked_warning([1], [0, 1], HOG_ON_1)
    assert said is not None
    assert said.startswith("cpu 1 runs pid 1234 (hog) SCHED_FIFO 50 (95% busy) over 150 ms")
    assert said.endswith("choose another CPU with --cpu (cpu 0 was quiet), or stop that task")
    assert cpuchoice.asked_warning([0], [0, 1], HOG_ON_1) is None
    ordinary = load({0: 0.0, 1: 1.0}, task(9, "make", 1, 1.0))
    assert cpuchoice.asked_warning([1], [0, 1], ordinary) is None


def test_the_choice_is_recorded_but_is_no_parameter_a_resume_must_repeat():
    plan = EnvSizePlan(cpus=(0,), cpu_choice="cpu 0: cpu 1 runs pid 1234 (hog) SCHED_FIFO 50")
    assert "cpu_choice" not in plan.params()
    assert plan.params() == EnvSizePlan(cpus=(0,)).params()
    assert plan.conditions()["cpu_choice"] == plan.cpu_choice
    assert "cpu_choice" not in EnvSizePlan(cpus=(0,)).conditions()


def test_a_resume_measures_on_the_cpus_its_file_recorded(tmp_path):
    first = machine.usable_cpus()[0]
    out = tmp_path / "sweep.parquet"
    parts = tmp_path / "sweep.parquet.parts"
    parts.mkdir()
    (parts / "params.json").write_text(json.dumps({"params": {"cpus": [first]}}))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        plan = lanes.with_cpus(EnvSizePlan(), None, out)
    assert plan.cpus == (first,)
    assert plan.cpu_choice == f"cpu {first}: where {out} was measured"
    # said when the runs start, after every check of the input: not while planning
    assert not [w for w in caught if w.category is PerflabNote]
    said: list[str] = []
    with errors.warnings_as_lines(said.append):
        for _ in range(2):  # compare's rounds measure one plan again and again: said once
            cpuchoice.say(plan.cpu_choice)
    assert said == [f"perflab: {plan.cpu_choice}"]
    with warnings.catch_warnings(record=True) as caught:  # the API keeps it in the metadata
        warnings.simplefilter("always")
        cpuchoice.say(plan.cpu_choice + " again")
    assert not [w for w in caught if w.category is PerflabNote]


def test_a_reading_sees_a_spinning_process_on_its_cpu():
    cpu = machine.usable_cpus()[-1]
    with spinning(cpu) as hog:
        reading = cpuload.read(0.15)
    assert set(reading.busy) >= set(machine.online_cpus())
    assert all(0 <= b <= 1 for b in reading.busy.values())
    assert reading.busy[cpu] > 0
    mine = [t for t in reading.tasks if t.pid == hog.pid]
    assert mine and mine[0].cpu == cpu and mine[0].policy == 0 and mine[0].share > 0
    said = mine[0].describe()
    assert said.startswith(f"pid {hog.pid} (") and said.endswith(") SCHED_OTHER")
    assert os.getpid() not in {t.pid for t in reading.tasks}  # perflab leaves itself out


def test_a_busy_cpu_sends_the_default_sweep_to_another_or_says_every_one_is_busy():
    usable = machine.usable_cpus()
    if len(usable) < 2:
        pytest.skip("one usable CPU: nothing to choose between")
    cpu, other = usable[-1], usable[-2]  # the hog where perflab measured before it looked
    with spinning(cpu) as hog:
        choice = cpuchoice.pick()
    assert choice.busy[cpu]  # the hog's CPU was seen busy
    if not choice.busy[other]:  # a quieter CPU: perflab went there and said why
        assert cpu not in choice.cpus
        assert choice.line.startswith(f"cpu {choice.cpus[0]}: ")
        assert f"pid {hog.pid} (" in choice.line
    else:  # others keep every CPU busy: perflab says so, with what, and how to choose
        assert choice.line.startswith("every CPU perflab may use is busy")
        assert f"cpu {cpu} " in choice.line and "(--cpu chooses)" in choice.line


def test_a_cpu_asked_for_where_a_real_time_task_spins_is_warned_and_kept():
    if not machine.realtime_allowed():
        pytest.skip("real-time priority is refused here")
    if Path("/proc/sys/kernel/sched_rt_runtime_us").read_text().strip() == "-1":
        pytest.skip("real-time throttling is off: a spinning FIFO task could hold its CPU")
    cpu = machine.usable_cpus()[-1]
    bandwidth = settings.rt_bandwidth()
    period_s = bandwidth[1] / 1e9 if bandwidth else 1.0
    # looks one after another for a throttle period and more: one of them falls where the
    # kernel holds the hog off its CPU, and must still see it (CI once missed it there)
    looks = []
    with spinning(cpu, realtime=True) as hog:
        end = time.monotonic() + 1.2 * period_s
        while time.monotonic() < end:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                choice = cpuchoice.check_asked([cpu])
            looks.append([str(w.message) for w in caught if w.category is PerflabWarning])
            assert choice.cpus == (cpu,)
    for said in looks:
        assert len(said) == 1 and f"pid {hog.pid} (" in said[0] and "SCHED_FIFO 1" in said[0]
        assert "--cpu" in said[0]


def test_the_cli_says_its_choice_in_one_line_and_records_it(runner, tmp_path):
    out = tmp_path / "s.parquet"
    res = runner.invoke(cli, ["sweep", "env-size", "--max", "0", "--repeat", "1", "-o", str(out)])
    assert res.exit_code == 0, res.output
    # its one note; a user's run also warns that real-time priority was refused
    lines = res.stderr.splitlines()
    said = [line for line in lines if line.startswith("perflab: ") and "warning:" not in line]
    assert len(said) == 1 and "cpu " in said[0]
    from perflab.store import results

    meta = results.metadata(results.load(out))
    assert said[0] == f"perflab: {meta['cpu_choice']}"
    assert meta["cpus"][0] in machine.usable_cpus()
    assert meta["disturbed"]["of"] == 1
    shown = runner.invoke(cli, ["report", str(out)])
    assert shown.exit_code == 0, shown.output
    assert f"  CPU chosen: {meta['cpu_choice']}" in shown.stdout.splitlines()


# A spinning process for the real tests: pinned, ended at the block's end, and by itself
# after 20 s and with this process (PR_SET_PDEATHSIG) whatever happens here.
SPIN = r"""
import ctypes, os, signal, sys, time
ctypes.CDLL(None).prctl(1, signal.SIGKILL)
os.sched_setaffinity(0, {int(sys.argv[1])})
if sys.argv[2] == "rt":
    os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
print("ready", flush=True)
end = time.monotonic() + 20
while (now := time.monotonic()) < end:
    while time.monotonic() - now < 0.095:
        pass
    time.sleep(0.005)
"""


@contextlib.contextmanager
def spinning(cpu: int, realtime: bool = False) -> Iterator[subprocess.Popen]:
    hog = subprocess.Popen([sys.executable, "-c", SPIN, str(cpu), "rt" if realtime else "-"],
                           stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert hog.stdout is not None and hog.stdout.readline().strip() == "ready"
        yield hog
    finally:
        hog.kill()
        hog.wait()
        if hog.stdout is not None:
            hog.stdout.close()


# --- the disturbance rule on recorded frames --------------------------------------------


def child_frame(values: list[float], nivcsw: list[int] | None = None) -> pd.DataFrame:
    """Child runs of one env size: 1 ms of wall, all of it on the CPU, as a quiet run has."""
    n = len(values)
    return pd.DataFrame({
        "env_size": [64] * n, "rep": range(n), "ticks": values, "wall_ns": [1_000_000] * n,
        "utime_ns": [700_000] * n, "stime_ns": [300_000] * n, "nivcsw": nivcsw or [0] * n,
    })  # fmt: skip


def test_a_run_far_above_its_point_drags_the_mean_and_is_flagged():
    # issue 48: per-size means of 200 M ticks beside medians of 1 M
    values = [1.00e6, 1.01e6, 0.99e6, 1.02e6, 1.00e6, 0.98e6, 1.01e6, 200e6]
    frame = child_frame(values)
    why = disturbance.child_runs(frame, ["env_size"], "ticks", 1)
    assert why.tolist()[:7] == [""] * 7
    assert why[7] == "far above its point: 199.0x the median"
    said = disturbance.verdict(why, frame["ticks"], disturbance.points(frame, ["env_size"]))
    assert said["runs"] == 1 and said["of"] == 8 and said["kinds"] == {"far above": 1}
    assert said["worst_point"] == "64" and said["worst_mean_over_median"] > 20
    assert said["line"].startswith("1 of 8 runs look disturbed by other tasks (far above: 1); ")
    assert "point 64's mean is 25.7x its median" in said["line"]
    # one run of eight: the median stands, said as a note; half of them slow: a warning
    assert said["medians_hold"] and "so the medians stand" in said["line"]
    assert disturbance.lines({"disturbed": said}) == [f"note: {said['line']}"]
    frame = child_frame([1e6] * 4 + [1.5e6] * 4, nivcsw=[0, 0, 0, 0, 2, 2, 2, 2])
    why = disturbance.child_runs(frame, ["env_size"], "ticks", 1)
    said = disturbance.verdict(why, frame["ticks"], disturbance.points(frame, ["env_size"]))
    assert said["runs"] == 4 and said["medians_moved"] == 1 and not said["medians_hold"]
    assert disturbance.lines({"disturbed": said}) == [f"warning: {said['line']}"]


def test_a_tight_point_and_a_small_one_are_not_called_disturbed():
    tight = child_frame([1.000e6] * 7 + [1.03e6])  # beyond its fence, within 5 % of its median
    assert (disturbance.child_runs(tight, ["env_size"], "ticks", 1) == "").all()
    few = child_frame([1e6, 1e6, 1e6, 50e6])  # four runs give no quartiles to speak of
    assert (disturbance.child_runs(few, ["env_size"], "ticks", 1) == "").all()
    quiet = disturbance.verdict(pd.Series([""] * 8))
    assert quiet["runs"] == 0 and quiet["line"] is None and disturbance.lines({}) == []


def test_a_preempted_child_run_is_flagged_by_its_involuntary_switches():
    frame = child_frame([1e6] * 6, nivcsw=[0, 0, 0, 0, 0, 2])
    why = disturbance.child_runs(frame, ["env_size"], "ticks", 1)
    assert why.tolist() == [""] * 5 + ["preempted 2000/CPU-s"]


def test_one_worker_thread_at_half_a_cpu_is_flagged_as_core_vs_ht_flags_it():
    # Recorded: sweep threads at 1 thread under load kept its CPU 52 % busy; core-vs-ht's two
    # threads on one CPU each had half of it, as they should; two cores each had one.
    frame = pd.DataFrame({
        "threads": [1, 2, 2, 2, 2], "rep": [0] * 5, "thread": [0, 0, 1, 0, 1],
        "placement": ["a", "same", "same", "cores", "cores"], "cpu": [1, 0, 0, 0, 1],
        "cpu_ns": [52e6, 49e6, 50e6, 99e6, 98e6], "wall_ns": [100e6] * 5, "status": ["ok"] * 5,
    })  # fmt: skip
    why = disturbance.worker_threads(frame, ["placement", "rep", "threads"], 2)
    assert why.tolist() == ["utilisation 0.52 vs 1.00", "", "", "", ""]
    said = disturbance.worker_verdict(frame, ["placement", "rep", "threads"], 2, {"rt": False})
    assert said["runs"] == 1 and said["of"] == 3
    assert "thread 0" not in said["line"] and "--rt (or --nice -20)" in said["line"]
    per_run = disturbance.per_run(why, frame, ["placement", "rep", "threads"])
    assert per_run["a/0/1"] == "thread 0: utilisation 0.52 vs 1.00"
    hogs = disturbance.worker_verdict(frame, ["placement", "rep", "threads"], 2,
                                      {"perturb": ["cpu@1"]})  # fmt: skip
    assert "--perturb" in hogs["line"]
