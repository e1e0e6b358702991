"""--jobs: one child per CPU at a time, pinned, tagged, checked against a sequential slice."""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from conftest import wait_for

from perflab.cli import cli
from perflab.errors import PerflabError
from perflab.lab import compare, env_size
from perflab.lab.env_size import measure as env_measure
from perflab.running import lanes, spawn
from perflab.store import results
from perflab.system import machine

SRC = str(Path(lanes.__file__).resolve().parents[2])
TWO = machine.usable_cpus()[-2:]
needs_two = pytest.mark.skipif(len(TWO) < 2, reason="needs two usable CPUs")

# Each child writes where it ran and when, named by its padding length (one file per run).
WITNESS = (
    "import os, sys, time\n"
    "t0 = time.monotonic()\n"
    "time.sleep(0.25)\n"
    "cpus = sorted(os.sched_getaffinity(0))\n"
    "path = os.path.join(sys.argv[1], str(len(os.environ['A'])))\n"
    "open(path, 'w').write(f'{cpus[0]} {len(cpus)} {t0} {time.monotonic()}')\n"
)


@pytest.fixture(autouse=True)
def cache(tmp_path_factory, monkeypatch):
    """One build cache for the module, away from the user's."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.getbasetemp() / "cache"))


def _sysfs(root: Path, siblings: dict[int, str], name: str = "thread_siblings_list") -> Path:
    """A recorded /sys/devices/system/cpu: each CPU's topology file as the kernel writes it."""
    for cpu, text in siblings.items():
        topo = root / f"cpu{cpu}" / "topology"
        topo.mkdir(parents=True)
        (topo / name).write_text(text + "\n")
    return root


def test_smt_siblings_are_read_from_the_topology(tmp_path):
    # A 4-thread, 2-core Intel layout: thread n and n+2 share a core.
    root = _sysfs(tmp_path, {0: "0,2", 1: "1,3", 2: "0,2", 3: "1,3"})
    assert machine.core_siblings([0, 1], root) == []
    assert machine.core_siblings([0, 2], root) == [(0, 2)]
    assert machine.core_siblings([3, 0, 1, 2], root) == [(3, 1), (0, 2)]
    # Newer kernels name it core_cpus_list, with ranges (an AMD layout: n and n+1).
    amd = _sysfs(tmp_path / "amd", {0: "0-1", 1: "0-1", 2: "2-3"}, "core_cpus_list")
    assert machine.core_siblings([0, 1, 2], amd) == [(0, 1)]
    # This machine's shape: one thread per core, so nothing is refused.
    flat = _sysfs(tmp_path / "flat", {0: "0", 1: "1"})
    assert machine.core_siblings([0, 1], flat) == []


def test_siblings_are_refused_unless_allowed(tmp_path):
    root = _sysfs(tmp_path, {0: "0,2", 1: "1,3", 2: "0,2", 3: "1,3"})
    plan = env_size.EnvSizePlan(jobs=2, cpus=(0, 2))
    with pytest.raises(PerflabError, match=r"CPUs 0 and 2 are SMT siblings.*--allow-siblings"):
        plan.check_lanes(root)
    env_size.EnvSizePlan(jobs=2, cpus=(0, 2), allow_siblings=True).check_lanes(root)
    env_size.EnvSizePlan(jobs=2, cpus=(0, 1)).check_lanes(root)


def test_lane_cpus_follow_jobs_and_the_cpu_list():
    usable = machine.usable_cpus()
    assert lanes.lane_cpus(0, None) == tuple(usable)
    one = lanes.lane_cpus(1, None)  # the quietest now (the rule: tests/test_cpu_choice.py)
    assert len(one) == 1 and one[0] in usable
    assert lanes.lane_cpus(0, [usable[0]]) == (usable[0],)
    with pytest.raises(PerflabError, match=r"--jobs 2 runs 2 children at once.*lists 1 CPU:"):
        lanes.lane_cpus(2, [usable[0]])
    with pytest.raises(PerflabError, match=rf"--jobs {len(usable) + 1}: only {len(usable)}"):
        lanes.lane_cpus(len(usable) + 1, None)


@needs_two
def test_parallel_batch_pins_each_child_and_runs_two_at_once(tmp_path):
    (tmp_path / "w.py").write_text(WITNESS)
    sizes = np.arange(1, 9, dtype=np.int64)
    argv = (sys.executable, str(tmp_path / "w.py"), str(tmp_path))
    opts = spawn.ParallelOptions(cpus=tuple(TWO), timeout=60)
    out = spawn.run_batch([argv], np.zeros(sizes.size), sizes, "A", {}, opts)
    assert len(out) == sizes.size and (out["status"] == 0).all()
    assert list(out["env_size"]) == list(sizes)  # record i is run i, whichever lane ran it
    seen = {s: (tmp_path / str(s)).read_text().split() for s in sizes}
    for rec in out:
        cpu, ncpus, _, _ = seen[int(rec["env_size"])]
        assert (int(cpu), int(ncpus)) == (int(rec["cpu"]), 1)  # pinned to the CPU it names
    assert set(out["cpu"]) == set(TWO)
    spans = [(float(v[2]), float(v[3])) for v in seen.values()]
    at_once = max(sum(a <= t < b for a, b in spans) for t, _ in spans)
    assert at_once == 2  # two lanes: never one child alone all along, never three


@needs_two
def test_parallel_sweep_tags_rows_and_checks_itself(tmp_path, children):
    out = tmp_path / "p.parquet"
    df = env_size.sweep(max_size=31, repeat=12, jobs=2, cpus=TWO, reference=0.3, rt=False,
                        output=out)  # fmt: skip
    assert len(df) == 32 * 12 and not df[["env_size", "rep"]].duplicated().any()
    assert set(df["cpu"]) == set(TWO) and set(df["parallel"]) == {True, False}
    planned = lanes.reference_mask(32 * 12, 0.3, 0)
    assert (~df["parallel"]).sum() == planned.sum()  # the seeded slice, and only it
    saved = results.load(out)
    meta = results.metadata(saved)
    assert meta["complete"] is True and meta["jobs"] == 2 and meta["lane_cpus"] == TWO
    verdict = meta["interference"]
    assert [r["cpu"] for r in verdict["cpus"]] == TWO
    assert sum(r["sequential_runs"] for r in verdict["cpus"]) == planned.sum()
    per_cpu = env_size.per_cpu_windows(saved)
    assert list(per_cpu["cpu"]) == [*map(str, TWO), "all"]
    assert list(per_cpu["runs"]) == [*(df["cpu"].value_counts()[c] for c in TWO), len(df)]


@needs_two
def test_the_verdict_is_in_the_files_one_final_write(tmp_path, monkeypatch, children):
    out = tmp_path / "v.parquet"
    writes, real = [], results.save

    def spy(df, path, *args, **kwargs):
        if Path(path) == out:
            writes.append(results.metadata(df))
        return real(df, path, *args, **kwargs)

    monkeypatch.setattr(results, "save", spy)
    df = env_size.sweep(max_size=31, repeat=12, jobs=2, cpus=TWO, reference=0.3, rt=False,
                        output=out)  # fmt: skip
    assert len(writes) == 1 and writes[0]["complete"] is True
    saved = results.metadata(results.load(out))["interference"]
    assert saved == writes[0]["interference"] == results.metadata(df)["interference"]
    counted = sum(r["parallel_runs"] + r["sequential_runs"] for r in saved["cpus"])
    assert counted == (df["status"] == "ok").sum() > 0


def _relative(par_scale: float, par_noise: float, seed: int = 3) -> pd.DataFrame:
    """Runs at 64 sizes, 2 CPUs, with parallel ones scaled and spread as asked."""
    rng = np.random.default_rng(seed)
    n = 64 * 80
    size = np.tile(np.arange(64), 80)
    par = rng.random(n) < 0.5
    base = 1000 + 50 * (size % 16 == 0)  # windows the normalisation must cancel
    noise = rng.normal(0, 10, n) * np.where(par, par_noise, 1.0)
    ticks = base * np.where(par, par_scale, 1) + noise
    return pd.DataFrame({"env_size": size, "cpu": np.arange(n) % 2, "parallel": par,
                         "status": "ok", "ticks": ticks})  # fmt: skip


def test_interference_says_slower_and_noisier_beyond_the_tolerance():
    same = lanes.interference(_relative(1.0, 1.0), "ticks", ["env_size"])
    assert same["verdict"] == "ok" and same["any"] == ["ok"]
    assert 0.99 < same["median_ratio"] < 1.01
    slower = lanes.interference(_relative(1.05, 1.0), "ticks", ["env_size"])
    assert slower["verdict"] == "slower" and 1.04 < slower["median_ratio"] < 1.06
    assert all(r["verdict"] == "slower" for r in slower["cpus"])
    noisy = lanes.interference(_relative(1.0, 2.0), "ticks", ["env_size"])
    assert noisy["verdict"] == "noisier" and noisy["iqr_ratio"] > 1.5
    lines = lanes.describe(noisy)
    assert "tolerance: median +2%, IQR +25%" in lines[0] and "WARNING" in lines[-1]
    few = lanes.interference(_relative(1.0, 1.0).iloc[:30], "ticks", ["env_size"])
    assert few["verdict"] == "too few reference runs"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--jobs", str(len(machine.usable_cpus()) + 1)], "usable CPUs"),
        (["--jobs", "2", "--cpu", str(machine.usable_cpus()[0])], "lists 1 CPU"),
        (["--jobs", "0", "--reference", "1.5"], "--reference must be at least 0 and below 1"),
        (["--jobs", "2", "--reference", "x"], "'x' is not a valid float"),
    ],
)
def test_bad_jobs_are_one_line(tmp_path, args, message):
    out = tmp_path / "x.parquet"
    res = CliRunner().invoke(cli, ["sweep", "env-size", "--max", "3", *args, "-o", str(out)])
    assert res.exit_code != 0 and message in res.output and "Traceback" not in res.output
    assert not out.exists()


@needs_two
def test_cli_reports_each_cpu_and_the_verdict(tmp_path):
    out = tmp_path / "c.parquet"
    cpus = machine.format_cpu_list(TWO)
    args = ["sweep", "env-size", "--max", "15", "--repeat", "20", "--no-rt", "--jobs", "0",
            "--cpu", cpus, "--reference", "0.3", "-o", str(out)]  # fmt: skip
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 0, res.output
    assert "per CPU (all: pooled)" in res.output
    assert "parallel vs sequential reference" in res.output
    png = tmp_path / "p.png"
    as_json = [*args[:-2], "--json", "-o", str(tmp_path / "j.parquet"), "--plot", str(png)]
    doc = json.loads(CliRunner().invoke(cli, as_json).stdout)
    assert png.stat().st_size > 0
    assert [r["cpu"] for r in doc["per_cpu"]] == [*map(str, TWO), "all"]
    assert doc["interference"]["cpus"][0]["cpu"] == TWO[0]


@needs_two
def test_ctrl_c_then_resume_measures_each_pair_once(tmp_path, children, monkeypatch):
    out = tmp_path / "r.parquet"
    cpus = machine.format_cpu_list(TWO)
    top = 2999 if children is None else 199  # made up: chunks of 2 x 64 runs, as many rows
    args = ["--max", str(top), "--repeat", "2", "--no-rt", "--jobs", "2", "--cpu", cpus]
    if children is None:
        proc = subprocess.Popen(
            [sys.executable, "-m", "perflab", "sweep", "env-size", *args, "-o", str(out)],
            env={**os.environ, "PYTHONPATH": SRC},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        parts = Path(str(out) + ".parts")
        wait_for(lambda: any(parts.glob("chunk-*.parquet")), "the sweep's first chunk")
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 130
    else:  # Ctrl-C in the second chunk
        monkeypatch.setattr(env_measure, "CHUNK_RUNS", 64)
        children.signal_after = (200, signal.SIGINT)
        stopped = CliRunner().invoke(cli, ["sweep", "env-size", *args, "-o", str(out)])
        assert stopped.exit_code == 130
        err = stopped.output
    assert f"--resume {out}" in err and "Traceback" not in err
    first = results.load(out)
    planned = 2 * (top + 1)
    assert results.metadata(first)["complete"] is False and 0 < len(first) < planned
    assert children is None or len(first) == 200

    # The file the stop left judges the runs it holds; the resumed one, both sessions' runs.
    def judged(df):
        return sum(r["parallel_runs"] + r["sequential_runs"]
                   for r in results.metadata(df)["interference"]["cpus"])  # fmt: skip

    assert judged(first) == (first["status"] == "ok").sum()
    assert not first[["env_size", "rep"]].duplicated().any()
    done = CliRunner().invoke(cli, ["sweep", "env-size", *args, "--resume", str(out)])
    assert done.exit_code == 0, done.output
    df = results.load(out)
    assert len(df) == planned and set(zip(df["env_size"], df["rep"], strict=True)) == {
        (s, r) for s in range(top + 1) for r in range(2)
    }
    assert set(df["cpu"]) == set(TWO) and results.metadata(df)["complete"] is True
    assert judged(df) == (df["status"] == "ok").sum()


@needs_two
def test_link_order_with_jobs_tags_rows_and_reports_the_check(runner, tmp_path, children):
    out = tmp_path / "lo.parquet"
    args = ["sweep", "link-order", "--permutations", "3", "--repeat", "20", "--no-rt",
            "--jobs", "2", "--cpu", machine.format_cpu_list(TWO), "--reference", "0.4"]  # fmt: skip
    res = runner.invoke(cli, [*args, "-o", str(out), "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["runs"] == 60 and [r["cpu"] for r in doc["interference"]["cpus"]] == TWO
    df = results.load(out)
    assert set(df["cpu"]) == set(TWO) and not df.duplicated(["perm", "rep"]).any()
    assert (~df["parallel"]).sum() == lanes.reference_mask(60, 0.4, 0).sum()


@needs_two
def test_compare_with_jobs_keeps_every_pair_once(tmp_path, children):
    side = [sys.executable, "-c", "pass"]
    a, b = compare.program_side("A", side), compare.program_side("B", side)
    df = compare.compare(a, b, setups=2, repeat=10, jobs=2, cpus=TWO, rt=False)
    assert len(df) == 40 and not df.duplicated(["setup", "rep", "side"]).any()
    assert set(df["cpu"]) == set(TWO) and "interference" in results.metadata(df)


def test_a_sequential_plan_is_stored_as_before_jobs_existed():
    assert not {"jobs", "reference", "allow_siblings"} & set(env_size.EnvSizePlan().params())
    stored = lanes.with_cpus(env_size.EnvSizePlan(jobs=2), [0, 1]).params()
    assert (stored["jobs"], stored["reference"], stored["allow_siblings"]) == (2, 0.05, False)


def test_the_reference_slice_costs_a_tenth_of_the_parallel_time_on_any_cpu_count():
    for count in (2, 4, 16, 64, 256):
        share = lanes.default_reference(count)
        # one at a time, share x runs; side by side, (1 - share) x runs / lanes
        assert share * count / (1 - share) == pytest.approx(0.1, rel=0.06)
    assert lanes.default_reference(1) == 0.05  # capped: 10 % of the runs is too many
    asked = lanes.with_cpus(env_size.EnvSizePlan(jobs=4, reference=0.3), [0, 1, 2, 3])
    assert asked.reference == 0.3 and asked.params()["reference"] == 0.3
    assert lanes.with_cpus(env_size.EnvSizePlan(jobs=4), [0, 1, 2, 3]).reference == 0.025


@pytest.mark.parametrize("helper", [True, False], ids=["helper", "in-process"])
def test_queued_batches_run_in_order_and_a_stop_ends_them_all(helper):
    spawner = spawn.spawner() if helper else spawn.direct()
    if helper and not isinstance(spawner, spawn.HelperSpawner):
        pytest.skip("the spawner helper is not built here")
    true, sleep = (spawn.check_program(p) for p in ("true", "sleep"))
    with spawner.pipeline() as pipe:
        for k in range(3):  # a request arriving while one runs must not stop it
            pipe.submit(*spawn.request([(true,)], np.zeros(k + 1), np.full(k + 1, k)))
        got = [pipe.collect() for _ in range(3)]
    assert [g["env_size"].tolist() for g in got] == [[0], [1, 1], [2, 2, 2]]
    assert all((g["status"] == 0).all() for g in got)
    with spawner.pipeline() as pipe:
        pipe.submit(*spawn.request([(sleep, "0.2")], np.zeros(50)))
        pipe.submit(*spawn.request([(true,)], np.zeros(5)))
        spawner.request_stop()
        cut, behind = pipe.collect(), pipe.collect()
    assert len(cut) < 50 and len(behind) == 0  # the queued batch starts nothing after a stop
    assert len(spawn.run_batch([(true,)], np.zeros(2), using=spawner)) == 2  # the pipeline's
    spawner.request_stop()
    assert len(spawn.run_batch([(true,)], np.zeros(2), using=spawner)) == 0  # until cleared
    spawn.clear_stop()
    assert len(spawn.run_batch([(true,)], np.zeros(2), using=spawner)) == 2


def test_a_forked_childs_stop_is_its_own():
    """A fork (perflab.warmup's callables, a user's multiprocessing) asks its own pipe to stop:
    its parent's next in-process batch still runs."""
    direct = spawn.direct()
    true = spawn.check_program("true")
    assert len(spawn.run_batch([(true,)], np.zeros(1), using=direct)) == 1  # the pipe exists
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child asks for a stop and exits at once
        direct.request_stop()
        os._exit(0)
    assert os.waitpid(pid, 0)[1] == 0
    assert len(spawn.run_batch([(true,)], np.zeros(2), using=direct)) == 2


def test_a_signal_in_a_sweep_leaves_no_stop_for_the_next_in_process_batch(monkeypatch):
    """Python's handler writes a byte to the wakeup pipe, which the in-process batches read
    as a stop, even before an in-process spawner is made: the sweep's end forgets it."""
    from perflab.running.interrupt import Interrupt

    monkeypatch.delitem(spawn._spawners, "in-process", raising=False)
    with Interrupt() as stop:
        signal.raise_signal(signal.SIGINT)
    assert stop.hit
    true = spawn.check_program("true")
    assert len(spawn.run_batch([(true,)], np.zeros(2), using=spawn.direct())) == 2
