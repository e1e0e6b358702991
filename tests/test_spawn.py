"""Exact child runs: real children compiled here, with known answers."""

import errno
import mmap
import os
import resource
import shutil
import subprocess
import threading
from pathlib import Path

import numpy as np
import pandas as pd
import psutil
import pytest
from conftest import compile_children, wait_for

from perflab.core import bindings, constants
from perflab.core.bindings import lib
from perflab.errors import PerflabError
from perflab.lab import env_size
from perflab.lab.env_size import measure
from perflab.running import childruns, spawn
from perflab.store import results
from perflab.system import compiler, machine, settings, supervisor

WORKLOADS = compiler.WORKLOADS
CAP_IPC_LOCK = 14  # linux/capability.h
CAP_SYS_NICE = 23


def has_capability(bit: int) -> bool:
    """Whether this process holds a capability in its effective set (root may not)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("CapEff:"):
            return bool(int(line.split()[1], 16) >> bit & 1)
    return False


REPORT = r"""
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
extern char **environ;
int main(void)
{
    int local = 0;
    size_t bytes = 0, n = 0;
    for (char **e = environ; *e; e++, n++)
        bytes += strlen(*e) + 1;
    printf("stack %p\ncpu %d\npolicy %d\nn %zu\nbytes %zu\n", (void *)&local, sched_getcpu(),
           sched_getscheduler(0), n, bytes);
    for (char **e = environ; *e; e++)
        printf("env %s\n", *e);
    return local;
}
"""

# Where its spawner (its parent: the helper, one thread while it runs a sequential batch) may
# run while the child does, and at what real-time priority: first from execve on, then once
# the child has slept.
PARENT = r"""
#include <sched.h>
#include <stdio.h>
#include <unistd.h>
int main(void)
{
    char path[64], line[256], cpus[256];
    struct sched_param sp = {0}, first = {0};
    FILE *f;
    sched_getparam(getppid(), &first);
    usleep(1000);
    printf("at_exec %d\n", first.sched_priority);
    snprintf(path, sizeof path, "/proc/%d/status", (int)getppid());
    f = fopen(path, "r");
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "Cpus_allowed_list: %255s", cpus) == 1)
            printf("cpus %s\n", cpus);
    sched_getparam(getppid(), &sp);
    printf("priority %d\n", sp.sched_priority);
    return 0;
}
"""

# Spins for argv[2] ms by its clock, then appends when it started and ended to argv[1].
STAMP = r"""
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
static long long now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000LL + t.tv_nsec;
}
int main(int argc, char **argv)
{
    long long start = now(), until = start + atoll(argv[2]) * 1000000LL;
    char line[64];
    int fd = open(argv[1], O_WRONLY | O_APPEND | O_CREAT, 0644);
    while (now() < until)
        ;
    write(fd, line, snprintf(line, sizeof line, "%lld %lld\n", start, now()));
    return 0;
}
"""

CHILDREN = {
    "report": REPORT,
    "stamp": STAMP,
    "parent": PARENT,
    "spin": "int main(void) { for (;;) ; }\n",
    "crash": "#include <signal.h>\nint main(void) { raise(SIGSEGV); return 0; }\n",
    "hang": "#include <unistd.h>\nint main(void) { for (;;) pause(); }\n",
    "exit3": "int main(void) { return 3; }\n",
    "noprobe": "int main(void) { return 0; }\n",
    "garbage": "#include <unistd.h>\n"
    'int main(void) { write(1021, "hello, parent", 13); return 0; }\n',
    "twice": '#include "perflab_probe.h"\nint main(void) { for (int i = 0; i < 2; i++) '
    "{ PERFLAB_PROBE_BEGIN(); PERFLAB_PROBE_END(); } return 0; }\n",
    "many": '#include "perflab_probe.h"\nint main(void) { for (int i = 0; i < 4; i++) '
    "{ PERFLAB_PROBE_BEGIN(); PERFLAB_PROBE_END(); } return 0; }\n",
    "shut": "#include <sys/socket.h>\nint main(void) { shutdown(1021, SHUT_RDWR); return 0; }\n",
    "probe": '#include "perflab_probe.h"\nint main(void) { PERFLAB_PROBE_BEGIN(); '
    "PERFLAB_PROBE_END(); return 0; }\n",
    # The repeat loop: iteration i spins i + 1 times as long as the first, and the program
    # prints how many iterations it ran, inside perflab or not.
    "loop": '#include <stdio.h>\n#include "perflab_probe.h"\nvolatile long sink;\n'
    "int main(void) { int i = 0; PERFLAB_PROBE_LOOP() { "
    "for (long j = 0; j < 100000L * (i + 1); j++) sink += j; i++; } "
    'printf("iterations %d\\n", i); return 0; }\n',
}


@pytest.fixture(scope="module")
def children(tmp_path_factory) -> dict[str, str]:
    """Each helper workload compiled once for the module."""
    return compile_children(tmp_path_factory.mktemp("children"), CHILDREN, "0")


def report(children, tmp_path, env=None, name="report", **opts) -> tuple[np.record, dict]:
    """Run a reporting child with its stdout in a file; parse what it saw."""
    out = tmp_path / "out.txt"
    with open(out, "w") as f:
        rec = spawn.run([children[name]], env, spawn.SpawnOptions(stdout=f.fileno(), **opts))
    seen = {"env": []}
    for line in out.read_text().splitlines():
        key, _, value = line.partition(" ")
        if key == "env":
            seen["env"].append(value)
        else:
            seen[key] = value
    return rec, seen


def test_child_sees_exactly_the_environment(children, tmp_path):
    rec, seen = report(children, tmp_path, {"A": "aaaa", "B": "x=y"})
    assert spawn.STATUS[int(rec["status"])] == "ok"
    assert seen["env"] == ["A=aaaa", "B=x=y"]
    assert int(seen["bytes"]) == len("A=aaaa") + 1 + len("B=x=y") + 1
    _, empty = report(children, tmp_path)
    assert empty["env"] == [] and empty["n"] == "0"


def test_aslr_off_fixes_the_stack_and_env_moves_it_down(children, tmp_path):
    stacks = [int(report(children, tmp_path, {"A": ""}, aslr="off")[1]["stack"], 16) for _ in "abc"]
    assert len(set(stacks)) == 1
    bigger = int(report(children, tmp_path, {"A": "a" * 4096}, aslr="off")[1]["stack"], 16)
    assert 4096 - 16 <= stacks[0] - bigger <= 4096 + 16


@pytest.mark.skipif(settings.aslr() == 0, reason="ASLR is off system-wide here")
def test_aslr_on_moves_the_stack(children, tmp_path):
    stacks = {report(children, tmp_path, {"A": ""}, aslr="on")[1]["stack"] for _ in range(5)}
    assert len(stacks) > 1


def test_pinning_and_realtime(children, tmp_path):
    for cpu in machine.usable_cpus():
        rec, seen = report(children, tmp_path, cpus=(cpu,), rt=True)
        assert int(seen["cpu"]) == cpu
        granted = int(rec["rt_errno"]) == 0
        assert int(seen["policy"]) == (1 if granted else 0)  # SCHED_FIFO or SCHED_OTHER


def test_the_spawner_waits_on_the_childs_cpu_at_its_priority(children, tmp_path):
    """Each child starts on the CPU it runs on and wakes its spawner there (no migration, no
    cross-CPU wakeup); the spawner waits at the child's priority, so it does not interrupt the
    child at its execve, and its watcher raises it above the child at a timeout or a stop (the
    spinning child's test below); off the child's CPU it stays above all along."""
    assert isinstance(spawn.spawner(), spawn.HelperSpawner)
    rtprio = resource.getrlimit(resource.RLIMIT_RTPRIO)[0]
    above = has_capability(CAP_SYS_NICE) or rtprio == resource.RLIM_INFINITY or rtprio >= 2
    for cpu in machine.usable_cpus():
        rec, seen = report(children, tmp_path, name="parent", cpus=(cpu,), rt=True)
        assert seen["cpus"] == str(cpu)
        granted = int(rec["rt_errno"]) == 0
        assert int(seen["priority"]) == (1 if granted else 0)
        assert int(seen["at_exec"]) == (1 if granted else 0)
        # Sampling run queues keeps the spawner off the child's CPU when another is allowed:
        # there its wake-up preempts nothing, so it stays above the child all along.
        off = len(machine.usable_cpus()) > 1
        rec, seen = report(children, tmp_path, name="parent", cpus=(cpu,), rt=True, runq="proc")
        if int(rec["rt_errno"]) == 0:
            assert int(seen["at_exec"]) == (1 + above if off else 1)
        _, seen = report(children, tmp_path, name="parent", cpus=(cpu,), rt=False)
        assert seen["cpus"] == str(cpu) and seen["priority"] == "0"


def test_a_spinning_realtime_child_times_out_on_its_cpu(children):
    cpu = machine.usable_cpus()[-1]
    options = spawn.SpawnOptions(cpus=(cpu,), rt=True, timeout=0.2)
    rec = spawn.run([children["spin"]], None, options)
    if int(rec["rt_errno"]):
        pytest.skip("real-time priority is refused here")
    assert spawn.STATUS[int(rec["status"])] == "timeout"


def test_a_stop_ends_a_realtime_child_spinning_on_the_spawners_cpu(children):
    """At the child's priority the spawning thread never gets the CPU a spinning real-time
    child holds: the watcher raises it first, so the stop ends the run in flight (not recorded)
    instead of the child's own limit at its timeout (which would record it as 'timeout')."""
    cpu = machine.usable_cpus()[-1]
    options = spawn.SpawnOptions(cpus=(cpu,), rt=True, timeout=20)
    if int(spawn.run([children["report"]], None, options)["rt_errno"]):
        pytest.skip("real-time priority is refused here")
    got: list[np.ndarray] = []
    batch = threading.Thread(target=lambda: got.append(
        spawn.run_batch([[children["spin"]]], np.zeros(2, np.int64), options=options)
    ))  # fmt: skip
    batch.start()
    try:
        me = psutil.Process()
        wait_for(lambda: [p for p in me.children(recursive=True) if p.name() == "spin"],
                 "the spinning child")  # fmt: skip
    finally:
        spawn.request_stop()
        batch.join()
        spawn.clear_stop()
    assert len(got[0]) == 0


def test_back_to_back_realtime_runs_rest_so_the_kernels_throttle_never_lands_in_one(
    children, tmp_path
):
    """Real-time tasks get sched_rt_runtime_us of each sched_rt_period_us on a CPU; children
    run back to back would reach it and be throttled inside a run. The spawner rests between
    runs instead: no window of one period holds more of the children's time than the runtime
    (with half the period's remainder for a run predicted short; without the rests they fill
    the period)."""
    knobs = [Path(f"/proc/sys/kernel/sched_rt_{k}_us") for k in ("runtime", "period")]
    runtime, period = (int(k.read_text()) * 1000 for k in knobs)
    if runtime < 0:
        pytest.skip("the kernel does not throttle real-time tasks here")
    options = spawn.SpawnOptions(cpus=(machine.usable_cpus()[-1],), rt=True)
    stamps = tmp_path / "stamps"
    ms = 50
    prog = np.zeros(2 * period // (ms * 1_000_000), np.int64)  # two periods of runs
    runs = spawn.run_batch([[children["stamp"], str(stamps), str(ms)]], prog, options=options)
    if int(runs["rt_errno"][0]):
        pytest.skip("real-time priority is refused here")
    assert [spawn.STATUS[int(s)] for s in runs["status"]] == ["ok"] * len(runs)
    spans = np.loadtxt(stamps, dtype=np.int64, ndmin=2)
    assert len(spans) == len(runs)
    busiest = max(
        np.clip(np.minimum(spans[:, 1], t + period) - np.maximum(spans[:, 0], t), 0, None).sum()
        for t in spans[:, 0]
    )
    assert busiest <= runtime + (period - runtime) / 2


def test_a_sequential_sweep_keeps_batches_queued_in_the_helper(children, monkeypatch):
    """The helper has the next batch before it ends one: it never waits for perflab's thread."""
    monkeypatch.setattr(measure, "CHUNK_RUNS", 3)
    df = env_size.sweep([children["noprobe"]], max_size=4, repeat=4, rt=False, progress=False)
    spawner = spawn.spawner()
    assert isinstance(spawner, spawn.HelperSpawner)
    assert spawner.most_queued == childruns.AHEAD > 1
    planned = [(s, r) for s in range(5) for r in range(4)]
    assert sorted(zip(df["env_size"], df["rep"], strict=True)) == planned
    assert (df["status"] == "ok").all()


def test_without_the_helper_a_sequential_sweep_queues_in_process_and_resumes(
    children, tmp_path, monkeypatch
):
    """No helper binary: the same queued batches run here; a stop keeps every finished run."""
    monkeypatch.setattr(supervisor, "HELPER", tmp_path / "missing")
    monkeypatch.setattr(spawn, "_spawners", {})
    monkeypatch.setattr(measure, "CHUNK_RUNS", 3)
    out = tmp_path / "r.parquet"
    seen: list[int] = []

    def stop_at_the_second_batch(n: int) -> None:
        seen.append(n)
        if len(seen) == 2:
            raise KeyboardInterrupt

    argv, params = [children["noprobe"]], {"max_size": 4, "repeat": 4, "rt": False}
    with pytest.raises(KeyboardInterrupt):
        env_size.sweep(argv, output=out, progress=stop_at_the_second_batch, **params)
    assert type(spawn.spawner()) is spawn.DirectSpawner
    kept = results.load(out)
    assert results.metadata(kept)["complete"] is False and len(kept) == sum(seen) == 6
    df = env_size.sweep(argv, output=out, resume=True, progress=False, **params)
    planned = [(s, r) for s in range(5) for r in range(4)]
    assert sorted(zip(df["env_size"], df["rep"], strict=True)) == planned
    assert (df["status"] == "ok").all() and df["maxrss_kb"].isna().all()
    assert results.metadata(df)["maxrss_method"] == spawn.DirectSpawner.method


def test_setup_failure_is_reported_distinctly(children, tmp_path):
    rec, _ = report(children, tmp_path, cpus=(4095,))
    assert spawn.STATUS[int(rec["status"])] == "setup_failed"
    assert int(rec["child_errno"]) == errno.EINVAL


def test_exec_failure_is_reported_distinctly(tmp_path):
    script = tmp_path / "noshebang"
    script.write_text("echo hi\n")
    script.chmod(0o755)
    runs = spawn.run_env_sizes([str(script)], np.array([0, 1]))
    assert [spawn.STATUS[int(s)] for s in runs["status"]] == ["exec_failed"] * 2
    assert set(runs["child_errno"]) == {errno.ENOEXEC}
    plain = tmp_path / "plain"
    plain.write_text("")
    for path, code in [(tmp_path / "missing", errno.ENOENT), (plain, errno.EACCES)]:
        run = spawn.run_env_sizes([str(path)], np.array([0]))[0]
        assert (spawn.STATUS[int(run["status"])], int(run["child_errno"])) == ("exec_failed", code)


def test_program_is_checked_up_front(tmp_path):
    with pytest.raises(PerflabError, match="no such file"):
        spawn.check_program(tmp_path / "missing")
    (tmp_path / "data").write_text("")
    with pytest.raises(PerflabError, match="not an executable"):
        spawn.check_program(tmp_path / "data")
    with pytest.raises(PerflabError, match="is a directory"):
        spawn.check_program(tmp_path)
    for line, why in [("#!/no/such/sh", "does not exist"), (f"#!{tmp_path}", "cannot run")]:
        script = tmp_path / "script"
        script.write_text(f"{line} -e\ntrue\n")
        script.chmod(0o755)
        with pytest.raises(PerflabError, match=f"its interpreter .* {why}"):
            spawn.check_program(script)
    script.write_text("#!/bin/sh\ntrue\n")
    assert spawn.check_program(script) == str(script.resolve())
    assert spawn.check_program("true") == os.path.realpath(shutil.which("true"))


@pytest.mark.parametrize(
    ("name", "status", "exit_code", "sig"),
    [
        ("crash", "crash", -1, 11),
        ("exit3", "exit", 3, 0),
        ("garbage", "bad_probe", 0, 0),
        ("twice", "bad_probe", 0, 0),
        ("noprobe", "ok", 0, 0),
        ("probe", "ok", 0, 0),
    ],
)
def test_outcomes(children, name, status, exit_code, sig):
    df = spawn.tidy(spawn.run_env_sizes([children[name]], np.array([0, 7])))
    assert list(df["status"]) == [status] * 2
    assert list(df["exit_code"]) == [exit_code] * 2
    assert list(df["signal"]) == [sig] * 2
    assert df["ticks"].notna().all() == (name == "probe")
    assert (df["outer_ticks"] > 0).all() and (df["wall_ns"] > 0).all()
    assert tuple(df.columns) == spawn.TIDY_COLUMNS == childruns.MEASURED  # named before pandas


@pytest.mark.parametrize("mlock", [False, True])
def test_each_run_in_a_batch_is_judged_on_its_own_records(children, mlock):
    """What one run leaves in its probe socket (records after the first, garbage, a request
    it did not read, the socket shut down) never reaches the next run: each has its own."""
    names = ["many", "probe", "twice", "probe", "garbage", "probe", "noprobe", "probe", "shut",
             "probe", "crash"]  # fmt: skip
    programs = sorted(set(names))
    prog = np.array([programs.index(n) for n in names])
    runs = spawn.run_batch([[children[n]] for n in programs], prog, None, "A", None,
                           spawn.SpawnOptions(mlock=mlock))  # fmt: skip
    df = spawn.tidy(runs)
    bad, ok = "bad_probe", "ok"
    assert list(df["status"]) == [bad, ok, bad, ok, bad, ok, ok, ok, ok, ok, "crash"]
    assert list(df["ticks"].notna()) == [n == "probe" for n in names]


def test_timeout_kills_the_child(children):
    rec = spawn.run([children["hang"]], None, spawn.SpawnOptions(timeout=0.2))
    assert spawn.STATUS[int(rec["status"])] == "timeout"
    assert int(rec["signal"]) == 9
    assert int(rec["wall_ns"]) >= 0.2e9


def test_a_stop_ends_the_run_in_flight_which_the_helper_waits_for_without_a_pidfd(children):
    """The helper's spawning thread sleeps in wait4, without a pidfd per child; a stop still
    ends a child that would never end on its own, and the batch returns without it."""
    assert isinstance(spawn.spawner(), spawn.HelperSpawner)
    got: list[np.ndarray] = []
    batch = threading.Thread(
        target=lambda: got.append(spawn.run_env_sizes([children["hang"]], np.zeros(3, np.int64)))
    )
    batch.start()
    try:
        me = psutil.Process()
        hung = lambda: [p for p in me.children(recursive=True) if p.name() == "hang"]  # noqa: E731
        wait_for(hung, "the child's start")
        child = hung()[0]
        helper_fds = [os.readlink(f"/proc/{child.ppid()}/fd/{fd}")
                      for fd in os.listdir(f"/proc/{child.ppid()}/fd")]  # fmt: skip
        assert not [link for link in helper_fds if "pidfd" in link]
        spawn.request_stop()
        batch.join(timeout=60)  # a hang guard: without the stop's kill it would never return
        assert not batch.is_alive()
        assert not child.is_running() or child.status() == psutil.STATUS_ZOMBIE
    finally:
        spawn.request_stop()
        batch.join()
        spawn.clear_stop()
    assert len(got[0]) == 0


def test_probe_ticks_and_mlock_request(children):
    rec = spawn.run([children["probe"]], None, spawn.SpawnOptions(mlock=True))
    assert int(rec["flags"]) & lib.PERFLAB_RUN_HAS_PROBE
    assert 0 < int(rec["probe_ticks"]) < int(rec["outer_ticks"])
    if has_capability(CAP_IPC_LOCK):  # without it, RLIMIT_MEMLOCK decides: maybe, maybe not
        assert int(rec["flags"]) & lib.PERFLAB_RUN_MLOCKED


@pytest.mark.parametrize("asked", [1, 5, constants.MAX_ITERATIONS])
def test_the_repeat_loop_runs_and_reports_each_iteration_asked(children, tmp_path, asked):
    """PERFLAB_PROBE_LOOP runs its body as often as the batch asks, one record an iteration,
    in order: iteration i spins i + 1 times as long, so the last of 64 outlasts the first."""
    rec, seen = report(children, tmp_path, name="loop", iterations=asked)
    assert spawn.STATUS[int(rec["status"])] == "ok"
    assert int(seen["iterations"]) == int(rec["iterations"]) == asked
    ticks = rec["iteration_ticks"][:asked].astype(np.int64)
    assert (ticks > 0).all() and not rec["iteration_ticks"][asked:].any()
    assert int(rec["probe_ticks"]) == ticks.sum() < int(rec["outer_ticks"])
    if asked == constants.MAX_ITERATIONS:  # the last spins 64 times as long as the first
        assert ticks[-1] > ticks[0]


def test_the_repeat_loop_runs_once_outside_perflab(children):
    out = subprocess.run([children["loop"]], capture_output=True, text=True, check=True)
    assert out.stdout == "iterations 1\n"


def test_iterations_become_columns_and_a_plain_probe_sends_one(children):
    """Asked for 4 iterations, the loop's run reads its median iteration in ticks; a program
    with a plain BEGIN and END sends its one record, ok, as may one with four of them; one
    that sends more records than asked is a bad probe."""
    names = ["loop", "probe", "many", "noprobe"]
    runs = spawn.run_batch([[children[n]] for n in names], np.arange(4), None, "A", None,
                           spawn.SpawnOptions(iterations=4))  # fmt: skip
    tidy = spawn.tidy_columns(runs)
    df = pd.DataFrame({**tidy, **spawn.iteration_columns(runs, tidy["ticks"])})
    assert list(df["status"]) == ["ok", "ok", "ok", "ok"]
    assert list(df["iterations"]) == [4, 1, 4, 0]
    assert df["ticks"][0] == np.median(runs["iteration_ticks"][0][:4].astype(np.int64))
    runs = spawn.run_batch([[children["many"]]], np.zeros(1), None, "A", None,
                           spawn.SpawnOptions(iterations=3))  # fmt: skip
    assert spawn.STATUS[int(runs["status"][0])] == "bad_probe"
    with pytest.raises(PerflabError, match="--iterations must be 1 to 64"):
        spawn.SpawnOptions(iterations=constants.MAX_ITERATIONS + 1)


def test_rusage_is_the_childs(children):
    df = spawn.tidy(spawn.run_env_sizes([children["probe"]], np.zeros(3, dtype=np.int64)))
    assert (df["minflt"] > 0).all()
    assert (df["utime_ns"] + df["stime_ns"] < df["wall_ns"] * 2).all()


def test_batch_sizes_reach_the_child(children, tmp_path):
    out = tmp_path / "batch.txt"
    with open(out, "w") as f:
        opts = spawn.SpawnOptions(stdout=f.fileno(), aslr="off")
        runs = spawn.run_env_sizes([children["report"]], np.array([0, 5, 100]), "PAD", None, opts)
    assert list(runs["env_size"]) == [0, 5, 100]
    envs = [line[4:] for line in out.read_text().splitlines() if line.startswith("env ")]
    assert envs == ["PAD=", "PAD=aaaaa", "PAD=" + "a" * 100]
    with open(out, "w") as f:
        opts = spawn.SpawnOptions(stdout=f.fileno())
        spawn.run_env_sizes([children["report"]], np.array([3]), "A", {"HOME": "/x"}, opts)
    assert [x for x in out.read_text().splitlines() if x.startswith("env ")] == [
        "env HOME=/x",
        "env A=aaa",
    ]
    with pytest.raises(PerflabError):
        spawn.run_env_sizes([children["report"]], np.array([-1]))


def _read_from_disk_kb() -> int:
    """What the machine has read from its block devices so far (/proc/vmstat pgpgin, KiB)."""
    for line in Path("/proc/vmstat").read_text().splitlines():
        if line.startswith("pgpgin "):
            return int(line.split()[1])
    raise AssertionError("no pgpgin in /proc/vmstat")


def _filesystem(path: str) -> str:
    """The type of path's filesystem as stat names it (ext4 is "ext2/ext3")."""
    kind = subprocess.run(["stat", "-f", "-c", "%T", path], capture_output=True, text=True)
    return kind.stdout.strip()


def test_a_settling_batch_reads_its_programs_afresh_and_flags_one_it_cannot(tmp_path):
    """settle: before its first run the batch drops each program's file from the page cache
    and reads it back, from the disk (the kernel counts the read); a program a process keeps
    mapped cannot be dropped, and its first run in the batch says so."""
    prog = compile_children(tmp_path, {"report": REPORT}, static=True)["report"]
    with open(os.devnull, "w") as null:
        options = spawn.SpawnOptions(settle=True, stdout=null.fileno())
        before = _read_from_disk_kb()
        runs = spawn.run_batch([(prog,)], np.zeros(3, np.int64), options=options)
        read_kb = _read_from_disk_kb() - before
        assert [spawn.STATUS[int(s)] for s in runs["status"]] == ["ok"] * 3
        kept = bool(runs["flags"][0] & bindings.RUN_PAGES_KEPT)
        fs = _filesystem(prog)
        if fs in ("tmpfs", "ramfs"):  # its pages are the file: they never drop
            assert kept
        else:
            assert not kept or fs not in ("ext2/ext3", "xfs", "btrfs")
            assert kept or read_kb >= os.path.getsize(prog) // 1024 * 0.9
        with open(prog, "rb") as f, mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ) as held:
            assert sum(held[:: mmap.PAGESIZE]) >= 0  # every page in memory, and mapped here
            runs = spawn.run_batch([(prog,)], np.zeros(3, np.int64), options=options)
    assert list((runs["flags"] & bindings.RUN_PAGES_KEPT) != 0) == [True, False, False]


def test_a_batch_holds_one_layout_and_only_its_first_run_reads_pages_afresh():
    """Runs.fresh: batches are cut before each run a layout starts with, and only a batch that
    begins with one asks for its programs' pages afresh; Runs.starting marks them."""
    runs = childruns.Runs(programs=[("a",)], prog=np.zeros(7, np.int64), labels={}, key=(),
                          fresh=np.array([1, 0, 0, 1, 0, 1, 0], bool))  # fmt: skip
    parts = runs.batches(np.arange(1, 7))
    assert [p.tolist() for p in parts] == [[1, 2], [3, 4], [5, 6]]
    assert [runs.under(p, spawn.SpawnOptions())[1].settle for p in parts] == [False, True, True]
    # A layout's first run still to do starts it, one a resume completes included.
    layouts = childruns.Runs(programs=[("a",)], prog=np.zeros(7, np.int64), labels={}, key=(),
                             layout=np.array([0, 0, 0, 1, 1, 2, 2]))  # fmt: skip
    started = layouts.starting(np.array([1, 2, 4, 5, 6]))
    assert started.fresh is not None and np.flatnonzero(started.fresh).tolist() == [1, 4, 5]


@pytest.mark.parametrize("rt_errno", [0, errno.EPERM])
def test_real_time_runs_longer_than_the_kernels_runtime_are_said_once(rt_errno):
    """No rest keeps the throttle out of a run longer than the real-time runtime: one warning
    naming --no-rt, recorded, where such runs were granted real-time priority."""
    runs = np.zeros(3, bindings.RUN_DTYPE)
    runs["wall_ns"] = [5_000_000, 2_000_000_000, 3_000_000_000]
    runs["rt_errno"] = rt_errno
    said: list[str] = []
    extra: dict = {}
    options = spawn.SpawnOptions(rt=True)
    for _ in range(2):
        childruns.rt_throttled_once(options, runs, extra, said.append)
    childruns.rt_throttled_once(spawn.SpawnOptions(rt=False), runs, {}, said.append)
    bandwidth = settings.rt_bandwidth()
    if rt_errno or bandwidth is None or bandwidth[0] >= 3_000_000_000:
        assert said == [] and extra == {}
    else:
        assert len(said) == 1 and "--no-rt" in said[0] and "3,000 ms" in said[0]
        assert extra["rt_throttled"]["longest"] == "3,000"


@pytest.mark.parametrize("using", [spawn.DirectSpawner(), None], ids=["direct", "helper"])
def test_each_program_runs_in_the_directory_named_for_it(tmp_path, using):
    """As `git bisect run` runs a commit's benchmark in its tree: a directory per program."""
    pwd = shutil.which("pwd")
    assert pwd is not None
    here = tmp_path / "tree"
    here.mkdir()
    out = tmp_path / "out.txt"
    with open(out, "w") as f:
        options = spawn.SpawnOptions(stdout=f.fileno(), dirs=(str(here), ""))
        runs = spawn.run_batch([[pwd], [pwd, "-P"]], np.array([0, 1, 0]), options=options,
                               using=using)  # fmt: skip
    assert [spawn.STATUS[int(s)] for s in runs["status"]] == ["ok"] * 3
    assert out.read_text().splitlines() == [str(here), os.getcwd(), str(here)]
    gone = spawn.SpawnOptions(dirs=(str(tmp_path / "missing"),))
    (failed,) = spawn.run_batch([[pwd]], np.array([0]), options=gone, using=using)
    assert spawn.STATUS[int(failed["status"])] == "setup_failed"
    assert failed["child_errno"] == errno.ENOENT
    with pytest.raises(PerflabError, match="1 directories for 2 programs"):
        spawn.run_batch([[pwd], [pwd]], np.array([0]), options=gone)
