"""perflab profile --samples and --workload: perf script output recorded on this machine parsed
to known counts, and real runs of the built-in lock contention, asserting only what holds on any
machine (which functions the threads run, who spins, who sleeps), never a wall-clock figure."""

import json
import os
from pathlib import Path

import pytest

from perflab.cli import cli
from perflab.lab import contention, profile
from perflab.store import results
from perflab.system import perfsamples

DATA = Path(__file__).resolve().parent / "data"
# perf record -F 499 -e cpu-clock of a C++ program (root: kernel samples too), and
# perf record -F 999 of the mutex workload as user nobody (perf_event_paranoid=2: cpu-clock:u).
CPP = (DATA / "perf-script-cpp.txt").read_text()
MUTEX = (DATA / "perf-script-mutex-user.txt").read_text()
SMALL = {"iterations": 20_000, "work": 2_000}


def _count(text: str, pid: int, tid: int) -> int:
    return sum(f" {pid}/{tid} " in line for line in text.splitlines())


def test_every_recorded_sample_is_counted_once_with_its_names():
    raw = perfsamples.parse(CPP)
    assert raw["samples"].sum() == len(CPP.splitlines()) == 60
    by = raw.groupby(["tid", "comm"])["samples"].sum()
    assert by[(1786, "spin worker")] == _count(CPP, 1784, 1786)  # a name with a space
    assert by[(1784, "cpp")] == _count(CPP, 1784, 1784)
    syms = set(raw["symbol"])
    assert {"Box<long>::spin", "Box<unsigned int>::spin"} <= syms  # templates hold spaces
    kernel = raw[raw["dso"] == "[kernel.kallsyms]"]
    assert len(kernel) == 1 and kernel["samples"].item() == CPP.count("[kernel.kallsyms]")
    assert (raw["period"] == raw["samples"] * 2_004_008).all()  # -F 499: 2 ms of CPU each
    assert set(raw["event"]) == {"cpu-clock"}


def test_user_only_samples_give_shares_and_cpu_time():
    t = perfsamples.table(perfsamples.parse(MUTEX))
    assert set(t.columns) == set(perfsamples.COLUMNS)
    assert t["samples"].sum() == 96
    assert perfsamples.event_used(perfsamples.parse(MUTEX)) == "cpu-clock:u"
    shares = t.groupby("tid")["share"].sum()
    assert shares.to_numpy() == pytest.approx(1.0)
    assert (t["est_cpu_ns"] == t["samples"] * 1_001_001).all()  # a clock period is ns
    assert set(t["symbol"]) == {"shared_work"} and set(t["comm"]) == {
        "worker-0",
        "worker-1",
        "worker-2",
    }


def test_a_cycles_profile_shares_the_measured_cpu_by_period():
    lines = MUTEX.splitlines()[:4]
    text = "\n".join(
        ln.replace("cpu-clock:u", "cycles:u").replace("1001001", str(1000 * (i + 1)))
        for i, ln in enumerate(lines)
    )
    raw = perfsamples.parse(text)
    tid = raw["tid"].iloc[0]
    cpu = {(2243, t): 8e6 for t in raw["tid"]}
    t = perfsamples.table(raw, cpu)
    mine = t[t["tid"] == tid]
    assert mine["est_cpu_ns"].sum() == pytest.approx(8e6)  # all of the thread's measured CPU


def test_lines_that_are_not_samples_are_skipped():
    text = "\n".join(["", "garbage", "  perf: warning", MUTEX.splitlines()[0], "x 1/2 y"])
    assert perfsamples.parse(text)["samples"].sum() == 1
    assert perfsamples.table(perfsamples.parse("")).empty


def _profiled(df) -> bool:
    """The program's main thread read and its CPU counted: its workers, done in a few ms, are
    rows only where exit records (root) or a reading caught them, and one read before it named
    itself carries main's name (seen as a user on one CPU)."""
    main = (df["tid"] == df["pid"]) & (df["comm"] == "contention")
    return main.sum() == 1 and df["cpu_ns"].sum() > 0


def test_without_perf_it_says_so_and_still_profiles(monkeypatch, tmp_path):
    argv = contention.command("mutex", 2, iterations=2_000, work=100)
    monkeypatch.setenv("PATH", str(tmp_path))  # no perf on it
    df = profile.run(argv, sample_hz=999)
    meta = results.metadata(df)
    assert meta["samples_note"].startswith("not supported here (perf is not installed")
    assert meta["samples"] is None and perfsamples.frame(df) is None
    assert meta["exit_code"] == 0 and _profiled(df)


def test_a_perf_that_refuses_is_quoted_and_the_profile_still_taken(tmp_path, monkeypatch):
    """A perf that exits at once (as under perf_event_paranoid=3 or seccomp) is named with its
    own error line; the program still runs and is profiled."""
    argv = contention.command("spin", 2, iterations=2_000, work=100)
    fake = tmp_path / "perf"
    fake.write_text("#!/bin/sh\necho 'Error: perf_event_open: Permission denied' >&2\nexit 255\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    df = profile.run(argv, sample_hz=999)
    meta = results.metadata(df)
    assert meta["samples_note"] == (
        "not supported here (perf record exited 255: Error: perf_event_open: Permission denied)"
    )
    assert meta["exit_code"] == 0 and _profiled(df)


def _sampled(kind: str, threads: int = 2) -> tuple:
    df = profile.run(contention.command(kind, threads, **SMALL), sample_hz=999)
    meta = results.metadata(df)
    if meta["samples_note"].startswith("not supported here"):
        pytest.skip(meta["samples_note"])
    return df, meta, perfsamples.frame(df)


def test_spinning_waiters_show_in_spin_lock_and_sleeping_ones_do_not():
    spin_df, spin_meta, spin = _sampled("spin")
    mutex_df, _, mutex = _sampled("mutex")
    assert spin_meta["samples_event"] in {"cycles", "cycles:u", "cpu-clock", "cpu-clock:u"}
    workers = spin[spin["comm"].str.startswith("worker-")]
    per_symbol = workers.groupby("symbol")["samples"].sum()
    assert per_symbol["shared_work"] > 0 and per_symbol["spin_lock"] > 0
    m_workers = mutex[mutex["comm"].str.startswith("worker-")]
    assert "spin_lock" not in set(m_workers["symbol"]) and "shared_work" in set(m_workers["symbol"])
    # the mutex's waiters sleep in futex: voluntary switches; the spinners never sleep
    rows = mutex_df[mutex_df["comm"].str.startswith("worker-")]
    assert rows["vcsw"].sum() >= 1
    # every thread sampled is one of the program's, and its shares add up to one
    for df, table in ((spin_df, spin), (mutex_df, mutex)):
        assert set(table["tid"]) <= set(df["tid"])
        assert table.groupby("tid")["share"].sum().to_numpy() == pytest.approx(1.0)


def test_sampled_cpu_time_agrees_with_the_measured():
    df, meta, table = _sampled("spin")
    if not meta["samples_event"].startswith("cpu-clock"):
        pytest.skip("the period of a cycles event is not ns")
    period_ns = 1e9 / meta["samples_hz"]
    for row in df[df["comm"].str.startswith("worker-")].itertuples():
        sampled = table.loc[table["tid"] == row.tid, "est_cpu_ns"].sum()
        # a sample every period of the thread's CPU (here within a few %; the tolerance is for a
        # loaded machine: the clock event's hrtimer and the scheduler's runtime differ a little)
        assert 0.5 * row.cpu_ns - 2 * period_ns <= sampled <= 1.5 * row.cpu_ns + 2 * period_ns


def test_samples_survive_a_file(tmp_path):
    df, _, table = _sampled("mutex")
    back = results.load(results.save(df, tmp_path / "p.parquet"))
    again = perfsamples.frame(back)
    assert again is not None and again["samples"].sum() == table["samples"].sum()


@pytest.mark.long
def test_cli_profiles_the_builtin_workload_with_samples(runner):
    out = runner.invoke(cli, ["profile", "--samples", "--workload", "spin", "--threads", "2"])
    assert out.exit_code == 0, out.output
    assert "CPU samples per thread and symbol" in out.stderr  # stdout is the program's
    if "not supported here" not in out.stderr.split("CPU samples per thread and symbol")[1]:
        assert "spin_lock" in out.stderr and "shared_work" in out.stderr
    doc = json.loads(
        runner.invoke(
            cli, ["profile", "--json", "--samples", "--sample-hz", "499", "--workload", "mutex"]
        ).stdout
    )
    assert doc["samples_note"] and {t["comm"] for t in doc["threads"]} >= {"worker-0", "worker-1"}


@pytest.mark.parametrize(
    "args, words",
    [
        (["profile", "--workload", "mutex", "--", "true"], "not both"),
        (["profile", "--threads", "2", "--", "true"], "--threads is for --workload"),
        (["profile", "--workload", "lock"], "'lock' is not one of"),
        (["profile", "--samples", "--sample-hz", "0", "--", "true"], "--sample-hz"),
        (["profile", "--workload", "spin", "--threads", "0"], "--threads"),
    ],
)
def test_bad_input_is_one_line(runner, args, words):
    out = runner.invoke(cli, args)
    assert out.exit_code not in (0, None)
    lines = [ln for ln in out.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error:") and words in lines[0], out.stderr


def test_the_workload_refuses_bad_parameters_in_one_line():
    with pytest.raises(Exception, match="unknown workload"):
        contention.command("rwlock", 2)
    with pytest.raises(Exception, match="threads must be"):
        contention.command("spin", 0)
    with pytest.raises(Exception, match="sampling frequency"):
        perfsamples.plan(0)
