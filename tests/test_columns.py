"""The column audit: children of known behaviour, run by the engine every verb uses, each
column checked against what the child did (lower bounds and generous ranges: no clocks)."""

import os
import resource
import signal
import subprocess
import time

import numpy as np
import pytest
from conftest import compile_children

from perflab.running import spawn
from perflab.system import machine, provenance

MIB = 1 << 20
TOUCH = r"""
#include <stdlib.h>
#include <string.h>
int main(int argc, char **argv)
{
    size_t n = (size_t)atoi(argv[1]) << 20;
    volatile char *p = malloc(n);
    for (size_t i = 0; i < n; i += 4096) p[i] = 1;
    return p[n / 2] - 1;
}
"""
SPIN = r"""
#include <time.h>
#include "perflab_probe.h"
static double cpu(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}
int main(void)
{
    volatile unsigned long x = 0;
    PERFLAB_PROBE_BEGIN();
    while (cpu() < 0.2)
        for (int i = 0; i < 1000000; i++) x += i;
    PERFLAB_PROBE_END();
    return 0;
}
"""
CHILDREN = {
    "touch": TOUCH,
    "spin": SPIN,
    "sleep": "#include <time.h>\nint main(void) { struct timespec t = {0, 2500000}; "
    "for (int i = 0; i < 20; i++) nanosleep(&t, 0); return 0; }\n",
    "status": "#include <stdlib.h>\nint main(int c, char **v) { return atoi(v[1]); }\n",
    "die": "#include <signal.h>\n#include <stdlib.h>\n"
    "int main(int c, char **v) { raise(atoi(v[1])); return 0; }\n",
    "talk": '#include <stdio.h>\nint main(void) { fputs("to stdout\\n", stdout); '
    'fputs("to stderr\\n", stderr); return 0; }\n',
    "orphan": "#include <stdio.h>\n#include <unistd.h>\nint main(int c, char **v) {\n"
    "  pid_t p = fork(); if (p == 0) { sleep(100); return 0; }\n"
    '  FILE *f = fopen(v[1], "w"); fprintf(f, "%d", p); fclose(f); return 0; }\n',
}
ENGINES = ["spawner", "in-process"]


@pytest.fixture(scope="module")
def kids(tmp_path_factory) -> dict[str, str]:
    """Each child compiled once, static where the libc allows, so its own peak is small."""
    return compile_children(tmp_path_factory.mktemp("audit"), CHILDREN, "1", static=True)


def engine(name: str) -> spawn.DirectSpawner:
    return spawn.spawner() if name == "spawner" else spawn.direct()


def rows(argvs, using, **opts):
    """One batch, one program per argv, as tidy rows."""
    runs = spawn.run_batch(
        argvs, np.arange(len(argvs)), options=spawn.SpawnOptions(**opts), using=using
    )
    assert len(runs) == len(argvs)
    return spawn.tidy(runs)


def test_the_spawner_is_what_verbs_use():
    assert isinstance(spawn.spawner(), spawn.HelperSpawner)


@pytest.mark.parametrize("mib", [0, 16, 64])
def test_maxrss_is_the_childs_own_peak(kids, mib):
    """The child's peak is the MiB it touched over its own base, not perflab's: the helper's
    floor carried into it (0.9 MiB on one Xeon, 2 MiB on another) is a small fraction of this
    Python process's peak, which a child forked from it would report."""
    base = int(rows([[kids["touch"], "0"]], spawn.spawner())["maxrss_kb"][0])
    df = rows([[kids["touch"], str(mib)]], spawn.spawner())
    floor = spawn.spawner().floor_kb
    ours = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    assert floor is not None and 0 < floor < ours / 8 and base < ours / 8, (floor, base, ours)
    peak = int(df["maxrss_kb"][0])
    assert mib * 1024 <= peak <= mib * 1024 + base + 1024, (peak, base)  # a MiB of slack
    assert df["minflt"][0] >= mib * MIB // os.sysconf("SC_PAGE_SIZE")
    assert df["majflt"][0] <= df["minflt"][0]


def test_maxrss_is_empty_when_it_cannot_be_the_childs(kids):
    df = rows([[kids["touch"], "8"]], spawn.direct())
    assert df["maxrss_kb"].isna().all()
    assert df["minflt"][0] >= 8 * MIB // os.sysconf("SC_PAGE_SIZE")


@pytest.mark.parametrize("which", ENGINES)
def test_spin_ticks_user_time_and_wall_agree(kids, which):
    df = rows([[kids["spin"]]], engine(which))
    r = df.iloc[0]
    cpu = r["utime_ns"] + r["stime_ns"]
    assert cpu >= 0.2e9  # the child spun until its own CPU clock said 0.2 s
    assert r["stime_ns"] < r["utime_ns"] / 4
    assert r["wall_ns"] >= cpu * 0.99
    assert r["outer_ticks"] >= r["ticks"] > 0
    hz = provenance.metadata().get("tsc_hz")
    if hz:
        assert r["ticks"] / hz >= 0.19  # in-child ticks cover the CPU time spent in the region
        assert r["outer_ticks"] / hz >= r["wall_ns"] * 0.9e-9


def test_a_competing_task_shows_as_involuntary_switches(kids):
    cpu = machine.usable_cpus()[-1]
    hog = subprocess.Popen(["taskset", "-c", str(cpu), "sh", "-c", "while :; do :; done"])
    try:
        df = rows([[kids["spin"]]], spawn.spawner(), cpus=(cpu,))
    finally:
        hog.kill()
        hog.wait()
    assert df["nivcsw"][0] >= 1
    assert df["utime_ns"][0] + df["stime_ns"][0] >= 0.2e9


@pytest.mark.parametrize("which", ENGINES)
def test_twenty_sleeps_are_wall_time_and_voluntary_switches(kids, which):
    r = rows([[kids["sleep"]]], engine(which)).iloc[0]
    assert r["wall_ns"] >= 50_000_000
    assert r["nvcsw"] >= 20  # one per sleep: more than any load preempts a child this idle
    assert r["utime_ns"] + r["stime_ns"] < r["wall_ns"] / 2
    assert np.isnan(r["ticks"])  # no probe, no in-child ticks


@pytest.mark.parametrize("which", ENGINES)
def test_every_exit_status(kids, which):
    df = rows([[kids["status"], str(i)] for i in range(256)], engine(which))
    assert df["exit_code"].tolist() == list(range(256))
    assert (df["signal"] == 0).all()
    assert df["status"].tolist() == ["ok"] + ["exit"] * 255


@pytest.mark.parametrize("which", ENGINES)
def test_death_by_signal(kids, which):
    sigs = [signal.SIGSEGV, signal.SIGABRT, signal.SIGTERM, signal.SIGKILL, signal.SIGUSR1]
    df = rows([[kids["die"], str(int(s))] for s in sigs], engine(which))
    assert df["signal"].tolist() == [int(s) for s in sigs]
    assert (df["exit_code"] == -1).all()
    assert (df["status"] == "crash").all()


def test_exec_failure_has_its_errno(tmp_path):
    script = tmp_path / "noexec"
    script.write_text("")
    script.chmod(0o644)
    df = rows([[str(script)]], spawn.spawner())
    assert df["status"][0] == "exec_failed" and df["child_errno"][0] == 13  # EACCES


@pytest.mark.parametrize("which", ENGINES)
def test_stdout_and_stderr_go_where_asked(kids, which, tmp_path, capfd):
    out, err = tmp_path / "out", tmp_path / "err"
    with open(out, "w") as fo, open(err, "w") as fe:
        rows([[kids["talk"]]], engine(which), stdout=fo.fileno(), stderr=fe.fileno())
    assert out.read_text() == "to stdout\n" and err.read_text() == "to stderr\n"
    with open(os.devnull, "w") as null:
        rows([[kids["talk"]]], engine(which), stdout=null.fileno(), stderr=null.fileno())
    rows([[kids["talk"]]], engine(which))  # none given: perflab's own fds at the time
    captured = capfd.readouterr()
    assert captured.out == "to stdout\n" and captured.err == "to stderr\n"


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


@pytest.mark.parametrize("which", ENGINES)
def test_grandchildren_left_running_are_killed_and_reported(kids, which, tmp_path):
    pidfile = tmp_path / "pid"
    df = rows([[kids["orphan"], str(pidfile)]], engine(which))
    assert df["strays"][0]
    pid = int(pidfile.read_text())
    for _ in range(200):
        if _gone(pid):
            break
        time.sleep(0.05)
    assert _gone(pid)
    assert not rows([[kids["sleep"]]], engine(which))["strays"][0]
