"""Programs that fight perflab: they stop or signal their parent (the spawner helper or the
supervisor) and its process group, stop themselves, ignore SIGTERM, leave children behind, or
kill the helper mid-batch. Under every verb that runs programs, perflab ends (in one line and
a non-zero exit, or working), leaves nothing running, ends on SIGTERM and keeps finished runs.

Every bound below is hang detection (HANG_S), never a speed claim. The README's suite keeps a
sweep's three ways of ending (a program that signals its parent, one that hangs, one that kills
the helper) and each other verb's killed helper; the rest of the matrix runs in CI's long step,
as root and as a user.
"""

import os
import signal
import subprocess
import sys
import time

import numpy as np
import psutil
import pytest
from conftest import compile_children, long_beyond

from perflab.errors import PerflabError
from perflab.running import spawn
from perflab.store import results
from perflab.system import binlayout, compiler, supervisor

HANG_S = 240  # far past anything here: only a hang reaches it

HOSTILE = r"""
/* argv[1]: what to do; with `at N FILE` after it, only on the Nth run (FILE counts the
 * runs), else on every run. */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static pid_t parent_of(pid_t pid)
{
    char path[64], buf[512], *end;
    int ppid = -1, fd;
    ssize_t n;

    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    if ((fd = open(path, O_RDONLY)) < 0)
        return -1;
    n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = 0;
    if (!(end = strrchr(buf, ')')) || sscanf(end + 1, " %*c %d", &ppid) != 1)
        return -1;
    return ppid;
}

static int this_run(int argc, char **argv)
{
    char buf[32] = "";
    int fd, n;

    if (argc < 5 || strcmp(argv[2], "at") != 0)
        return 1;
    if ((fd = open(argv[4], O_RDWR | O_CREAT, 0600)) < 0 || read(fd, buf, sizeof buf - 1) < 0)
        return 0;
    n = atoi(buf) + 1;
    lseek(fd, 0, SEEK_SET);
    dprintf(fd, "%d\n", n);
    close(fd);
    return n == atoi(argv[3]);
}

int main(int argc, char **argv)
{
    const char *what = argc > 1 ? argv[1] : "";
    pid_t parent = getppid();

    if (!this_run(argc, argv))
        return 0;
    if (!strcmp(what, "stop-parent"))
        kill(parent, SIGSTOP);
    else if (!strcmp(what, "tstp-parent"))
        kill(parent, SIGTSTP);
    else if (!strcmp(what, "term-parent"))
        kill(parent, SIGTERM);
    else if (!strcmp(what, "usr2-parent"))
        kill(parent, SIGUSR2);
    else if (!strcmp(what, "stop-parent-group"))
        kill(-getpgid(parent), SIGSTOP);
    else if (!strcmp(what, "term-parent-group"))
        kill(-getpgid(parent), SIGTERM);
    else if (!strcmp(what, "kill-parent"))
        kill(parent, SIGKILL);
    else if (!strcmp(what, "kill-parent-group"))
        kill(-getpgid(parent), SIGKILL);
    else if (!strcmp(what, "stop-self"))
        raise(SIGSTOP);
    else if (!strcmp(what, "stop-helpers")) { /* the helper and its supervisor, then hang */
        pid_t grand = parent_of(parent);
        if (grand > 1)
            kill(grand, SIGSTOP);
        kill(parent, SIGSTOP);
        signal(SIGTERM, SIG_IGN);
        sleep(1000);
    } else if (!strcmp(what, "ignore-term")) {
        signal(SIGTERM, SIG_IGN);
        signal(SIGINT, SIG_IGN);
        signal(SIGHUP, SIG_IGN);
        sleep(1000);
    } else if (!strcmp(what, "outlive")) {
        if (fork() == 0) {
            setsid();
            if (fork() == 0) {
                signal(SIGTERM, SIG_IGN);
                sleep(1000);
            }
            _exit(0);
        }
    }
    return 0;
}
"""

# What a program does to its parent (the spawner helper in a sweep, the supervisor for
# counters and profile) and the runs still end as they would: perflab undoes or drops it.
SHRUGGED = ("stop-parent", "tstp-parent", "term-parent", "usr2-parent", "stop-parent-group",
            "term-parent-group", "outlive")  # fmt: skip
KILLERS = ("kill-parent", "kill-parent-group")
# Two cells of each matrix in the suite, each kind (a stop, a termination, of one process or
# its group, a killer, a stray that outlives, a hang) in one verb's at least; every cell of
# every matrix in CI's long step.


@pytest.fixture(scope="module")
def hostile(tmp_path_factory) -> str:
    return compile_children(tmp_path_factory.mktemp("hostile"), {"hostile": HOSTILE})["hostile"]


def perflab(*args: str, timeout: float = HANG_S) -> subprocess.CompletedProcess:
    """The CLI in a process of its own, quiet, within HANG_S (a hang fails the test)."""
    return subprocess.run([sys.executable, "-m", "perflab", "-q", *args], capture_output=True,
                          text=True, timeout=timeout, stdin=subprocess.DEVNULL)  # fmt: skip


def running(program: str) -> list[psutil.Process]:
    """Live processes (not zombies) running this program, whoever's children they are."""
    found = []
    for p in psutil.process_iter(["cmdline", "status"]):
        cmd = p.info["cmdline"] or []
        if cmd and cmd[0] == program and p.info["status"] != psutil.STATUS_ZOMBIE:
            found.append(p)
    return found


def nothing_left(program: str) -> None:
    """No process of program still runs once perflab has ended (its last kill may still be
    on its way: a few seconds of grace)."""
    for _ in range(100):
        if not running(program):
            return
        time.sleep(0.1)
    left = running(program)
    for p in left:
        p.kill()
    pytest.fail(f"left running after perflab ended: {[p.info['cmdline'] for p in left]}")


def one_line(done: subprocess.CompletedProcess) -> str:
    """perflab failed in exactly one error line, no traceback (its own notes and warnings,
    `perflab: ...` lines, aside)."""
    lines = [s for s in done.stderr.splitlines() if not s.startswith("perflab: ")]
    assert done.returncode != 0, done.stderr
    assert len(lines) == 1 and lines[0].startswith("Error: "), done.stderr
    assert "Traceback" not in done.stderr
    return lines[0]


def env_size(program: list[str], *more: str) -> list[str]:
    return ["sweep", "env-size", "--max", "16", "--step", "16", "--repeat", "2", "--no-rt",
            *more, "--", *program]  # fmt: skip


@pytest.mark.parametrize("what", long_beyond(SHRUGGED, {"stop-parent"}))
def test_a_sweep_shrugs_off_a_program_that_signals_its_parent(hostile, tmp_path, what):
    out = tmp_path / "r.parquet"
    done = perflab(*env_size([hostile, what], "--timeout", "30", "-o", str(out)))
    assert done.returncode == 0, done.stderr
    df = results.load(out)
    assert len(df) == 4 and (df["status"] == "ok").all()
    nothing_left(hostile)


@pytest.mark.parametrize("what", long_beyond(["stop-self", "ignore-term", "stop-helpers"],
                                             {"stop-self"}))  # fmt: skip
def test_a_sweep_ends_a_program_that_hangs_at_its_timeout(hostile, tmp_path, what):
    out = tmp_path / "r.parquet"
    sweep = ["sweep", "env-size", "--max", "0", "--repeat", "2", "--no-rt", "--timeout", "0.3"]
    done = perflab(*sweep, "-o", str(out), "--", hostile, what)
    assert "no run ended 'ok'" in one_line(done)
    assert set(results.load(out)["status"]) == {"timeout"}
    nothing_left(hostile)


@pytest.mark.parametrize("what", long_beyond(KILLERS, {"kill-parent"}))
def test_a_killed_helper_is_said_and_its_finished_runs_kept(hostile, tmp_path, what):
    out, count = tmp_path / "r.parquet", tmp_path / "count"
    # the preflight is run 1; runs 2..5 finish; the 6th kills the helper mid-batch
    program = [hostile, what, "at", "6", str(count)]
    args = ["sweep", "env-size", "--max", "48", "--step", "16", "--repeat", "2", "--no-rt",
            "--timeout", "30", "--order", "sequential"]  # fmt: skip
    done = perflab(*args, "-o", str(out), "--", *program)
    line = one_line(done)
    assert "spawner helper was killed by SIGKILL" in line
    assert f"--resume {out}" in line
    kept = results.load(out)
    assert len(kept) == 4 and (kept["status"] == "ok").all()
    nothing_left(hostile)
    done = perflab(*args, "--resume", str(out), "--", *program)
    assert done.returncode == 0, done.stderr
    assert len(results.load(out)) == 8


def test_the_api_gets_the_runs_a_killed_helper_finished(hostile, tmp_path):
    count = tmp_path / "count"
    with pytest.raises(spawn.HelperLost, match="killed by SIGKILL") as lost:
        spawn.run_batch([(hostile, "kill-parent", "at", "5", str(count))], np.zeros(8, np.int32),
                        options=spawn.SpawnOptions(timeout=30))  # fmt: skip
    runs = lost.value.runs
    assert len(runs) == 4 and (runs["status"] == spawn.STATUS_NAMES.index("ok")).all()
    assert spawn.run_batch([("/bin/true",)], np.zeros(2, np.int32)).size == 2  # a new helper
    nothing_left(hostile)


@pytest.mark.long
def test_sigterm_ends_a_sweep_whose_program_stopped_its_helpers(hostile, tmp_path):
    out, count = tmp_path / "r.parquet", tmp_path / "count"
    cmd = [sys.executable, "-m", "perflab", "-q",
           *env_size([hostile, "stop-helpers", "at", "4", str(count)], "--timeout", "1000",
                     "--order", "sequential", "-o", str(out))]  # fmt: skip
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
    try:
        for _ in range(HANG_S * 10):
            if count.exists() and count.read_text().strip() == "4":
                break
            time.sleep(0.1)
        time.sleep(0.5)  # the 4th run has stopped the helper and its supervisor
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=HANG_S)
    finally:
        proc.kill()
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert f"--resume {out}" in err
    kept = results.load(out)  # runs 2 and 3 finished; the 4th was cut short
    assert len(kept) == 2 and (kept["status"] == "ok").all()
    nothing_left(hostile)


@pytest.mark.parametrize("what", long_beyond(["stop-parent", "term-parent", "kill-parent"],
                                             {"kill-parent"}))  # fmt: skip
def test_compare_with_a_hostile_side(hostile, tmp_path, what):
    args = ["compare", f"{hostile} {what}", f"{hostile} none", "--setups", "1", "--repeat", "2",
            "--timeout", "30", "--no-rt", "-o", str(tmp_path / "c.parquet")]  # fmt: skip
    done = perflab(*args)
    if what in KILLERS:
        assert "spawner helper was killed" in one_line(done)
    else:
        assert done.returncode == 0, done.stderr
    nothing_left(hostile)


@pytest.mark.parametrize("what", long_beyond(["stop-parent", "term-parent", "stop-self",
                                              "kill-parent"],
                                             {"kill-parent"}))  # fmt: skip
def test_threads_with_a_hostile_program(hostile, what):
    done = perflab("sweep", "threads", "--threads", "1", "--repeat", "2", "--timeout", "1",
                   "--", hostile, what)  # fmt: skip
    if what == "stop-parent" or what == "term-parent":
        assert done.returncode == 0, done.stderr
    elif what == "stop-self":
        assert "no run ended ok" in one_line(done)
    else:
        assert "spawner helper was killed" in one_line(done)
    nothing_left(hostile)


@pytest.mark.parametrize("what", long_beyond([*SHRUGGED, "stop-self", *KILLERS],
                                             {"kill-parent"}))  # fmt: skip
def test_counters_with_a_hostile_command(hostile, what):
    done = perflab("counters", "-e", "task-clock", "--", hostile, what)
    if what in KILLERS:
        assert "supervisor" in one_line(done) and "killed by SIGKILL" in done.stderr
    else:
        assert done.returncode == 0, done.stderr
        assert "task-clock" in done.stderr  # the counts: stdout is the command's
    if what == "stop-self":  # in perflab's group, it is perflab that resumes it, and says so
        assert "resumed by perflab" in done.stderr
    nothing_left(hostile)


@pytest.mark.long
def test_counters_kills_a_command_at_its_timeout(hostile):
    done = perflab("counters", "-e", "task-clock", "--timeout", "1", "--", hostile, "ignore-term")
    assert done.returncode == 128 + signal.SIGKILL, done.stderr  # as a shell reports it
    assert "ran past --timeout 1 s and was killed" in done.stderr
    assert "task-clock" in done.stderr  # the counts: stdout is the command's
    nothing_left(hostile)


@pytest.mark.parametrize("what", long_beyond(["stop-parent", "term-parent", "stop-self",
                                              "ignore-term", *KILLERS],
                                             {"kill-parent"}))  # fmt: skip
def test_profile_with_a_hostile_program(hostile, what):
    done = perflab("profile", "--timeout", "1", "--", hostile, what)
    if what in KILLERS:
        assert "supervisor" in one_line(done) and "killed by SIGKILL" in done.stderr
    elif what == "ignore-term":  # killed at its timeout: perflab exits as a shell would
        assert done.returncode == 128 + signal.SIGKILL, done.stderr
    else:
        assert done.returncode == 0, done.stderr
    nothing_left(hostile)


@pytest.fixture
def objects(tmp_path) -> list[str]:
    for name, body in (("m", "int f(void);\nint main(void) { return f(); }\n"),
                       ("f", "int f(void) { return 0; }\n")):  # fmt: skip
        (tmp_path / f"{name}.c").write_text(body)
        subprocess.run(["cc", "-c", str(tmp_path / f"{name}.c"), "-o", str(tmp_path / f"{name}.o")],
                       check=True)  # fmt: skip
    return [str(tmp_path / "m.o"), str(tmp_path / "f.o")]


@pytest.mark.parametrize("what", ["ignore-term", "stop-self"])
@pytest.mark.long
def test_a_link_command_is_bounded_by_the_build_timeout(hostile, objects, what):
    done = perflab("sweep", "link-order", "--objects", *objects, "--repeat", "1",
                   "--link-cmd", f"{hostile} {what} {{objects}} {{output}}",
                   "--build-timeout", "1")  # fmt: skip
    line = one_line(done)
    if what == "ignore-term":
        assert "did not finish within 1 s (--build-timeout" in line
    else:  # resumed, it ends having linked nothing: the link is refused as such
        assert "link of" in line
    nothing_left(hostile)


@pytest.mark.long
def test_a_build_command_is_bounded_by_the_build_timeout(hostile, tmp_path):
    compiler.link_wrappers()  # built once, before the clock: it runs under the same bound
    done = perflab("compare", "--build-cmd-a", f"{hostile} ignore-term", "--program-a",
                   str(tmp_path / "a"), "--build-cmd-b", f"{hostile} outlive", "--program-b",
                   str(tmp_path / "b"), "--build-timeout", "1", "--setups", "1")  # fmt: skip
    assert "did not finish within 1 s (--build-timeout" in one_line(done)
    nothing_left(hostile)


@pytest.mark.parametrize("tool", long_beyond(["nm", "objdump"], {"nm"}))
def test_binutils_are_bounded_by_the_build_timeout(hostile, tmp_path, monkeypatch, tool):
    """nm and objdump read binaries a user gave; one that keeps them busy (here a tool that
    ignores SIGTERM) is killed at the build timeout with everything it started."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / tool).write_text(f"#!/bin/sh\nexec {hostile} ignore-term\n")
    (bin_dir / tool).chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    read = {"nm": lambda: binlayout.nm_fields("/bin/true"),
            "objdump": lambda: binlayout.disassembly("/bin/true", 0, 16)}[tool]  # fmt: skip
    with (
        supervisor.build_timeout(1),
        pytest.raises(PerflabError, match="did not finish within 1 s"),
    ):
        read()
    nothing_left(hostile)


def test_a_supervisor_serves_on_after_its_child_signalled_it(hostile):
    with supervisor.Supervisor() as sup:
        for what in ("term-parent", "usr2-parent", "stop-parent", "tstp-parent"):
            child = sup.start([hostile, what], fds=(None, None, None))
            assert child.wait(HANG_S) == 0
        assert sup.start(["true"], fds=(None, None, None)).wait(HANG_S) == 0
        assert not supervisor.stopped(sup.proc.pid)
    nothing_left(hostile)


@pytest.mark.long
def test_a_build_command_runs_bounded_and_captured(hostile, tmp_path):
    script = tmp_path / "say"
    script.write_text("#!/bin/sh\necho out; echo err >&2; exit 3\n")
    script.chmod(0o755)
    assert supervisor.run_bounded([str(script)]) == supervisor.Finished(3, "out\n", "err\n")
    flood = 3 * supervisor.OUTPUT_KEEP  # a runaway build's output: its last bytes are kept
    done = supervisor.run_bounded(["sh", "-c", f"head -c {flood} /dev/zero; echo last words"])
    said, _, kept = done.stdout.partition("\n")
    gone = flood + len("last words\n") - supervisor.OUTPUT_KEEP
    assert said == f"[perflab: {gone} bytes of output left out]" and kept.endswith("\0last words\n")
    assert len(kept) == supervisor.OUTPUT_KEEP
    with supervisor.build_timeout(1), pytest.raises(PerflabError, match="within 1 s"):
        supervisor.run_bounded([hostile, "ignore-term"])
    nothing_left(hostile)
