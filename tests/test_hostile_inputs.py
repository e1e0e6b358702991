"""Hostile input at the door (issue 47, items 5 and 6): hand-edited and foreign result files
handed to report, diff and --resume, the Python API given wrong types, assertion arguments
that make a claim vacuous or a target that is async, the measuring lock held by another
process or asked for again from inside a target, and escape sequences in a file's metadata.
Each is one clear line (or the right exception type), never a raw exception or a number
reported as a result."""

import importlib
import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

import perflab
from perflab.assertions import claims, comparison, lock
from perflab.cli import cli
from perflab.errors import PerflabError, WrongType
from perflab.running import timing
from perflab.store import results

ESC = "\x1b]0;owned\x07\x1b[2J"


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> Path:
    """A small env-size result perflab wrote, as Parquet and as CSV with its sidecar."""
    where = tmp_path_factory.mktemp("made")
    for name in ("env.parquet", "env.csv"):
        done = CliRunner().invoke(
            cli,
            ["sweep", "env-size", "--max", "16", "--step", "16", "--repeat", "3", "--no-rt",
             "-o", str(where / name)],
        )  # fmt: skip
        assert done.exit_code == 0, done.output
    return where


def _edited(made: Path, tmp: Path, frame=None, **meta) -> Path:
    """The Parquet result saved again with its rows changed by frame(df) and keys of meta."""
    df = results.load(made / "env.parquet")
    changed = frame(df.copy()) if frame else df
    out = tmp / "edited.parquet"
    results.save(results.attach(changed, {**results.metadata(df), **meta}), out)
    return out


def _first(column: str, value: float | str):
    """An edit that sets the first row's column to value (the column cast to value's type)."""

    def edit(df):
        df[column] = df[column].astype(type(value))
        df.loc[df.index[0], column] = value
        return df

    return edit


def _with_ticks(value: float):
    return _first("ticks", value)


def _status(value: str):
    return _first("status", value)


# name -> (how the file is made from the good one, what the one line must name)
EDITED = {
    "infinite ticks": (lambda m, t: _edited(m, t, _with_ticks(float("inf"))), "column ticks"),
    "negative ticks": (lambda m, t: _edited(m, t, _with_ticks(-5.0)), "column ticks"),
    "unknown status": (lambda m, t: _edited(m, t, _status("weird")), "column status"),
    "tsc_hz negative": (lambda m, t: _edited(m, t, tsc_hz=-1.0), "tsc_hz"),
    "tsc_hz text": (lambda m, t: _edited(m, t, tsc_hz="fast"), "tsc_hz"),
    "saved option -1e308": (lambda m, t: _edited(m, t, trim=-1e308), "trim"),
    "step of a string": (lambda m, t: _edited(m, t, timer_step_ticks="2"), "timer_step_ticks"),
}


def _foreign_text_ticks(made: Path, tmp: Path) -> Path:
    out = tmp / "foreign.parquet"
    frame = {"env_size": [0, 16], "rep": [0, 0], "status": ["ok", "ok"], "ticks": ["a", "b"]}
    pd.DataFrame(frame).to_parquet(out)
    return out


def _foreign_no_outer(made: Path, tmp: Path) -> Path:
    """perflab's names, no metadata, one run without a probe: its summary reads outer_ticks."""
    out = tmp / "foreign.parquet"
    ticks = [1.0, 2.0, 3.0, float("nan")]
    pd.DataFrame({"env_size": 0, "rep": range(4), "status": "ok", "ticks": ticks}).to_parquet(out)
    return out


def _lying_sidecar(change):
    def make(made: Path, tmp: Path) -> Path:
        out = tmp / "liar.csv"
        out.write_bytes((made / "env.csv").read_bytes())
        side = json.loads((made / "env.csv.json").read_text())
        change(side["dtypes"])
        Path(str(out) + ".json").write_text(json.dumps(side))  # its digest still matches
        return out

    return make


FOREIGN = {
    "foreign, text ticks": (_foreign_text_ticks, "column ticks"),
    "foreign, no outer_ticks": (_foreign_no_outer, "outer_ticks"),
    "sidecar without ok": (
        _lying_sidecar(lambda d: d.update(status={"categories": ["bogus"], "ordered": False})),
        "column status",
    ),
    "sidecar with float16 ticks": (
        _lying_sidecar(lambda d: d.update(ticks="float16")),
        "column ticks",
    ),
}
FILES = {**EDITED, **FOREIGN}


def _one_line(res) -> str:
    err = res.stderr.strip().splitlines()
    assert res.exit_code not in (0, None), res.output
    assert len(err) == 1, res.stderr
    assert "Traceback" not in res.output and "internal error" not in err[0], err
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    return err[0]


def test_the_good_files_are_read(made):
    """The checks refuse what perflab never writes, not what it does."""
    for name in ("env.parquet", "env.csv"):
        res = CliRunner().invoke(cli, ["report", str(made / name)])
        assert res.exit_code == 0 and res.stdout.startswith("env-size result"), res.output


@pytest.mark.parametrize("name", FILES)
def test_a_hostile_file_is_one_line_for_report_and_diff(name, made, tmp_path):
    make, named = FILES[name]
    bad = make(made, tmp_path)
    for argv in (["report", str(bad)], ["diff", str(made / "env.parquet"), str(bad)]):
        line = _one_line(CliRunner().invoke(cli, argv))
        assert str(bad) in line and named in line, (argv, line)


@pytest.mark.parametrize("name", EDITED)
def test_a_hand_edited_file_is_refused_before_a_resume_measures(name, made, tmp_path):
    bad = EDITED[name][0](made, tmp_path)
    argv = ["sweep", "env-size", "--max", "16", "--step", "16", "--repeat", "4", "--no-rt",
            "--resume", str(bad)]  # fmt: skip
    line = _one_line(CliRunner().invoke(cli, argv))
    assert EDITED[name][1] in line, line
    assert len(pd.read_parquet(bad)) == 6  # nothing measured, nothing added


def test_escape_sequences_in_metadata_do_not_reach_the_terminal(made, tmp_path):
    bad = _edited(made, tmp_path, hostname=f"host{ESC}", program=f"a\rb{ESC}")
    res = CliRunner().invoke(cli, ["report", str(bad)])
    assert res.exit_code == 0, res.output
    assert "\x1b" not in res.stdout and "\x07" not in res.stdout and "\r" not in res.stdout
    assert "host\\x1b]0;owned\\x07\\x1b[2J" in res.stdout and "a\\x0db" in res.stdout
    status = _edited(made, tmp_path, _status(f"ok{ESC}"))
    line = _one_line(CliRunner().invoke(cli, ["report", str(status)]))
    assert "\x1b" not in line and "column status" in line


def _api(name: str):
    module, _, function = name.rpartition(".")
    if module.startswith("lab."):  # a package the top level does not import
        return getattr(importlib.import_module(f"perflab.{module}"), function)
    target = perflab
    for part in module.split(".") if module else []:
        target = getattr(target, part)
    return getattr(target, function)


# The Python API given what the CLI would never pass: (function, keywords, what the line says).
API = [
    ("env_size.sweep", {"max_size": "128"}, "max_size (--max): '128' is not a whole number"),
    ("env_size.sweep", {"repeat": None}, "repeat (--repeat): None is not a whole number"),
    ("env_size.sweep", {"program": 123}, "program: 123 is not a sequence"),
    ("env_size.sweep", {"program": "./a.out"}, "program: './a.out' is not a sequence"),
    ("env_size.sweep", {"cpus": "abc"}, "cpus (--cpu): 'abc' is not a CPU list"),
    ("env_size.sweep", {"step": 64.5}, "step (--step): 64.5 is not a whole number"),
    ("env_size.sweep", {"rt": "yes"}, "rt (--rt): 'yes' is not True or False"),
    ("link_order.sweep", {"objects": "a.o"}, "objects: 'a.o' is not a sequence"),
    ("threads.program.run", {"command": "xz"}, "command: 'xz' is not a sequence"),
    ("compare.program_side", {"name": "A", "command": 123}, "program A: 123 is not a sequence"),
    ("memcpy.run", {"max_bytes": "128"}, "max_bytes: '128' is not a whole number"),
    ("pagefault.run", {"pages": "1"}, "pages: '1' is not a whole number"),
    ("syscalls.run", {"calls": "getpid"}, "calls: 'getpid' is not a sequence"),
    ("cswitch.run", {"n": 10.5}, "n: 10.5 is not a whole number"),
    ("trig.run", {"repeat": "1"}, "repeat: '1' is not a whole number"),
    ("clocks.read_costs", {"samples": "3"}, "samples: '3' is not a whole number"),
    ("counters.run", {"command": "true"}, "command: 'true' is not a sequence"),
    ("profile.run", {"command": "true"}, "command: 'true' is not a sequence"),
    (
        "lab.bisect.bisect",
        {"good": 7, "bad": "HEAD", "build": ["make"], "run": ["./p"]},
        "good: 7 is not a text",
    ),
    (
        "lab.bisect.bisect",
        {"good": "a", "bad": "b", "build": ["make"], "run": ["./p"], "controls": "rt"},
        "controls: 'rt' is not a mapping",
    ),
    (
        "lab.history.track",
        {"revisions": "HEAD", "build": ["make"], "run": ["./p"], "controls": {"timeout": "9"}},
        "timeout: '9' is not a number",
    ),
    ("lab.history.history", {"controls": ["rt"]}, "controls: ['rt'] is not a mapping"),
    ("lab.history.history", {"store": 5}, "store: 5 is not a path"),
    ("lab.compare.compare", {"a": None, "b": None}, "a: None is not a side"),
    # a path, a function and a list where the annotations name them (they passed unchecked)
    (
        "lab.history.track",
        {"revisions": "HEAD", "build": ["make"], "run": ["./p"], "repo": 5},
        "repo: 5 is not a path",
    ),
    (
        "lab.history.track",
        {"revisions": "HEAD", "build": ["make"], "run": ["./p"], "say": None},
        "say: None is not a function",
    ),
    (
        "lab.history.track",
        {"revisions": "HEAD", "build": (w for w in ["make"]), "run": ["./p"]},
        "is read once: give a list or tuple",
    ),
    (
        "lab.bisect.bisect",
        {"good": "a", "bad": "b", "build": ["make"], "run": ["./p"], "output": 5},
        "output: 5 is not a path",
    ),
    (
        "lab.bisect.bisect",
        {"good": "a", "bad": "b", "build": ["make"], "run": ["./p"], "warn": "loud"},
        "warn: 'loud' is not a function",
    ),
    ("report", {"path": None}, "path: None is not a path"),
    ("diff", {"before": 5, "after": "b.parquet"}, "before: 5 is not a path"),
    ("show", {"frame": "r.parquet"}, "show: str 'r.parquet' is not a result's DataFrame"),
    ("results.load", {"path": None}, "path: None is not a path"),
    ("results.save", {"df": None, "path": "r.parquet"}, "df: None is not a DataFrame"),
]


@pytest.mark.parametrize(
    ("name", "kwargs", "said"), API, ids=[f"{n}-{next(iter(k))}" for n, k, _ in API]
)
def test_the_api_refuses_wrong_types_as_the_cli_does(name, kwargs, said, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(WrongType) as caught:
        _api(name)(**kwargs)
    assert said in str(caught.value) and "\n" not in str(caught.value)
    assert isinstance(caught.value, TypeError) and isinstance(caught.value, PerflabError)
    assert not list(tmp_path.iterdir())


def test_the_cli_words_for_a_whole_number_are_the_apis(tmp_path):
    """The same phrase either way: the CLI's --max x and the API's max_size='x'."""
    res = CliRunner().invoke(
        cli, ["sweep", "env-size", "--max", "x", "-o", str(tmp_path / "o.csv")]
    )
    assert "'x' is not a whole number" in _one_line(res)
    with pytest.raises(WrongType, match="'x' is not a whole number"):
        perflab.env_size.sweep(max_size="x")


@pytest.mark.parametrize("ratio", [-2, 0])
def test_a_claim_that_cannot_fail_is_refused(ratio):
    with pytest.raises(PerflabError, match="min_ratio must be above 0"):
        claims.check_faster(timing.spin(1), timing.spin(2), min_ratio=ratio)


@pytest.mark.parametrize("threshold", ["min_ratio", "confidence"])
def test_a_threshold_that_is_not_a_number_is_refused(threshold):
    with pytest.raises(WrongType, match=f"{threshold} must be a finite number, not '2'"):
        claims.check_faster(timing.spin(1), timing.spin(2), **{threshold: "2"})


async def _later() -> None:
    return None


@pytest.mark.parametrize("target", [_later, lambda: _later()], ids=["async def", "lambda"])
def test_an_async_target_is_refused_not_timed_as_making_a_coroutine(target):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a coroutine left never awaited would warn
        with pytest.raises(PerflabError, match="is asynchronous"):
            claims.check_ticks_below(target, 1e9)


@pytest.fixture
def private_runtime(tmp_path, monkeypatch) -> Path:
    """XDG_RUNTIME_DIR set to a directory of this user, mode 0700: the lock's home."""
    runtime = tmp_path / "runtime"
    runtime.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    return runtime


def test_the_lock_lives_in_a_private_directory(private_runtime, tmp_path, monkeypatch):
    assert lock.lock_dir() == private_runtime
    private_runtime.chmod(0o755)  # others may enter: not private, so the fallback
    shared = tmp_path / "tmp"
    shared.mkdir()
    monkeypatch.setattr(lock.tempfile, "gettempdir", lambda: str(shared))
    mine = lock.lock_dir()
    assert mine == shared / f"perflab-{os.geteuid()}" and (mine.stat().st_mode & 0o777) == 0o700
    mine.rmdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    mine.symlink_to(elsewhere)  # planted: a link, even to a private directory, is refused
    with pytest.raises(PerflabError, match="not a directory private to this user"):
        lock.lock_dir()


def test_a_lock_held_elsewhere_ends_at_the_budget_naming_its_holder(private_runtime):
    path = private_runtime / lock.LOCK_NAME
    hold = (
        "import fcntl, os, sys, time\n"
        f"fd = os.open({str(path)!r}, os.O_RDWR | os.O_CREAT, 0o600)\n"
        "fcntl.flock(fd, fcntl.LOCK_EX)\nprint('held', flush=True)\ntime.sleep(60)\n"
    )
    with subprocess.Popen(
        [sys.executable, "-c", hold], stdout=subprocess.PIPE, text=True
    ) as holder:
        try:
            assert holder.stdout.readline().strip() == "held"
            with pytest.raises(PerflabError) as caught:
                claims.check_ticks_below(timing.spin(10), 1e12, budget="0.3s,20")
            said = str(caught.value)
            assert f"held by pid {holder.pid}" in said and "budget's 0.3 s" in said, said
            assert "\n" not in said
        finally:
            holder.kill()
    assert claims.check_ticks_below(timing.spin(10), 1e12, budget="2s,20").passed  # free again


def test_an_assertion_inside_a_target_does_not_deadlock(private_runtime):
    inner: list[comparison.Comparison] = []

    def target() -> None:
        if not inner:
            inner.append(claims.check_ticks_below(timing.spin(10), 1e12, budget="1s,20"))

    outer = claims.check_ticks_below(target, 1e12, budget="2s,20")
    assert outer.passed and inner and inner[0].passed


def test_a_hand_edited_journal_is_one_line(made, tmp_path):
    """An interrupted run's journal (PATH.parts/) is read as a file is: a chunk with negative
    ticks is refused, not reported."""
    df = results.load(made / "env.parquet")
    parts = tmp_path / "run.parquet.parts"
    parts.mkdir()
    recorded = {"meta": results.metadata(df), "params": {}, "identity": {}}
    (parts / "params.json").write_text(json.dumps(recorded))
    _with_ticks(-1.0)(df.copy()).to_parquet(parts / "chunk-000000.parquet")
    line = _one_line(CliRunner().invoke(cli, ["report", str(parts)]))
    assert str(parts) in line and "column ticks" in line, line


@pytest.mark.parametrize(
    "args, said",
    [
        (["sweep", "memcpy", "--trials", "4294967297"],
         "--trials must be at most 4,294,967,295, not 4,294,967,297"),
        (["sweep", "env-size", "--max", "10", "--cluster", "bogus://x"],
         "--cluster bogus://x: unknown address scheme 'bogus'"),
    ],
)  # fmt: skip
def test_numbers_past_the_core_and_addresses_dask_cannot_read_are_one_line(args, said):
    done = CliRunner().invoke(cli, args)
    assert done.exit_code != 0 and said in done.output and "internal error" not in done.output


@pytest.mark.parametrize("cpus", ["0,,1", "1-", "-1", "0,", "a", "0 1"])
def test_a_cpu_list_is_read_strictly_on_the_command_line(cpus, tmp_path):
    res = CliRunner().invoke(cli, ["sweep", "env-size", "--max", "0", "--cpu", cpus,
                                   "-o", str(tmp_path / "r.csv")])  # fmt: skip
    assert res.exit_code == 2 and f"{cpus!r} is not a CPU list" in _one_line(res)
    assert not list(tmp_path.iterdir())
