"""Ctrl-C and SIGTERM stop a batch of long runs between runs, keep what finished, exit 128+sig."""

import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pandas as pd
import psutil
import pytest
from conftest import compile_children, long_beyond, wait_for

from perflab.running import childruns, spawn
from perflab.store import results

SLOW = (
    "#include <time.h>\nint main(void) { struct timespec t = {0, 300000000}; "
    "nanosleep(&t, 0); return 0; }\n"
)


@pytest.fixture(scope="module")
def slow(tmp_path_factory) -> str:
    return compile_children(tmp_path_factory.mktemp("slow"), {"slow": SLOW})["slow"]


def _wait_for_third_run(pid: int, name: str) -> None:
    """Until a third child of that name has started: the preflight and one run have ended."""
    seen: set[int] = set()
    for _ in range(1200):
        kids = psutil.Process(pid).children(recursive=True)
        seen |= {k.pid for k in kids if _name(k) == name}
        if len(seen) >= 3:
            return
        time.sleep(0.05)
    pytest.fail("the sweep never started its third run")


def _name(p: psutil.Process) -> str:
    try:
        return p.name()
    except psutil.Error:
        return ""


# SIGINT and SIGTERM take one path (running/interrupt.py): the suite stops the batch by one and
# the preflight by the other (the one its default action once ended perflab by), the long step
# each by both.
@pytest.mark.parametrize("sig", long_beyond([signal.SIGINT, signal.SIGTERM], {signal.SIGINT}))
def test_a_signal_stops_the_sweep_within_its_batch(slow, tmp_path, sig):
    out = tmp_path / "r.parquet"
    # 600 runs of 0.3 s: one C batch of 512 runs would take 150 s to end on its own.
    cmd = [
        sys.executable,
        "-m",
        "perflab",
        "sweep",
        "env-size",
        "--max",
        "0",
        "--repeat",
        "600",
        "--no-rt",
        "-o",
        str(out),
        "--",
        slow,
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _wait_for_third_run(proc.pid, "slow")
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + sig, err
    assert "--resume" in err and "Traceback" not in err
    df = results.load(out)
    assert 0 < len(df) < 512
    assert (df["status"] == "ok").all()


def test_the_api_gets_the_finished_runs_of_a_stopped_batch(slow):
    import threading

    timer = threading.Timer(1.5, spawn.request_stop)
    timer.start()
    try:
        runs = spawn.run_env_sizes([slow], np.zeros(200, dtype=np.int64))
    finally:
        timer.cancel()
        spawn.clear_stop()
    assert 0 < len(runs) < 200
    assert (runs["status"] == 0).all()


@pytest.mark.long
def test_a_report_of_a_sweep_still_going_names_its_writer_and_no_resume(slow, tmp_path):
    out = tmp_path / "r.parquet"
    cmd = [sys.executable, "-m", "perflab", "sweep", "env-size", "--max", "0", "--repeat", "600",
           "--no-rt", "-o", str(out), "--", slow]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: list(tmp_path.glob("r.parquet.parts/chunk-*")), "the first chunk")
        # a batch is as many runs as take about a second (3 of these), not 512: rows reach
        # the disk, where a kill -9 cannot take them, and a report, as often as short runs'
        first = min(tmp_path.glob("r.parquet.parts/chunk-*"))
        assert 1 <= len(pd.read_parquet(first)) <= 12
        shown = subprocess.run([sys.executable, "-m", "perflab", "report", str(out)],
                               capture_output=True, text=True)  # fmt: skip
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=60)
    assert shown.returncode == 0, shown.stderr
    assert f"a run still going (pid {proc.pid} is writing it)" in shown.stdout, shown.stdout
    assert "--resume" not in shown.stdout


@pytest.mark.parametrize(
    ("longest_s", "flush_s", "runs"),
    [(0.0, 1, 512), (0.0005, 1, 512), (0.01, 1, 100), (0.3, 1, 3), (5.0, 1, 1), (0.3, 0, 512)],
)
def test_a_batch_takes_about_a_flush_whatever_a_run_takes(longest_s, flush_s, runs):
    assert childruns.runs_per_batch(longest_s, 512, flush_s) == runs


@pytest.mark.parametrize("sig", long_beyond([signal.SIGINT, signal.SIGTERM], {signal.SIGTERM}))
def test_a_signal_during_the_preflight_run_stops_alike(tmp_path, sig):
    """The unrecorded first run, before the sweep's own handlers: SIGTERM ended perflab by its
    default action there, with no line."""
    cmd = [sys.executable, "-m", "perflab", "sweep", "env-size", "--max", "1", "--no-rt",
           "-o", str(tmp_path / "p.parquet"), "--", shutil.which("sleep"), "60"]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_for(lambda: any(_name(k) == "sleep" for k in psutil.Process(proc.pid).children(True)),
             "the preflight run")  # fmt: skip
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + sig, err
    assert err.strip().splitlines()[-1] == "Error: interrupted before any run was recorded"
