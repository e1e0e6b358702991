"""Pinned threads, placements, hogs and the threads verbs, measured for real on this machine."""

import contextlib
import errno
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import psutil
import pytest
from click.testing import CliRunner
from conftest import own_children

import perflab
from perflab.cli import cli
from perflab.core.bindings import ffi, lib
from perflab.errors import PerflabError
from perflab.lab import threads
from perflab.lab.threads import thread_count
from perflab.system import machine, pmu

LOOPS = 60
ONLINE = machine.usable_cpus()
C0 = str(ONLINE[0])  # a CPU this process may use, whatever its affinity mask
ABSENT = str(max(machine.online_cpus()) + 1)
# As the post, the workers get a high priority: SCHED_RR (under perflab's watchdog) keeps the
# other tenants of this shared machine off their CPUs, where `nice` cannot cross autogroups.
RT = machine.realtime_allowed()
# perflab in a child process, from the same source tree as this test run.
ENV = {**os.environ, "PYTHONPATH": str(Path(perflab.__file__).parents[1])}
two_cpus = pytest.mark.skipif(len(ONLINE) < 2, reason="needs two usable CPUs")


def makespan(df):
    return int(df["end_ns"].max() - df["release_ns"].min())


def checked(cpus, loops=LOOPS):
    """One run, with the invariant every run must keep: CPU time never exceeds wall x threads."""
    df = threads.run_threads(cpus, loops, rt=RT)
    assert (df["cpu_ns"] <= df["wall_ns"] * 1.001 + 100_000).all()
    assert df["cpu_ns"].sum() <= makespan(df) * len(df) * 1.001 + 100_000
    return df


def ratios(cpus, reps=4):
    """Median over interleaved 1-thread/2-thread pairs (neighbours share the host's mood) of:
    CPU ratio, wall ratio, and the 2-thread makespan over the 2 threads' summed CPU time
    (~0.5 when they ran side by side, ~1 when they took turns, whatever the vCPU's speed)."""
    rows = []
    for _ in range(reps):
        one, two = checked(cpus[:1]), checked(cpus)
        rows.append(
            (
                two["cpu_ns"].sum() / one["cpu_ns"].sum(),
                makespan(two) / makespan(one),
                makespan(two) / two["cpu_ns"].sum(),
            )
        )
    return np.median(np.array(rows), axis=0), two


@two_cpus
def test_two_cpus_take_twice_the_cpu_time_in_the_same_wall_time(alone):
    with alone():
        (cpu, wall, overlap), two = ratios(ONLINE[:2], reps=8)
        assert list(two["cpu_end"]) == ONLINE[:2]
        # Up to ~2.6x here: this guest's two vCPUs slow each other down on the host.
        assert 1.6 < cpu < 3.0
        assert 0.7 < wall < 1.8
        assert 0.4 < overlap < 0.75


def test_two_threads_on_one_cpu_take_twice_the_wall_time(alone):
    with alone():
        (cpu, wall, overlap), two = ratios([ONLINE[0], ONLINE[0]])
        assert set(two["cpu_start"]) == {ONLINE[0]} and set(two["cpu_end"]) == {ONLINE[0]}
        assert 1.5 < wall < 3.0
        assert 1.6 < cpu < 3.0
        assert 0.85 < overlap < 1.3


def test_loop_kernel_computes_the_posts_sum():
    df = threads.run_threads([None], 1)
    n = threads.LOOP_FACTOR
    result = ffi.new("struct perflab_thread_result[]", 1)
    spec = ffi.new("struct perflab_thread_spec[]", 1)
    spec[0].kernel, spec[0].cpu, spec[0].loops = lib.PERFLAB_KERNEL_LOOP, -1, 1
    assert lib.perflab_run_threads(spec, 1, result) == 0
    assert result[0].checksum == (1 + n * (n - 1) // 2) % 2**64
    assert df["ticks"].iloc[0] > 0 and df["retries"].iloc[0] == 0


def test_stream_and_spin_kernels_run():
    stream = threads.run_threads([ONLINE[0]], 2, kernel="stream", size=4096)
    spin = threads.run_threads([ONLINE[0]], 2, kernel="spin")
    assert stream["cpu_ns"].iloc[0] > 0
    assert spin["retries"].iloc[0] == 0  # one thread never loses a compare-and-swap


def test_offline_cpu_refused_before_any_thread_starts():
    bad = int(ABSENT)
    spec = ffi.new("struct perflab_thread_spec[]", 2)
    for s, cpu in zip(spec, (ONLINE[0], bad), strict=True):
        s.kernel, s.cpu, s.loops = lib.PERFLAB_KERNEL_LOOP, cpu, 1
    out = ffi.new("struct perflab_thread_result[]", 2)
    assert lib.perflab_run_threads(spec, 2, out) == -errno.EINVAL
    assert out[0].wall_ns == 0
    with pytest.raises(PerflabError, match="online CPUs"):
        threads.run_threads([bad], 1)


@pytest.mark.parametrize(
    "args",
    [
        ["run", "core-vs-ht", "-p", C0, "-p", ABSENT],
        ["run", "fauxplat", "--cpu", ABSENT],
        ["sweep", "threads", "--perturb", f"cache@{ABSENT}"],
    ],
)
def test_cli_refuses_an_offline_cpu_in_one_line(args):
    result = CliRunner().invoke(cli, args)
    assert result.exit_code != 0
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and f"CPU {ABSENT} " in lines[0] and "online CPUs" in lines[0]
    assert "Traceback" not in result.output


def test_more_threads_than_cpus_needs_a_flag():
    n = len(ONLINE) + 1
    result = CliRunner().invoke(cli, ["sweep", "threads", "--max", str(n), "--loops", "3"])
    assert result.exit_code != 0 and "--oversubscribe" in result.output
    df = threads.thread_count.run(n, "loop", loops=n, repeat=1, oversubscribe=True)
    assert sorted(df["threads"].unique()) == list(range(1, n + 1))


def test_bad_perturbation_refused():
    for text in ("cpu", "disk@0", f"cpu@{max(ONLINE) + 1}"):
        with pytest.raises(PerflabError):
            threads.Perturbation.parse(text)


# ---- topology -------------------------------------------------------------------------------

POST_LSCPU = "\n".join(
    f"{c},{c % 12},{c % 2},{c % 2},,{c % 12},{c % 12},{c % 12},{c % 2}" for c in range(24)
)


def lscpu_frame(text):
    """`lscpu -p` as a frame, its columns named by its last comment line (CPU,Core,...,L3)."""
    names = ["CPU", "Core", "Socket", "Node"]
    rows = []
    for line in text.splitlines():
        if line.startswith("# CPU,"):
            names = line[2:].split(",")
        elif line and not line.startswith("#"):
            rows.append(dict(zip(names, line.split(","), strict=False)))
    frame = pd.DataFrame(rows).drop(columns=[""], errors="ignore")
    frame = frame.rename(columns={"CPU": "cpu", "Core": "core", "Socket": "socket", "Node": "node"})
    return frame.apply(pd.to_numeric, errors="coerce")


def test_placements_of_the_posts_machine():
    by_name = {p.name: p for p in threads.placements(lscpu_frame(POST_LSCPU))}
    assert by_name["hyper-threads"].cpus == (0, 12)
    assert by_name["two sockets"].cpus == (0, 1)
    assert by_name["two cores"].cpus == (0, 2)
    assert all(p.available for p in by_name.values())


def test_placements_here_say_what_is_missing():
    topo = machine.topology()
    by_name = {p.name: p for p in threads.placements()}
    smt = any("," in s or "-" in s for s in topo["siblings"])
    assert by_name["hyper-threads"].available == smt
    if not smt:
        assert "no SMT" in by_name["hyper-threads"].label
    if topo["socket"].nunique() == 1:
        assert not by_name["two sockets"].available
        assert "1 socket" in by_name["two sockets"].label


@pytest.mark.skipif(shutil.which("lscpu") is None, reason="no lscpu")
def test_topology_agrees_with_lscpu():
    text = subprocess.run(["lscpu", "-p"], capture_output=True, text=True, check=True).stdout
    theirs = lscpu_frame(text).set_index("cpu").sort_index()
    ours = machine.topology().set_index("cpu").sort_index()
    common = [c for c in theirs.columns if c in ours.columns and theirs[c].notna().all()]
    assert {"core", "socket", "node"} <= set(common)
    assert list(theirs.index) == list(ours.index)
    assert (theirs[common] == ours[common]).all().all(), (theirs[common], ours[common])


# ---- hogs -------------------------------------------------------------------------------------


def children():
    return [c for c in own_children() if c.status() != "zombie"]


@contextlib.contextmanager
def rt_refusal_allowed():
    """Where real-time is refused the rt hog warns (once) and runs as a plain hog: let it."""
    with warnings.catch_warnings():
        if not RT:
            warnings.filterwarnings("ignore", "the rt@", threads.PerflabWarning)
        yield


def test_hogs_run_pinned_and_are_gone_after_the_block():
    cpu = ONLINE[-1]
    plan = [threads.Perturbation(k, cpu) for k in threads.HOGS]
    with rt_refusal_allowed(), threads.perturbed(plan) as pids:
        procs = [psutil.Process(p) for p in pids]
        assert all(p.cpu_affinity() == [cpu] for p in procs)
        if RT:
            assert os.sched_getscheduler(pids[2]) == os.SCHED_FIFO
    assert not any(psutil.pid_exists(p) and psutil.Process(p).ppid() == os.getpid() for p in pids)
    assert children() == []


def test_a_refused_rt_hog_is_stopped_even_when_its_warning_raises(no_rt_prefix):
    """With warnings as errors the refusal raises inside perturbed(): the hog must not run on."""
    code = (
        "import warnings, psutil\n"
        "from perflab import threads\n"
        "warnings.simplefilter('error')\n"
        "try:\n"
        f"    with threads.perturbed([threads.Perturbation('rt', {ONLINE[0]})]):\n"
        "        pass\n"
        "except threads.PerflabWarning:\n"
        "    print('refused')\n"
        "alive = [c for c in psutil.Process().children() if c.status() != 'zombie']\n"
        "print(len(alive))\n"
    )
    done = _perflab_python(code, prefix=no_rt_prefix)
    assert done.stdout.split() == ["refused", "0"], done.stderr


def test_hogs_are_gone_after_an_error_and_ctrl_c():
    started = []
    with (
        pytest.raises(PerflabError),
        threads.perturbed(
            [threads.Perturbation("cpu", ONLINE[0]), threads.Perturbation("cpu", 999)]
        ) as pids,
    ):
        started.extend(pids)
    assert children() == []
    with (
        pytest.raises(KeyboardInterrupt),
        threads.perturbed([threads.Perturbation("cache", ONLINE[0])]) as pids,
    ):
        started.extend(pids)
        assert len(children()) == 1
        raise KeyboardInterrupt
    assert children() == []


def test_cli_leaves_no_hog_even_when_the_run_fails(monkeypatch):
    result = CliRunner().invoke(
        cli, ["run", "core-vs-ht", "-l", "5", "-p", C0, "--perturb", f"cpu@{C0}", "--json"]
    )
    assert result.exit_code == 0, result.output
    assert children() == []

    def broken(*args, **kwargs):
        raise PerflabError("injected failure")

    monkeypatch.setattr(threads, "run_threads", broken)
    result = CliRunner().invoke(
        cli, ["run", "fauxplat", "-l", "5", "--repeat", "1", "--perturb", f"rt@{C0}"]
    )
    assert result.exit_code == 1 and "injected failure" in result.output
    assert children() == []


# ---- the verbs ------------------------------------------------------------------------------


def test_core_vs_ht_prints_the_posts_lines():
    result = CliRunner().invoke(cli, ["run", "core-vs-ht", "-l", "5", "-p", C0])
    assert result.exit_code == 0, result.output
    lines = [line for line in result.output.splitlines() if line.startswith("ran ")]
    assert len(lines) == 2
    assert lines[0].startswith("ran 1 x 5 loops(100000), cpu time ")
    assert lines[1].startswith("ran 2 x 5 loops(100000), cpu time ")
    assert "elapsed time" in lines[1] and lines[1].endswith("(ms)")


def test_core_vs_ht_matrix_json_and_plot(tmp_path):
    out, png = tmp_path / "cvh.parquet", tmp_path / "cvh.png"
    args = ["run", "core-vs-ht", "-l", "5", "--json", "-o", str(out), "--plot", str(png)]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    names = [p["placement"] for p in doc["placements"]]
    assert names == ["scheduler", "same cpu", "hyper-threads", "two cores", "two sockets"]
    assert png.stat().st_size > 0 and out.exists()


def test_sweep_threads_json(tmp_path):
    n = min(2, len(ONLINE))
    args = ["sweep", "threads", "--max", str(n), "--kernel", "spin", "-l", "4", "--repeat", "1"]
    result = CliRunner().invoke(cli, [*args, "--json", "--plot", str(tmp_path / "s.png")])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    rows = doc["scaling"]
    assert [r["threads"] for r in rows] == list(range(1, n + 1))
    assert rows[0]["speedup"] == 1.0 and rows[0]["cas_retries"] == 0
    for r in rows:
        assert 0 < r["utilisation"] <= r["threads"] * 1.01
    if not pmu.hardware_counters():
        assert rows[0]["ipc"] is None
        assert doc["counters"]["instructions"].startswith("not supported here")


def test_fauxplat_json_reports_change_vs_alone():
    args = ["run", "fauxplat", "-l", "5", "--repeat", "2", "--perturb", f"cpu@{C0}", "--json"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)["fauxplat"]
    assert [r["condition"] for r in rows] == ["alone", f"cpu@{C0}"]
    assert rows[0]["change_pct"] == 0.0 and rows[0]["median_per_cpu_s"] > 0
    assert rows[0]["result"] == "baseline" and rows[1]["result"] != "baseline"
    assert children() == []


def test_fauxplat_index_is_loops_per_cpu_second():
    df = threads.fauxplat.run(loops=5, repeat=1, cpu=ONLINE[0], perturb=[])
    row = df.iloc[0]
    assert row["fauxplat_per_s"] == pytest.approx(5 / (row["cpu_ns"] / 1e9))


def test_rt_watchdog_restores_the_limit():
    import resource

    before = resource.getrlimit(resource.RLIMIT_RTTIME)
    with threads.rt_watchdog(2.0):
        assert resource.getrlimit(resource.RLIMIT_RTTIME)[0] == 2_000_000
    assert resource.getrlimit(resource.RLIMIT_RTTIME) == before
    if RT:
        df = threads.run_threads([ONLINE[0]], 2, rt=True)
        assert df["sched_status"].iloc[0] == "ok"
    else:
        with pytest.warns(threads.PerflabWarning, match="real-time"):
            df = threads.run_threads([ONLINE[0]], 2, rt=True)
        assert df["sched_status"].iloc[0] == "EPERM"


@pytest.mark.long
def test_hogs_die_with_a_killed_perflab():
    """PR_SET_PDEATHSIG: a SIGKILLed perflab cannot run its finally, its hogs die anyway."""
    argv = [sys.executable, "-m", "perflab", "run", "core-vs-ht", "-l", "100000", "-p", C0]
    with subprocess.Popen(
        [*argv, "--perturb", f"cpu@{C0}"], env=ENV, stderr=subprocess.PIPE
    ) as proc:
        try:
            hogs = []
            while not hogs and proc.poll() is None:  # a loaded machine may take a while
                hogs = psutil.Process(proc.pid).children()
                time.sleep(0.05)
            assert hogs, f"perflab started no hog: {proc.stderr.read().decode()}"
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
            _, alive = psutil.wait_procs(hogs, timeout=5)
            assert alive == []
        finally:
            proc.kill()
            proc.wait()


def _perflab_python(code, prefix=(), timeout=60):
    argv = [*prefix, sys.executable, "-c", code]
    return subprocess.run(argv, env=ENV, capture_output=True, text=True, timeout=timeout)


def _perflab(*args, prefix=(), timeout=60):
    argv = [*prefix, sys.executable, "-m", "perflab", *args]
    return subprocess.run(argv, env=ENV, capture_output=True, text=True, timeout=timeout)


def test_priority_without_permission_warns_once_and_goes_on(no_rt_prefix):
    cpu = str(ONLINE[0])
    args = ["run", "core-vs-ht", "-l", "5", "-p", cpu, "-p", cpu, "--rt", "--nice", "-5"]
    done = _perflab(*args, "--perturb", f"rt@{cpu}", prefix=no_rt_prefix)
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("ran ") == 2
    warnings = [line for line in done.stderr.splitlines() if "warning" in line]
    assert len(warnings) == 2  # one for the workers, one for the rt hog: each said once
    assert all("--rt" in w or "root" in w for w in warnings)


@pytest.mark.skipif(not RT, reason="real-time priority is refused here")
@pytest.mark.long
def test_watchdog_stops_a_runaway_real_time_worker_not_perflab():
    """Past --rt-limit the worker drops to normal priority and finishes; perflab says so in one
    line and exits 1 (not killed by SIGXCPU); the process's SIGXCPU handler is gone after."""
    argv = [sys.executable, "-m", "perflab", "sweep", "threads", "--kernel", "loop", "--max", "1"]
    argv += ["-l", "400", "--repeat", "1", "--rt", "--rt-limit", "0.1"]  # 0.6 s: 6x the limit
    done = subprocess.run(argv, env=ENV, capture_output=True, text=True, timeout=300, check=False)
    errors = [x for x in done.stderr.splitlines() if x.startswith("Error:")]
    assert done.returncode == 1 and len(errors) == 1, done.stderr
    assert "exceeded --rt-limit 0.1 s" in errors[0] and "Traceback" not in done.stderr
    code = (
        "import signal\nfrom perflab import threads\nfrom perflab.errors import PerflabError\n"
        f"try:\n    threads.run_threads([{ONLINE[0]}], 400, rt=True, rt_limit=0.1)\n"
        "except PerflabError as e:\n    print(e)\n"
        "caught = [x for x in open('/proc/self/status') if x.startswith('SigCgt:')][0]\n"
        "print(not int(caught.split()[1], 16) >> (signal.SIGXCPU - 1) & 1)"
    )
    done = subprocess.run([sys.executable, "-c", code], env=ENV, capture_output=True, text=True,
                          timeout=300, check=False)  # fmt: skip
    assert done.returncode == 0 and done.stdout.splitlines()[-1] == "True", done.stderr


def test_rt_hog_is_bounded_by_rlimit_rttime():
    with rt_refusal_allowed(), threads.perturbed([threads.Perturbation("rt", ONLINE[0])]) as pids:
        limit = psutil.Process(pids[0]).rlimit(psutil.RLIMIT_RTTIME)
    assert 0 < limit[0] <= 1_000_000 and limit[1] == limit[0]


def test_cpu_per_loop_is_relative_to_one_thread():
    """Two threads that each burn the CPU one thread needed for all the work cost 2x per loop."""
    row = dict(rep=0, release_ns=0, instructions=None, cycles=None, context_switches=0)
    runs = [
        dict(row, threads=1, loops=100, end_ns=1000, cpu_ns=1000, retries=0),
        dict(row, threads=2, loops=50, end_ns=1000, cpu_ns=1000, retries=30),
        dict(row, threads=2, loops=50, end_ns=1000, cpu_ns=1000, retries=30),
    ]
    table = thread_count.summarize(pd.DataFrame(runs))
    assert list(table["cpu_per_loop_x"]) == [1.0, 2.0]
    assert list(table["utilisation"]) == [1.0, 2.0] and list(table["cas_retries"]) == [0, 60]
