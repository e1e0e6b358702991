"""Campaigns on a real Dask LocalCluster on loopback, two worker processes standing in for hosts."""

import functools
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from conftest import wait_for

import perflab
from perflab.cli import cli
from perflab.lab import clocks
from perflab.running import campaigns
from perflab.store import results
from perflab.system import machine

distributed = pytest.importorskip("distributed")
dask = pytest.importorskip("dask")

POINTS = [{"method": m} for m in ("rdtscp", "CLOCK_MONOTONIC", "rdtsc")]
HOSTS = ("host-a", "host-b")


def _worker(address: str, name: str, scratch: Path) -> subprocess.Popen:
    """A `dask worker` process labelled name, standing in for a host."""
    env = {**os.environ, "PYTHONPATH": str(Path(perflab.__file__).parents[1])}
    return subprocess.Popen(
        [sys.executable, "-m", "distributed.cli.dask_worker", address, "--name", name,
         "--nthreads", "2", "--no-nanny", "--no-dashboard", "--local-directory", str(scratch)],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A scheduler and two `dask worker` processes labelled host-a and host-b, their scratch
    space in the test's own directory (killed workers leave it behind)."""
    scratch = tmp_path_factory.mktemp("dask")
    with dask.config.set({"temporary-directory": str(scratch)}):
        lc = distributed.LocalCluster(
            n_workers=0, processes=False, protocol="tcp", host="127.0.0.1", dashboard_address=":0"
        )
        workers = {name: _worker(lc.scheduler_address, name, scratch) for name in HOSTS}
        with distributed.Client(lc) as client:
            client.wait_for_workers(len(HOSTS), timeout=60)
        yield lc, scratch
        for proc in workers.values():
            proc.kill()
            proc.wait()
        lc.close()


@pytest.mark.long
def test_rows_from_both_hosts_never_overlapping(cluster):
    lc, _ = cluster
    measure = functools.partial(clocks.cost_of, samples=20_000)
    out = campaigns.run(measure, POINTS * 3, address=lc.scheduler_address)
    df = out.frame
    assert set(df["host"]) == {"host-a", "host-b"} and not out.missing and not out.refused
    for _, rows in df.groupby("host"):
        spans = rows[["start_ns", "end_ns"]].drop_duplicates().sort_values("start_ns").to_numpy()
        assert (spans[1:, 0] >= spans[:-1, 1]).all()


def test_schema_matches_a_local_run(cluster):
    lc, _ = cluster
    measure = functools.partial(clocks.cost_of, samples=50)
    remote = campaigns.run(measure, POINTS[:1], address=lc.scheduler_address).frame
    local = campaigns.run(measure, POINTS[:1]).frame
    assert list(remote.columns) == list(local.columns)
    assert (remote.dtypes.to_numpy() == local.dtypes.to_numpy()).all()


def test_unknown_host_is_refused(cluster):
    lc, _ = cluster
    with pytest.raises(perflab.PerflabError, match="no worker for host"):
        campaigns.run(clocks.cost_of, POINTS, address=lc.scheduler_address, hosts=["host-z"])


@pytest.mark.long
def test_cli_fleet_clocks_then_report_hosts(cluster, runner, tmp_path):
    lc, _ = cluster
    out, png = tmp_path / "fleet.parquet", tmp_path / "hosts.png"
    res = runner.invoke(
        cli,
        [
            "clocks",
            "--samples",
            "200",
            "--clock",
            "rdtscp",
            "--clock",
            "rdtsc",
            "--cluster",
            lc.scheduler_address,
            "-o",
            str(out),
        ],
    )
    assert res.exit_code == 0, res.output
    assert "host-a" in res.output and "host-b" in res.output
    res = runner.invoke(
        cli, ["report", "hosts", str(out), "--value", "ns", "--json", "--plot", str(png)]
    )
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    assert {h["host"] for h in doc["hosts"]} == {"host-a", "host-b"}
    assert all(h["n"] == 400 for h in doc["hosts"]) and png.stat().st_size > 1000


@pytest.mark.long
def test_clocks_campaign_is_journaled_and_resumes_like_the_other_verbs(cluster, runner, tmp_path):
    lc, _ = cluster
    out = tmp_path / "clocks.parquet"
    args = ["clocks", "--samples", "50", "--clock", "rdtsc", "--cluster", lc.scheduler_address]
    res = runner.invoke(cli, [*args, "-o", str(out)])
    assert res.exit_code == 0, res.output
    meta = results.metadata(results.load(out))
    assert meta["complete"] is True and meta["experiment"] == "clocks campaign"
    assert meta["unit"] == "ns" and meta["params"]["methods"] == ["rdtsc"]
    res = runner.invoke(cli, [*args, "--resume", str(out), "--json"])
    assert res.exit_code == 0, res.output
    df = results.load(out)
    assert len(df) == 100 and not df.duplicated(["host", "method", "rep"]).any()
    res = runner.invoke(cli, [*args[:2], "60", *args[3:], "--resume", str(out)])
    assert (
        res.exit_code != 0 and "different parameters (samples: recorded 50, asked 60)" in res.output
    )
    res = runner.invoke(cli, ["clocks", "--samples", "50", "--resume", str(out)])
    assert res.exit_code != 0 and "only a --cluster run is journaled" in res.output


def test_unreachable_scheduler_is_one_line_and_leaves_no_file(runner, tmp_path):
    res = runner.invoke(cli, ["clocks", "--cluster", "tcp://127.0.0.1:9"])
    assert res.exit_code != 0 and "cannot reach the Dask scheduler" in res.output
    out = tmp_path / "never.parquet"
    res = runner.invoke(cli, ["clocks", "--cluster", "tcp://127.0.0.1:9", "-o", str(out)])
    assert res.exit_code != 0 and "cannot reach the Dask scheduler" in res.output
    assert list(tmp_path.iterdir()) == []  # no 0-row result, no journal, no lock
    res = runner.invoke(cli, ["clocks", "--cluster", "tcp://127.0.0.1:9", "-o", str(out)])
    assert "cannot reach the Dask scheduler" in res.output  # not "an unfinished run"


@pytest.mark.long
def test_env_size_sweep_on_two_hosts(cluster, runner, tmp_path):
    lc, _ = cluster
    out = tmp_path / "fleet-env.parquet"
    args = [
        "sweep",
        "env-size",
        "--max",
        "8192",
        "--step",
        "128",
        "--repeat",
        "2",
        "--no-rt",
        "--cluster",
        lc.scheduler_address,
        "-o",
        str(out),
        "--json",
    ]
    res = runner.invoke(cli, args)
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert {h["host"]: h["runs"] for h in doc["hosts"]} == {"host-a": 130, "host-b": 130}
    df = results.load(out)
    assert not df.duplicated(["host", "env_size", "rep"]).any()
    assert results.metadata(df)["complete"] is True


def test_fauxplat_on_two_hosts(cluster, runner):
    lc, _ = cluster
    args = [
        "run",
        "fauxplat",
        "--loops",
        "5",
        "--repeat",
        "2",
        "--perturb",
        f"cpu@{machine.usable_cpus()[-1]}",
        "--cluster",
        lc.scheduler_address,
        "--json",
    ]
    res = runner.invoke(cli, args)
    assert res.exit_code == 0, res.output
    hosts = json.loads(res.stdout)["hosts"]
    assert {h["host"] for h in hosts} == {"host-a", "host-b"}
    assert all(h["n"] == 2 and h["median"] > 0 for h in hosts)


@pytest.mark.long
def test_killed_worker_is_reported_and_costs_only_its_points(cluster):
    """A third worker of its own, killed after two points, so the tests in any order keep
    host-a and host-b."""
    lc, scratch = cluster
    doomed = _worker(lc.scheduler_address, "host-c", scratch)
    with distributed.Client(lc.scheduler_address) as client:
        client.wait_for_workers(len(HOSTS) + 1, timeout=60)
    done = []

    def kill_c_after_two():
        done.append(1)
        if len(done) == 2:
            doomed.send_signal(signal.SIGKILL)

    measure = functools.partial(clocks.cost_of, samples=20_000)
    try:
        out = campaigns.run(
            measure, POINTS * 4, address=lc.scheduler_address, hosts=["host-a", "host-c"],
            on_point=kill_c_after_two,
        )  # fmt: skip
    finally:
        doomed.kill()
        doomed.wait()
        with distributed.Client(lc.scheduler_address) as client:
            workers = client.scheduler_info()["workers"].values
            wait_for(lambda: all(w.get("name") != "host-c" for w in workers()), "host-c gone")
    measured = out.frame.groupby("host")["method"].count() // 20_000
    assert measured["host-a"] == len(POINTS) * 4
    lost = pd.DataFrame(out.missing)
    assert set(lost["host"]) == {"host-c"}
    assert measured.get("host-c", 0) + len(lost) == len(POINTS) * 4
    assert lost["reason"].str.contains("died|lost").all()


def test_cpu_is_checked_on_every_host_not_on_the_driver(cluster, runner, tmp_path):
    lc, _ = cluster
    cpu = str(os.cpu_count() + 64)  # no host has it; the driver does not decide that
    args = ["sweep", "env-size", "--max", "0", "--repeat", "1", "--no-rt", "--cpu", cpu]
    res = runner.invoke(
        cli, [*args, "--cluster", lc.scheduler_address, "-o", str(tmp_path / "f.parquet")]
    )
    assert res.exit_code == 1 and "Traceback" not in res.output
    line = res.output.strip().splitlines()[-1]
    assert line.startswith("Error: no host can measure: host-a: CPU " + cpu)
    assert "affinity mask:" in line and "online CPUs:" in line
    local = runner.invoke(cli, [*args, "-o", str(tmp_path / "g.parquet")])
    assert local.exit_code != 0 and f"CPU {cpu} does not exist or is offline" in local.output
