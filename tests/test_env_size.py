"""The env-size sweep: real runs, failures kept, kill -9 and resume, the CLI, the window finder."""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import fakespawner
import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from conftest import wait_for

import perflab
from perflab.cli import cli
from perflab.lab import env_size
from perflab.lab.env_size import measure as env_measure
from perflab.lab.env_size import windows
from perflab.running import spawn
from perflab.store import results
from perflab.system import compiler

# Where this perflab is imported from (src/ in a checkout, site-packages when installed).
SRC = str(Path(perflab.__file__).resolve().parents[1])

# Behaviour chosen by the padding length: 0 probe, 1 crash, 2 hang, 3 garbage record, 4 exit 3.
MIXED = r"""
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "perflab_probe.h"
int main(void)
{
    const char *a = getenv("A");
    switch (a ? strlen(a) % 5 : 0) {
    case 1: raise(SIGSEGV); break;
    case 2: for (;;) pause();
    case 3: write(PERFLAB_PROBE_FD, "garbage!", 8); return 0;
    case 4: return 3;
    }
    PERFLAB_PROBE_BEGIN();
    PERFLAB_PROBE_END();
    return 0;
}
"""


@pytest.fixture(scope="module")
def mixed(tmp_path_factory) -> str:
    d = tmp_path_factory.mktemp("mixed")
    (d / "mixed.c").write_text(MIXED)
    subprocess.run(
        [
            *compiler.compiler(),
            "-O0",
            "-Wall",
            "-I",
            str(compiler.WORKLOADS),
            str(d / "mixed.c"),
            "-o",
            d / "mixed",
        ],
        check=True,
    )
    return str(d / "mixed")


@pytest.fixture(autouse=True)
def cache(tmp_path_factory, monkeypatch):
    """One build cache for the module, away from the user's."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.getbasetemp() / "cache"))


def test_failures_are_recorded_and_the_sweep_goes_on(mixed, tmp_path):
    out = tmp_path / "mixed.parquet"
    df = env_size.sweep([mixed], max_size=9, repeat=2, timeout=0.1, rt=False, output=out)
    by_size = df.groupby("env_size")["status"].agg(set)
    expect = {0: "ok", 1: "crash", 2: "timeout", 3: "bad_probe", 4: "exit"}
    assert {s: by_size[s] for s in range(10)} == {s: {expect[s % 5]} for s in range(10)}
    assert len(df) == 20 and df[["env_size", "rep"]].duplicated().sum() == 0
    summary = env_size.summarize(df)
    assert list(summary["failed"]) == [0, 2, 2, 2, 2] * 2
    assert list(summary["n"]) == [2, 0, 0, 0, 0] * 2
    saved = results.load(out)
    assert len(saved) == 20 and results.metadata(saved)["complete"] is True


def test_builtin_loop_is_cached_and_measured(tmp_path):
    first = windows.build_loop()
    mtime = first.path.stat().st_mtime_ns
    assert windows.build_loop().path.stat().st_mtime_ns == mtime
    assert windows.build_loop(opt="1").path != first.path
    df = env_size.sweep(min_size=100, max_size=103, repeat=3, order="sequential", rt=False)
    assert (df["status"] == "ok").all() and df["ticks"].notna().all()
    assert list(df["env_size"][:4]) == [100, 101, 102, 103]
    meta = results.metadata(df)
    assert meta["aslr"] == "off" and meta["workload_digest"] == first.digest
    assert meta["cflags"].startswith("-O0 -Wall -Werror")


def test_random_order_is_seeded():
    a = env_size.EnvSizePlan(max_size=50, repeat=3, seed=7).pairs()
    b = env_size.EnvSizePlan(max_size=50, repeat=3, seed=7).pairs()
    c = env_size.EnvSizePlan(max_size=50, repeat=3, seed=8).pairs()
    assert np.array_equal(a[0], b[0]) and not np.array_equal(a[0], c[0])
    assert sorted(zip(*a, strict=True)) == [(s, r) for s in range(51) for r in range(3)]


def test_missing_compiler_is_one_line(monkeypatch):
    monkeypatch.setenv("CC", "no-such-cc")
    with pytest.raises(Exception, match=r"no C compiler .*apt install gcc"):
        windows.build_loop()


def _cli(*args, **kw):
    return subprocess.Popen(
        [sys.executable, "-m", "perflab", "sweep", "env-size", *args],
        env={**os.environ, "PYTHONPATH": SRC},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kw,
    )


def _wait_chunks(parts: Path, n: int) -> None:
    wait_for(lambda: len(list(parts.glob("chunk-*.parquet"))) >= n, f"{n} flushed chunk(s)")


def test_kill9_then_resume_measures_each_pair_once(tmp_path, children):
    out = tmp_path / "k.parquet"
    # real runs: as many as still run when the first chunk is read; made up, a chunk per 64
    top = 3999 if children is None else 199
    args = ["--max", str(top), "--repeat", "2", "--no-rt", "-o", str(out)]
    if children is None:
        proc = _cli(*args)
        try:
            _wait_chunks(Path(str(out) + ".parts"), 1)
        finally:
            proc.kill()
            proc.communicate()
    else:  # killed in its fourth batch, three on the disk
        killed = subprocess.run(fakespawner.cli("sweep", "env-size", *args, chunk_runs=64,
                                                signal_after=(200, signal.SIGKILL)),
                                env=fakespawner.cli_env(), capture_output=True)  # fmt: skip
        assert killed.returncode == -signal.SIGKILL
        assert len(list(Path(f"{out}.parts").glob("chunk-*.parquet"))) == 3
    refused = CliRunner().invoke(
        cli, ["sweep", "env-size", *args[:-2], "--repeat", "3", "--resume", str(out)]
    )
    assert refused.exit_code != 0 and "different parameters (repeat: recorded " in refused.output
    done = CliRunner().invoke(cli, ["sweep", "env-size", *args[:-2], "--resume", str(out)])
    assert done.exit_code == 0, done.output
    df = results.load(out)
    pairs = set(zip(df["env_size"], df["rep"], strict=True))
    assert len(df) == len(pairs) == 2 * (top + 1)
    assert pairs == {(s, r) for s in range(top + 1) for r in range(2)}


def test_a_ctrl_c_after_the_last_run_exits_130_with_the_file_complete(tmp_path, monkeypatch):
    """Between the last run and the summary no verb says more: one line and 128+SIGINT, not
    click's 'Aborted!' and 1."""
    from perflab.cli import env_size as verb

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(verb, "print_result", interrupted)
    out = tmp_path / "c.parquet"
    args = ["sweep", "env-size", "--max", "1", "--repeat", "2", "--no-rt", "-o", str(out)]
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 128 + signal.SIGINT, res.output
    assert "Error: interrupted by signal 2" in res.output and "Aborted" not in res.output
    assert len(results.load(out)) == 4


def test_a_resume_with_nothing_left_says_so_once(tmp_path):
    out = str(tmp_path / "done.parquet")
    args = ["sweep", "env-size", "--max", "1", "--repeat", "2", "--no-rt"]
    assert CliRunner().invoke(cli, [*args, "-o", out]).exit_code == 0
    res = CliRunner().invoke(cli, [*args, "--resume", out])
    assert res.exit_code == 0, res.output
    assert "resuming: 4 runs done, 0 to go" in res.output
    assert not [line for line in res.output.splitlines() if line.startswith("env-size:")]


def test_ctrl_c_keeps_rows_and_says_how_to_resume(tmp_path, children, monkeypatch):
    out = tmp_path / "c.parquet"
    top = 3999 if children is None else 199  # made up: a chunk per 64 runs, as many rows
    args = ["--max", str(top), "--repeat", "2", "--no-rt", "-o", str(out)]
    if children is None:
        proc = _cli(*args)
        _wait_chunks(Path(str(out) + ".parts"), 1)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode != 0
    else:  # Ctrl-C in the third batch
        monkeypatch.setattr(env_measure, "CHUNK_RUNS", 64)
        children.signal_after = (150, signal.SIGINT)
        stopped = CliRunner().invoke(cli, ["sweep", "env-size", *args])
        assert stopped.exit_code == 128 + signal.SIGINT
        err = stopped.output
    assert f"--resume {out}" in err and "Traceback" not in err
    df = results.load(out)
    assert results.metadata(df)["complete"] is False
    first = 512 if children is None else 64
    assert first <= len(df) < 2 * (top + 1) and not df[["env_size", "rep"]].duplicated().any()
    assert children is None or len(df) == 150  # every run made before the stop, no other
    assert (df["status"] == "ok").all()
    fresh = CliRunner().invoke(cli, ["sweep", "env-size", "--max", "9", "--no-rt", "-o", str(out)])
    assert fresh.exit_code == 1 and f"holds an interrupted run ({len(df)} rows)" in fresh.output
    assert f"--resume {out}" in fresh.output and len(results.load(out)) == len(df)


# The CLI's sweep with the spawner's sends watched: was pandas loaded at each one?
HEAD_START = """
import runpy, sys
from perflab.running import spawn
seen = []
submit = spawn.HelperSpawner._submit
def watched(self, *request):
    seen.append("pandas" in sys.modules)
    return submit(self, *request)
spawn.HelperSpawner._submit = watched
sys.argv = ["perflab", "sweep", "env-size", "--max", "9", "--repeat", "2", "-o", sys.argv[1]]
try:
    runpy.run_module("perflab", run_name="__main__")
finally:
    print(seen, file=sys.stderr)
"""


def test_a_fresh_sweep_queues_its_first_runs_before_pandas_loads(tmp_path):
    """The head start: the stack twin, the unrecorded first run and the first batch of a fresh
    sweep are sent before perflab loads pandas (a third of a second of every command), when
    perflab itself can run off the children's CPU; on one CPU the batch waits for it."""
    out = tmp_path / "h.parquet"
    proc = subprocess.run([sys.executable, "-c", HEAD_START, str(out)], capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": SRC})  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(proc.stderr.strip().splitlines()[-1].lower())
    apart = len(os.sched_getaffinity(0)) > 1
    assert seen == [False, False, not apart], proc.stderr
    df = results.load(out)
    assert sorted(zip(df["env_size"], df["rep"], strict=True)) == [
        (s, r) for s in range(10) for r in range(2)
    ]
    assert results.metadata(df)["complete"] is True and (df["status"] == "ok").all()


def test_progress_starts_before_the_first_measured_run(tmp_path, monkeypatch):
    """A rate counts from the first run, not from after the batches queued ahead of pandas."""
    sent: list[int] = []
    submit = spawn.HelperSpawner._submit
    monkeypatch.setattr(
        spawn.HelperSpawner, "_submit", lambda self, *r: submit(self, *r) or sent.append(1)
    )
    at_start: list[int] = []
    env_size.sweep(max_size=9, repeat=2, rt=False, output=tmp_path / "p.parquet",
                   progress=lambda n: None,
                   on_start=lambda todo, done: at_start.append(len(sent)))  # fmt: skip
    assert at_start == [len(sent) - 1]  # only the sweep's one batch was sent after it


def test_cli_json(tmp_path):
    out, png = tmp_path / "j.parquet", tmp_path / "j.png"
    res = CliRunner().invoke(
        cli,
        [
            "sweep",
            "env-size",
            "--min",
            "10",
            "--max",
            "14",
            "--repeat",
            "2",
            "--no-rt",
            "-o",
            str(out),
            "--plot",
            str(png),
            "--zoom",
            "10:14",
            "--json",
        ],
    )
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["runs"] == 10 and doc["status"] == {"ok": 10}
    assert [s["env_size"] for s in doc["sizes"]] == [10, 11, 12, 13, 14]
    assert png.stat().st_size > 0 and out.exists()


def test_cli_runs_any_program(tmp_path):
    out = tmp_path / "t.csv"
    res = CliRunner().invoke(
        cli,
        [
            "sweep",
            "env-size",
            "--max",
            "3",
            "--repeat",
            "2",
            "--no-rt",
            "-o",
            str(out),
            "--json",
            "--",
            "true",
            "--ignored-arg",
        ],
    )
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["value"] == "outer_ticks" and doc["status"] == {"ok": 8}


def test_cli_all_runs_failed_keeps_them_plots_and_exits_nonzero(tmp_path):
    out, png = tmp_path / "f.parquet", tmp_path / "f.png"
    args = ["--max", "3", "--repeat", "2", "--no-rt", "-o", str(out), "--plot", str(png)]
    res = CliRunner().invoke(cli, ["sweep", "env-size", *args, "--", "false"])
    errors = [x for x in res.output.splitlines() if x.startswith("Error:")]
    assert res.exit_code == 1 and len(errors) == 1, res.output
    assert "no run ended 'ok' (status: {'exit': 8})" in errors[0] and str(out) in errors[0]
    assert len(results.load(out)) == 8 and png.stat().st_size > 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--min", "5", "--max", "1"], "greater than --max"),
        (["--step", "0"], "--step must be at least 1"),
        (["--min", "-1"], "--min must be at least 0"),
        (["--cpu", "4095"], "does not exist or is offline"),
        (["-o", "/nonexistent/x.parquet"], "does not exist"),
        (["-o", "x.txt"], "unknown output format"),
        (["-o", ""], "'' is an empty name"),
        (["-o", "x.parquet/"], "'x.parquet/' is a directory's name"),
        (["--resume", ""], "'' is an empty name"),
        (["--plot", "x.png/"], "'x.png/' is a directory's name"),
        (["--", "/nonexistent/prog"], "no such file"),
        (["--", "./data.txt"], "not an executable"),
        (["--", "./script"], "Exec format error"),
        (["--resume", "nothing.parquet"], "nothing to resume"),
    ],
)
def test_bad_input_is_one_line_and_measures_nothing(tmp_path, args, message):
    os.chdir(tmp_path)
    Path("data.txt").write_text("not a program\n")
    Path("script").write_text("echo no shebang\n")
    Path("script").chmod(0o755)
    res = CliRunner().invoke(cli, ["sweep", "env-size", "--max", "2", "--repeat", "1", *args])
    assert res.exit_code != 0
    assert message in res.output and len(res.output.strip().splitlines()) <= 2
    assert "Traceback" not in res.output
    assert not [p for p in tmp_path.iterdir() if p.suffix in (".parquet", ".parts")]


def _synthetic(windows: list[int], width: int = 16, n_sizes: int = 8193, seed: int = 1):
    """Per-size medians around 1000 with windows 30 % higher: a known truth."""
    rng = np.random.default_rng(seed)
    sizes = np.arange(n_sizes)
    median = 1000 + rng.normal(0, 5, n_sizes)
    for start in windows:
        median[start : start + width] *= 1.3
    return pd.DataFrame({"env_size": sizes, "median": median})


def test_windows_found_with_width_and_spacing():
    w = env_size.detect_windows(_synthetic([2344, 6437]))
    assert list(w["start"]) == [2344, 6437]
    assert list(w["width"]) == [16, 16]
    assert w["spacing"].iloc[1] == 4093
    assert w["excess"].between(0.25, 0.4).all()


def test_no_windows_in_flat_data():
    assert env_size.detect_windows(_synthetic([])).empty


def test_isolated_noise_is_not_a_window():
    s = _synthetic([2344])
    s.loc[[100, 5000], "median"] *= 1.3  # two sizes hit by interference, not by the env
    s["min"] = s["median"] * 0.95
    s.loc[[100, 5000], "min"] /= 1.3  # ... so their fastest run is as fast as anywhere
    w = env_size.detect_windows(s)
    assert list(w["start"]) == [2344]
    assert list(env_size.detect_windows(s, confirm=None, min_sizes=1)["start"]) == [100, 2344, 5000]


def test_windows_on_a_coarse_grid():
    s = _synthetic([1000], width=64).iloc[::8]
    w = env_size.detect_windows(s)
    assert list(w["start"]) == [1000] and list(w["width"]) == [64]


def test_refused_realtime_warns_once_and_continues(tmp_path, no_rt_prefix):
    out = tmp_path / "rt.parquet"
    args = ["--max", "600", "--repeat", "2", "-o", str(out)]
    done = subprocess.run(
        [*no_rt_prefix, sys.executable, "-m", "perflab", "sweep", "env-size", *args],
        env={**os.environ, "PYTHONPATH": SRC},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("real-time priority refused: Operation not permitted (EPERM)") == 1
    meta = results.metadata(results.load(out))
    assert meta["rt_granted"] is False and len(results.load(out)) == 1202
