"""perflab profile on small pthread programs whose threads' behaviour is known by construction:
a spinner, a sleeper blocked on a mutex (a futex wait), a thread that returns at once, a fork.
Only relations that hold on any machine are asserted (who used more CPU, who was blocked), never
a wall-clock figure."""

import json
import os
import signal
import threading
import time

import numpy as np
import pytest

from perflab.cli import cli
from perflab.lab import profile
from perflab.lab.profile import sampling
from perflab.reports import exporters
from perflab.store import results
from perflab.system import proctasks, stracelog, taskstats
from tests.conftest import compile_children, wait_for

HAS_EXIT_RECORDS = taskstats.unavailable() is None

THREADS = r"""
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static volatile int stop;
static void *spinner(void *a)
{
    volatile unsigned long x = 0;
    pthread_setname_np(pthread_self(), a); /* by itself: a short thread may end before main */
    while (!stop)
        x++;
    return a;
}
static void *sleeper(void *a)
{
    pthread_setname_np(pthread_self(), a);
    pthread_mutex_lock(&lock); /* held by main: a futex wait */
    pthread_mutex_unlock(&lock);
    return a;
}
static void *brief(void *a)
{
    pthread_setname_np(pthread_self(), a);
    return a;
}
static pthread_t start(void *(*f)(void *), const char *name)
{
    pthread_t t;
    pthread_create(&t, 0, f, (void *)name);
    return t;
}
int main(int argc, char **argv)
{
    long ms = argc > 1 ? atol(argv[1]) : 200;
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
    pthread_mutex_lock(&lock);
    pthread_t s = start(spinner, "spinner"), b = start(sleeper, "sleeper");
    pthread_t q = start(brief, "brief");
    pthread_join(q, 0);
    nanosleep(&ts, 0);
    stop = 1;
    pthread_mutex_unlock(&lock);
    pthread_join(s, 0);
    pthread_join(b, 0);
    puts("done");
    return 3;
}
"""

FORKS = r"""
#include <sys/wait.h>
#include <unistd.h>
int main(void)
{
    pid_t pid = fork();
    if (pid == 0) {
        volatile unsigned long x = 0;
        for (unsigned long i = 0; i < 300000000UL; i++) x++;
        _exit(0);
    }
    waitpid(pid, 0, 0);
    return 0;
}
"""

BURSTS = r"""
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>
#include <time.h>
static void *burst(void *us)
{
    struct timespec t0, t;
    pthread_setname_np(pthread_self(), "burst");
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do clock_gettime(CLOCK_MONOTONIC, &t);
    while ((t.tv_sec - t0.tv_sec) * 1000000000L + t.tv_nsec - t0.tv_nsec < atol(us) * 1000L);
    return us;
}
int main(int argc, char **argv)
{
    for (int i = 0; i < atoi(argv[2]); i++) {
        pthread_t th;
        struct timespec gap = {0, 7000000};
        pthread_create(&th, 0, burst, argv[1]);
        pthread_join(th, 0);
        nanosleep(&gap, 0);
    }
    return 0;
}
"""

HANG = r"""
#include <unistd.h>
int main(void) { pause(); return 0; }
"""


@pytest.fixture(scope="module")
def programs(tmp_path_factory):
    return compile_children(
        tmp_path_factory.mktemp("profile"),
        {"threads": THREADS, "forks": FORKS, "hang": HANG, "bursts": BURSTS},
    )


def _by_comm(df):
    """Each thread's row by name, main's being the one whose tid is its pid: a thread read only
    before it named itself still carries main's name (seen as a user on one CPU)."""
    rows = {}
    for row in df.itertuples():
        if row.tid >= 0 and (row.comm not in rows or row.tid == row.pid):
            rows[row.comm] = row
    return rows


def test_spinner_uses_the_cpu_and_sleeper_waits(programs):
    df = profile.run([programs["threads"], "200"])
    meta = results.metadata(df)
    rows = _by_comm(df)
    assert {"threads", "spinner", "sleeper"} <= set(rows)
    spin, sleep = rows["spinner"], rows["sleeper"]
    assert spin.cpu_ns > 10 * sleep.cpu_ns
    assert sleep.blocked_ns > 10 * sleep.cpu_ns
    assert spin.utilisation > sleep.utilisation
    assert spin.ivcsw >= sleep.ivcsw and sleep.vcsw >= 1  # the mutex wait is a voluntary switch
    # lifetime splits into on-CPU (counted or pending), run-queue wait and blocked, none of
    # them negative; a thread that never switched voluntarily never blocked
    for r in (spin, sleep):
        assert r.cpu_ns + r.cpu_pending_ns + r.runq_ns + r.blocked_ns >= r.lifetime_ns
        assert min(r.cpu_ns, r.cpu_pending_ns, r.runq_ns, r.blocked_ns) >= 0
    for r in rows.values():
        assert r.vcsw > 0 or r.blocked_ns == 0, r
    assert meta["exit_code"] == 3 and meta["signal"] is None and not meta["timed_out"]
    assert 0 < meta["utilisation"] == meta["program_cpu_ns"] / meta["wall_ns"]


@pytest.mark.parametrize("exit_records", [False, True])
def test_every_cpu_nanosecond_is_attributed(programs, exit_records):
    """Threads read plus the reaped remainder add up to wait4's total (the brief thread, if no
    reading caught it, is inside the remainder)."""
    df = profile.run([programs["threads"], "50"], exit_records=exit_records)
    meta = results.metadata(df)
    total = meta["program_cpu_ns"]
    assert df["cpu_ns"].sum() == pytest.approx(total, abs=max(1e-3 * total, 10_000))
    rest = df[df["tid"] < 0]
    assert len(rest) == 1 and rest["comm"].item() == profile.BETWEEN
    brief = df[df["comm"] == "brief"]
    if len(brief):
        assert brief["lifetime_ns"].item() < _by_comm(df)["threads"].lifetime_ns


@pytest.mark.skipif(not HAS_EXIT_RECORDS, reason="taskstats needs CAP_NET_ADMIN")
def test_exit_records_see_the_thread_no_reading_can(programs):
    """A thread that returns at once lives microseconds: only its exit record shows it, with
    figures as of its exit."""
    df = profile.run([programs["threads"], "100"], interval=1)
    meta = results.metadata(df)
    assert meta["exit_records"].startswith("taskstats")
    rows = _by_comm(df)
    brief, main = rows["brief"], rows["threads"]
    assert brief.final and "exit record" in brief.source
    assert brief.lifetime_ns < rows["sleeper"].lifetime_ns < main.lifetime_ns
    assert brief.start_ns < rows["sleeper"].last_ns  # born before the sleeper ended
    assert rows["sleeper"].vcsw >= 1 and rows["spinner"].cpu_ns > 10 * rows["sleeper"].cpu_ns
    assert all(r.final for r in rows.values())


@pytest.mark.skipif(not HAS_EXIT_RECORDS, reason="taskstats needs CAP_NET_ADMIN")
def test_the_listener_reads_a_thread_of_ours_as_the_kernel_kept_it():
    """The core's client parses the kernel's struct: a thread of this process that sleeps
    twice is heard at its exit with our pid, our name (a thread inherits it), its sleeps and
    its own lifetime."""
    listener = taskstats.Listener()
    assert listener.open() is None
    try:
        began = time.monotonic_ns()
        sleeper = threading.Thread(target=lambda: [time.sleep(0.01) for _ in range(2)])
        sleeper.start()
        sleeper.join()
        wait_for(lambda: (listener.drain() or True)
                 and any(r.tid == sleeper.native_id for r in listener.records()),
                 "the sleeper's exit record", 10)  # fmt: skip
    finally:
        listener.close()
    (rec,) = [r for r in listener.records() if r.tid == sleeper.native_id]
    assert rec.tgid == os.getpid() and rec.ppid == os.getppid()
    with open("/proc/self/comm") as f:
        assert rec.comm == f.read().strip() and rec.vcsw >= 2
    assert 20_000 <= rec.etime_us <= (time.monotonic_ns() - began) // 1000
    assert began <= rec.exit_ns <= time.monotonic_ns()


def test_records_of_the_program_and_its_children_only():
    def rec(tgid, tid, ppid):
        return taskstats.Record(tgid, tid, ppid, "x", 1, 0, 0, 0, 0, 0, 0, 0)

    records = [rec(50, 51, 10), rec(60, 60, 50), rec(70, 70, 60), rec(80, 80, 10), rec(50, 50, 10)]
    assert [r.tid for r in taskstats.ours(records, 50)] == [51, 60, 70, 50]


def test_a_forked_child_is_followed_with_its_pid(programs):
    df = profile.run([programs["forks"]], interval=0.005)
    meta = results.metadata(df)
    root = df["pid"].iloc[0]
    child = df[(df["pid"] != root) & (df["tid"] >= 0)]
    assert len(child) == 1
    assert child["cpu_ns"].item() > 10 * df.loc[df["tid"] == root, "cpu_ns"].item()
    assert meta["exit_code"] == 0


def test_a_timeout_kills_the_program_and_keeps_what_was_read(programs):
    df = profile.run([programs["hang"]], timeout=0.2)
    meta = results.metadata(df)
    assert meta["timed_out"] and meta["signal"] == signal.SIGKILL and meta["exit_code"] is None
    assert (df["tid"] >= 0).sum() == 1


@pytest.mark.skipif(stracelog.find() is None, reason="strace is not installed")
def test_strace_times_each_threads_calls(programs):
    df = profile.run([programs["threads"], "200"], strace=True)
    calls = profile.syscalls(df)
    rows = _by_comm(df)
    sleeper = calls[calls["tid"] == rows["sleeper"].tid].set_index("syscall")
    main = calls[calls["tid"] == rows["threads"].tid].set_index("syscall")
    assert sleeper["total_ns"].idxmax() == "futex"
    # The 200 ms sleep it asked for (never shorter); not necessarily its longest call: on one
    # CPU the spinner can hold any call of main's past strace's exit stop.
    assert main.loc["clock_nanosleep", "total_ns"] >= 200e6
    assert sleeper.loc["futex", "total_ns"] > 10 * rows["sleeper"].cpu_ns
    assert rows["spinner"].cpu_ns > 10 * rows["sleeper"].cpu_ns
    assert (calls["calls"] >= 1).all() and (calls["max_ns"] <= calls["total_ns"]).all()
    table = profile.summarize_syscalls(df)
    assert set(table["comm"]) >= {"sleeper", "threads"}


def test_strace_log_with_interrupted_calls():
    lines = [
        "10 futex(0x1, FUTEX_WAIT_PRIVATE, 2, NULL <unfinished ...>",
        '11 read(3, "x", 1) = 1 <0.000100>',
        "10 <... futex resumed>) = 0 <0.250000>",
        "10 futex(0x1, FUTEX_WAKE_PRIVATE, 1) = 0 <0.000002>",
        "11 +++ exited with 0 +++",
        "11 read(3,  <unfinished ...>) = ?",
    ]
    t = stracelog.parse(lines).set_index(["tid", "syscall"])
    assert t.loc[(10, "futex"), "calls"] == 2
    assert t.loc[(10, "futex"), "total_ns"] == 250_002_000
    assert t.loc[(10, "futex"), "max_ns"] == 250_000_000
    assert t.loc[(11, "read"), "kind"] == "read/recv" and t.loc[(11, "read"), "calls"] == 1


def test_contract_summary_plot_and_file(programs, tmp_path):
    df = profile.run([programs["threads"], "30"])
    shown = profile.summarize(df)
    assert list(shown["tid"]) == list(df["tid"]) and "blocked_ms" in shown
    fig = profile.plot(df, tmp_path / "timeline.png")
    assert (tmp_path / "timeline.png").stat().st_size > 1000 and fig is not None
    back = results.load(results.save(df, tmp_path / "p.parquet"))
    assert results.metadata(back)["experiment"] == "profile"
    leader = profile.timeline(back).query("tid == pid")
    assert len(leader) >= 1 and leader["cpu_ns"].is_monotonic_increasing


def test_cli_keeps_the_exit_status_and_prints_json(programs, runner):
    out = runner.invoke(cli, ["profile", "--json", "--", programs["threads"], "20"])
    assert out.exit_code == 3, out.output
    doc = json.loads(out.stdout)
    assert doc["program"]["exit_code"] == 3
    assert {"spinner", "sleeper"} <= {t["comm"] for t in doc["threads"]}


@pytest.mark.parametrize(
    "args, words",
    [
        (["profile"], "Missing argument"),
        (["profile", "--", "/nonexistent/prog"], "no such file"),
        (["profile", "--", "no-such-command-xyz"], "command not found"),
        (["profile", "--interval", "0", "--", "true"], "interval"),
        (["profile", "--cpu", "99999", "--", "true"], "CPU"),
        (["profile", "-o", "x.txt", "--", "true"], "unknown output format"),
    ],
)
def test_bad_input_is_one_line(runner, args, words):
    out = runner.invoke(cli, args)
    assert out.exit_code not in (0, None)
    lines = [ln for ln in out.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error:") and words in lines[0], out.stderr


def test_progress_and_cpu_pinning(programs):
    seen = []
    cpu = os.sched_getaffinity(0)
    one = sorted(cpu)[-1]
    df = profile.run(
        [programs["threads"], "150"], cpus=[one], progress=lambda s, n: seen.append((s, n))
    )
    assert results.metadata(df)["cpus"] == [one]
    assert seen and all(n >= 1 for _, n in seen)
    assert [s for s, _ in seen] == sorted(s for s, _ in seen)
    assert os.sched_getaffinity(0) == cpu  # perflab's own affinity restored


def test_a_thread_seen_once_has_no_utilisation(programs):
    """Threads of 3 ms, read every 5 to 15 ms without exit records (as a user): some are seen
    in one reading, and their lifetime is not known to better than a reading; they once got
    lifetime_ns 1 and a utilisation in the millions of percent."""
    df = profile.run([programs["bursts"], "3000", "30"], exit_records=False)
    threads = df[df["tid"] >= 0]
    once = threads[threads["seen_once"]]
    assert len(once) and (once["readings"] == 1).all()
    assert once["utilisation"].isna().all()
    short = threads["lifetime_ns"] < results.metadata(df)["interval_s"] * 1e9
    assert threads.loc[short, "utilisation"].isna().all()
    # one thread's CPU over its life, never more than a CPU (the margin: a reading's instant)
    assert (threads["utilisation"].dropna() <= 1.5).all()
    text = exporters.TEXT.summary(profile.summary(df, results.metadata(df)))
    assert f"{len(once)} seen once" in text
    assert "seen_once" in text.splitlines()[text.splitlines().index("per thread (ms)") + 1]


def _read(sampler, now_ns, tid, start_ns, cpu_ns):
    """One reading of thread tid as _Sampler.sample takes it."""
    r = proctasks.Reading(100, tid, f"t{tid}", "S", 100, start_ns // proctasks.TICK_NS, 1, 0,
                          cpu_ns, 0, 1, 1, 0)  # fmt: skip
    key = (100, tid)
    sampler.last[key] = r
    sampler.first_ns.setdefault(key, now_ns)
    sampler.last_ns[key] = now_ns
    sampler.count[key] = sampler.count.get(key, 0) + 1
    sampler.timeline.append((now_ns, 100, tid, cpu_ns, 0, 1, None))


def test_utilisation_is_never_taken_over_less_than_a_reading():
    """Readings every 10 ms: the leader for 60 ms; a thread seen once, whose /proc start time
    (a clock tick) falls after that reading, so its life measures 0; one read twice 3 ms apart."""
    ms = 1_000_000
    tick = proctasks.TICK_NS
    sampler = sampling._Sampler(100, 0, 0)
    for at in range(10, 70, 10):
        _read(sampler, at * ms, 100, 0, at * ms // 2)
    _read(sampler, 33 * ms, 101, 33 * ms // tick * tick + tick, 3 * ms)
    _read(sampler, 45 * ms, 102, 42 * ms, 1 * ms)
    _read(sampler, 48 * ms, 102, 42 * ms, 2 * ms)
    sampler.running_ns = 60 * ms
    rows = sampling._thread_rows(sampler, 70 * ms, set(), interval_ns=10 * ms)
    by_tid = {r["tid"]: r for r in rows}
    leader, once, brief = by_tid[100], by_tid[101], by_tid[102]
    assert leader["utilisation"] == pytest.approx(0.5) and not leader["seen_once"]
    assert once["seen_once"] and np.isnan(once["utilisation"]) and once["lifetime_ns"] == 0
    assert not brief["seen_once"] and np.isnan(brief["utilisation"])
    assert brief["lifetime_ns"] < 10 * ms
