"""Nothing perflab starts outlives it: a kill -9 of perflab, a SIGTERM or a normal end, in the
middle of each verb that runs a program, leaves no process of the run (the program, the sleeper
its setsid grandchild forked, perf, strace, perflab's helpers) and no temporary directory.

A process is the run's if its command line or its environment holds the test's own directory:
the program's argv names its pid file there, and perflab, its helpers and what they start
inherit TMPDIR, a fresh directory there. Real runs of the real helper; nothing mocked.
"""

import contextlib
import itertools
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import psutil
import pytest
from conftest import long_beyond

from perflab.running import spawn
from perflab.system import machine, supervisor

# argv[1]: a file each process appends its pid to; argv[2]: ms the program sleeps before it
# exits. Its child calls setsid() and forks the sleeper, then exits: the sleeper, in a session
# of its own, is re-parented away from the program's process group at once.
LEAVER = r"""
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static void note(const char *file)
{
    char buf[32];
    int fd = open(file, O_WRONLY | O_APPEND | O_CREAT, 0644);
    int n = snprintf(buf, sizeof buf, "%d\n", (int)getpid());
    if (fd >= 0 && write(fd, buf, (size_t)n) == n)
        close(fd);
}

int main(int argc, char **argv)
{
    long ms = argc > 2 ? atol(argv[2]) : 0;
    struct timespec nap = {ms / 1000, ms % 1000 * 1000000L};
    if (fork() == 0) {
        setsid();
        if (fork() == 0) {
            note(argv[1]);
            for (;;)
                pause();
        }
        _exit(0);
    }
    note(argv[1]);
    nanosleep(&nap, NULL);
    return 0;
}
"""
LONG_MS, SHORT_MS = 600_000, 300
WAIT_S = 300.0  # only guards a hang: a loaded machine is slow


@pytest.fixture(scope="module")
def leaver(tmp_path_factory) -> Path:
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler to build the test program")
    where = tmp_path_factory.mktemp("leaver")
    (where / "leaver.c").write_text(LEAVER)
    subprocess.run([cc, "-O1", "-o", str(where / "leaver"), str(where / "leaver.c")], check=True)
    return where / "leaver"


def _ours(marker: str) -> list[psutil.Process]:
    """Live processes whose argv or environment names the marker (zombies are gone already)."""
    found = []
    for p in psutil.process_iter():
        try:
            if p.pid == os.getpid() or p.status() == psutil.STATUS_ZOMBIE:
                continue
            if any(marker in a for a in p.cmdline()) or any(
                marker in v for v in p.environ().values()
            ):
                found.append(p)
        except psutil.Error:
            continue
    return found


@pytest.fixture
def run_dir(tmp_path):
    """The test's directory and TMPDIR in it; whatever of the run survives the test (it failed)
    is killed here, by pid, so that no failure leaves a process on the machine."""
    (tmp_path / "tmp").mkdir()
    yield tmp_path
    for p in _ours(str(tmp_path)):
        with contextlib.suppress(psutil.Error):
            p.kill()


def _verb(name: str, leaver: Path, pids: Path, ms: int) -> list[str]:
    program = [str(leaver), str(pids), str(ms)]
    # strace -f waits for the sleeper it traces: the program ends at the timeout, not by itself
    until = ["--timeout", "5"] if ms < LONG_MS else []
    return {
        "profile": ["profile", "--", *program],
        "profile-samples-strace": ["profile", "--samples", "--strace", *until, "--", *program],
        "counters": ["counters", "--", *program],
        "env-size": ["sweep", "env-size", "--min", "0", "--max", "4096" if ms > 100 else "1",
                     "--repeat", "1", "--", *program],
        "threads": ["sweep", "threads", "--threads", "1", "--repeat",
                    "500" if ms > 100 else "1", "--", *program, "{threads}"],
    }[name]  # fmt: skip


def _wait_for(ready, what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not ready():
        if time.monotonic() > deadline:
            pytest.fail(f"{what} not within {WAIT_S:.0f} s")
        time.sleep(0.05)


def _lines(path: Path) -> list[int]:
    return [int(x) for x in path.read_text().split()] if path.exists() else []


VERBS = ["profile", "profile-samples-strace", "counters", "env-size", "threads"]


ENDINGS = ["kill-9", "sigterm", "normal"]
# Every verb killed by SIGKILL (what perflab cannot clean up after), and the spawner helper's
# and the supervisor's paths (env-size, counters) ended every way; the rest in the long step.
FAST = {(v, "kill-9") for v in VERBS} | {(v, e) for v in ("env-size", "counters") for e in ENDINGS}


@pytest.mark.parametrize("verb, ending", long_beyond(itertools.product(VERBS, ENDINGS), FAST))
def test_nothing_of_the_run_outlives_perflab(leaver, run_dir, verb, ending):
    if verb == "profile-samples-strace" and not (shutil.which("perf") and shutil.which("strace")):
        pytest.skip("perf or strace is not installed here")
    pids = run_dir / "pids"
    tmp = run_dir / "tmp"
    # stopped mid-run: a program that runs for ever, or a sweep of many short runs
    ms = SHORT_MS if ending == "normal" else LONG_MS
    if verb in ("env-size", "threads"):
        ms = 50 if ending != "normal" else 20
    # the timed-out program's status is profile's own (128 + SIGKILL)
    status = 128 + signal.SIGKILL if verb == "profile-samples-strace" else 0
    argv = [sys.executable, "-m", "perflab", *_verb(verb, leaver, pids, ms)]
    env = {**os.environ, "TMPDIR": str(tmp)}
    said = run_dir / "stderr"
    with open(said, "wb") as err:
        proc = subprocess.Popen(argv, env=env, cwd=run_dir, stdout=subprocess.DEVNULL, stderr=err)
    try:
        # the program and its sleeper both wrote their pids: a stray exists, mid-run
        _wait_for(lambda: len(_lines(pids)) >= 2 or proc.poll() is not None, "the program")
        assert len(_lines(pids)) >= 2, said.read_text()
        if ending != "normal":
            assert psutil.Process(proc.pid).children(), "perflab started nothing"
            proc.send_signal(signal.SIGKILL if ending == "kill-9" else signal.SIGTERM)
        proc.wait(WAIT_S)
        assert ending != "normal" or proc.returncode == status, said.read_text()
    finally:
        proc.kill()
        proc.wait()
    _wait_for(lambda: not _ours(str(run_dir)), "the end of every process of the run")
    assert not any(psutil.pid_exists(p) and _alive(p) for p in _lines(pids))
    assert sorted(x.name for x in tmp.iterdir()) == []


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def test_a_supervisor_bounds_what_it_starts(leaver, run_dir):
    """The mechanism itself: a stray re-parented to the supervisor, the directory it made, and
    everything gone once it is closed; the cgroup only where one could be made."""
    pids = run_dir / "pids"
    with supervisor.Supervisor(tmp=True) as under:
        assert under.tmpdir is not None and under.tmpdir.is_dir()
        child = under.start([str(leaver), str(pids), "0"])
        assert child.wait() == 0
        _wait_for(lambda: len(_lines(pids)) >= 2, "the sleeper")
        # Not the second line: on one CPU the grandchild may note its pid before the leaver.
        sleeper = psutil.Process(next(p for p in _lines(pids) if p != child.pid))
        # its parent gone, re-parented to the subreaper, not to init
        _wait_for(lambda: sleeper.ppid() == under.pid, "the sleeper re-parented")
        assert (under.cgroup is None) == (under.cgroup_error != 0)
        if under.cgroup:
            members = Path(under.cgroup, "cgroup.procs").read_text().split()
            assert str(sleeper.pid) in members
        made, cgroup = under.tmpdir, under.cgroup
    assert not sleeper.is_running() or sleeper.status() == psutil.STATUS_ZOMBIE
    assert not made.exists() and (cgroup is None or not Path(cgroup).exists())


def test_a_killed_supervisor_takes_its_children_with_it(run_dir):
    """Its one blind spot, its own SIGKILL: its children die with it (PR_SET_PDEATHSIG), and
    perflab removes its directory and its cgroup when it closes it."""
    under = supervisor.Supervisor(tmp=True)
    try:
        marked = {"PATH": os.environ["PATH"], "MARK": str(run_dir)}  # for the fixture's sweep
        child = under.start(["sleep", "600"], marked)
        made = under.tmpdir
        os.kill(under.pid, signal.SIGKILL)
        assert psutil.wait_procs([psutil.Process(child.pid)], timeout=WAIT_S)[1] == []
    finally:
        under.close()
    assert made is not None and not made.exists()
    assert under.cgroup is None or not Path(under.cgroup).exists()


def test_start_reports_what_subprocess_would(run_dir):
    with supervisor.Supervisor() as under:
        with pytest.raises(FileNotFoundError):
            under.start(["perflab-no-such-command"])
        with pytest.raises(FileNotFoundError):
            under.start([str(run_dir / "missing")])
        with pytest.raises(PermissionError):
            under.start([str(run_dir)])
        out = run_dir / "out"
        with open(out, "wb") as f:
            env = {"X": "exact", "PATH": "/bin:/usr/bin"}
            child = under.start(["sh", "-c", "echo $X; exit 3"], env, fds=(None, f.fileno(), 2))
            assert child.wait() == 3
        assert out.read_text() == "exact\n"
        assert child.usage is not None and child.usage.ru_utime >= 0


def test_the_spawner_kills_what_each_run_left(leaver, run_dir):
    """Serial runs: each run's setsid sleeper killed after it (strays); a parallel batch's once
    all its lanes are done."""
    pids = run_dir / "pids"
    argv = [str(leaver), str(pids), "20"]
    runs = spawn.tidy(spawn.run_batch([argv], np.zeros(3, np.int64)))
    assert (runs["status"] == "ok").all() and runs["strays"].all()
    assert not any(_alive(p) for p in _lines(pids))
    cpus = tuple(machine.usable_cpus()[:2])
    runs = spawn.tidy(spawn.run_batch([argv], np.zeros(4, np.int64),
                                      options=spawn.ParallelOptions(cpus=cpus)))  # fmt: skip
    assert (runs["status"] == "ok").all()
    assert len(_lines(pids)) > 6 and not any(_alive(p) for p in _lines(pids))
