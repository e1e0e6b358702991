"""Planted paths (issue 47): links, hard links, FIFOs, devices and shared directories at every
path perflab writes, locks, reads or executes from. Nothing is written, created or executed
through them, and a FIFO is refused in one line at once, never waited on.

As root the links belong to another user (nobody), as they would on a shared machine whose
fs.protected_symlinks is 0; as an unprivileged user they are its own, and what needs another
owner is skipped, saying so."""

import hashlib
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import long_beyond

from perflab.cli import cli
from perflab.lab.env_size import windows
from perflab.store import filelock, journal
from perflab.system import compiler, machine

ROOT = os.geteuid() == 0
OTHER = 65534  # nobody: the user who plants, when root runs perflab
NEEDS_ROOT = pytest.mark.skipif(not ROOT, reason="planting a file as another user needs root")
PAGEFAULT = ["run", "pagefault", "--pages", "1", "--reps", "2"]
TINY_SWEEP = ["sweep", "env-size", "--max", "0", "--repeat", "1", "--no-rt"]
HANG_GUARD_S = 300  # not a threshold: a run still blocked then is blocked for good


def _plant(at: Path, target: Path, how: str) -> None:
    """A link at `at` to `target`: symbolic (another user's, as root) or hard."""
    if how == "hard":
        os.link(target, at)
        return
    at.symlink_to(target)
    if ROOT:
        os.lchown(at, OTHER, OTHER)


def _digests(where: Path) -> dict[str, str]:
    return {
        str(p.relative_to(where)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(where.rglob("*"))
        if p.is_file()
    }


def _one_line(res, *words: str) -> str:
    err = res.stderr.strip().splitlines()
    assert res.exit_code not in (0, None) and len(err) == 1, res.output
    assert "Traceback" not in res.output and "internal error" not in err[0], res.output
    assert all(w in err[0] for w in words), err
    return err[0]


@pytest.fixture
def victims(tmp_path) -> Path:
    """Files (and a directory) that perflab did not create and must leave as they are."""
    where = tmp_path / "victims"
    where.mkdir()
    for name in ("passwd", "config", "keys"):
        (where / name).write_text(f"{name}: not perflab's\n")
    (where / "dir").mkdir()
    (where / "dir" / "inside").write_text("kept\n")
    return where


@pytest.fixture
def shared(tmp_path) -> Path:
    """A directory every user may write, as /tmp."""
    where = tmp_path / "shared"
    where.mkdir()
    where.chmod(0o1777)
    return where


@pytest.fixture(scope="module")
def result(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("result") / "result.parquet"
    done = CliRunner().invoke(cli, [*PAGEFAULT, "-o", str(out)])
    assert done.exit_code == 0, done.output
    return out


@pytest.mark.parametrize("how", ["symbolic", "dangling", "hard"])
def test_a_planted_lock_is_refused_and_nothing_is_written_through_it(how, victims, shared):
    out = shared / "out.parquet"
    target = victims / ("missing" if how == "dangling" else "passwd")
    before = _digests(victims)
    _plant(filelock.lock_path(out), target, "hard" if how == "hard" else "symbolic")
    res = CliRunner().invoke(cli, [*PAGEFAULT, "-o", str(out)])
    _one_line(res, f"{out}.lock", "not a lock perflab made")
    assert _digests(victims) == before and not out.exists()
    assert target.exists() == (how != "dangling")


@NEEDS_ROOT
def test_another_users_lock_file_is_refused(shared):
    """A regular file of someone else's at OUT.lock: perflab would write its pid into it."""
    out = shared / "out.parquet"
    lock = filelock.lock_path(out)
    lock.write_text("theirs\n")
    os.chown(lock, OTHER, OTHER)
    res = CliRunner().invoke(cli, [*PAGEFAULT, "-o", str(out)])
    _one_line(res, str(lock), "another user")
    assert lock.read_text() == "theirs\n"


def test_a_planted_journal_directory_is_refused(victims, shared):
    """OUT.parts linked to a directory: the journal would write its chunks into it."""
    out = shared / "out.parquet"
    before = _digests(victims)
    _plant(shared / "out.parquet.parts", victims / "dir", "symbolic")
    res = CliRunner().invoke(cli, [*PAGEFAULT, "-o", str(out)])
    _one_line(res, "out.parquet.parts", "not a journal perflab made")
    assert _digests(victims) == before and sorted((victims / "dir").iterdir()) == [
        victims / "dir" / "inside"
    ]


def _exports(result: Path, shared: Path) -> list[tuple[list[str], list[Path]]]:
    """Every verb that writes files, with the paths each writes (besides locks)."""
    csv = shared / "out.csv"
    r_html, r_md, r_png = shared / "r.html", shared / "r.md", shared / "r.png"
    d_html, d_md, d_png = shared / "d.html", shared / "d.md", shared / "d.png"
    child = shared / "child.txt"
    return [
        (["run", "pagefault", "--pages", "1", "--reps", "2", "-o", str(csv)],
         [csv, shared / "out.csv.json"]),
        (["report", str(result), "--html", str(r_html), "--md", str(r_md), "--plot", str(r_png)],
         [r_html, r_md, r_png]),
        (["diff", str(result), str(result), "--html", str(d_html), "--md", str(d_md),
          "--plot", str(d_png)], [d_html, d_md, d_png]),
        (["counters", "--program-output", str(child), "--", sys.executable, "-c", "print('out')"],
         [child]),
    ]  # fmt: skip


@pytest.mark.parametrize("how", long_beyond(["symbolic", "dangling", "hard"], {"symbolic"}))
def test_every_export_replaces_a_planted_link_and_leaves_its_target(how, result, victims, shared):
    target = victims / ("missing" if how == "dangling" else "config")
    before = _digests(victims)
    for argv, written in _exports(result, shared):
        for path in written:
            _plant(path, target, "hard" if how == "hard" else "symbolic")
        res = CliRunner().invoke(cli, argv)
        assert res.exit_code == 0, (argv, res.output)
        for path in written:
            st = os.lstat(path)
            assert stat.S_ISREG(st.st_mode) and st.st_nlink == 1, (argv, path)
            assert not os.path.samestat(st, os.stat(target)) if target.exists() else True
        assert _digests(victims) == before, argv
        assert not (victims / "missing").exists(), argv
    assert (shared / "child.txt").read_text() == "out\n"


def _perflab(*argv: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """perflab in its own process: a wait on a FIFO cannot then hang the test run, and nothing
    built earlier in this one is reused. env: variables to set, or to unset (None)."""
    merged = {**os.environ, **(env or {})}
    try:
        return subprocess.run(
            [sys.executable, "-m", "perflab", *argv],
            capture_output=True,
            text=True,
            timeout=HANG_GUARD_S,
            env={k: v for k, v in merged.items() if v is not None},
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"perflab {' '.join(argv)} blocked")


def _refused(done: subprocess.CompletedProcess, *words: str) -> None:
    err = done.stderr.strip().splitlines()
    assert done.returncode not in (0, None) and len(err) == 1, done.stderr
    assert "Traceback" not in done.stderr and all(w in err[0] for w in words), err


@pytest.fixture
def fifo(shared) -> Path:
    path = shared / "pipe.parquet"
    os.mkfifo(path)
    return path


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["run", "pagefault", "--pages", "1", "--reps", "2", "-o", "{fifo}"], "is a FIFO"),
        ([*TINY_SWEEP, "--resume", "{fifo}"], "is a FIFO"),
        (["report", "{result}", "--html", "{fifo}"], "is a FIFO"),
        (["report", "{result}", "--md", "{fifo}"], "is a FIFO"),
        (["report", "{result}", "--plot", "{fifo}"], "is a FIFO"),
        (["counters", "--program-output", "{fifo}", "--", "true"], "is a FIFO"),
        (["report", "{fifo}"], "is a FIFO"),
        (["diff", "{result}", "{fifo}"], "is a FIFO"),
        (["report", "{device}"], "is a character device"),
        (["run", "pagefault", "--pages", "1", "--reps", "2", "-o", "{device}"], "device"),
        (["report", "{result}", "--html", "{dir}"], "directory"),
    ],
    ids=lambda v: " ".join(v) if isinstance(v, list) else None,
)
def test_a_fifo_device_or_directory_is_refused_at_once(argv, said, fifo, result, shared):
    device = shared / "dev.parquet"  # a character device under a result's name
    device.symlink_to(os.devnull)
    directory = shared / "dir.html"
    directory.mkdir()
    names = {"{fifo}": fifo, "{result}": result, "{device}": device, "{dir}": directory}
    done = _perflab(*[str(names.get(w, w)) for w in argv])
    _refused(done, said)


def test_a_fifo_inside_a_result_is_refused_at_once(shared):
    """A CSV's sidecar, or a journal's params.json or chunk, made a FIFO."""
    csv = shared / "out.csv"
    done = _perflab("run", "pagefault", "--pages", "1", "--reps", "2", "-o", str(csv))
    assert done.returncode == 0, done.stderr
    sidecar = Path(f"{csv}.json")
    sidecar.unlink()
    os.mkfifo(sidecar)
    _refused(_perflab("report", str(csv)), str(sidecar), "is a FIFO")

    out = shared / "cut.parquet"
    journal.Journal(out, {"n": 4}, {"experiment": "env-size"}, ["env_size"])
    filelock.release(out)  # as an interrupted run's end released it
    parts = Path(f"{out}.parts")
    os.mkfifo(parts / "chunk-000000.parquet")
    _refused(_perflab("report", str(out)), "interrupted run that recorded no run")
    (parts / "params.json").unlink()
    os.mkfifo(parts / "params.json")
    _refused(_perflab("report", str(out)), "params.json")


MARKER = "ran-the-planted-program"


def _planted_program(where: Path, name: str, marker: Path) -> Path:
    """An executable that leaves a mark when run, under the name of a cached build."""
    path = where / name
    path.write_text(f"#!/bin/sh\necho planted > {marker}\n")
    path.chmod(0o755)
    return path


def _fallback(tmp: Path) -> dict:
    """No usable HOME nor XDG_CACHE_HOME: the cache falls back to TMPDIR/perflab-cache-UID.
    A HOME under a file, as matplotlib makes a missing one for its own cache."""
    return {"XDG_CACHE_HOME": None, "HOME": os.devnull, "TMPDIR": str(tmp),
            "MPLCONFIGDIR": str(tmp / "matplotlib")}  # fmt: skip


@pytest.fixture(scope="module")
def workload_name(tmp_path_factory) -> str:
    """The (computable) name the built workload has in any cache."""
    mp = pytest.MonkeyPatch()
    mp.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("cache")))
    try:
        return windows.build_loop().path.name
    finally:
        mp.undo()


@pytest.mark.parametrize("owner", ["world-writable", "another user's"])
def test_a_planted_executable_in_a_shared_cache_is_not_run(owner, workload_name, shared, tmp_path):
    if owner == "another user's" and not ROOT:
        pytest.skip("planting a directory as another user needs root")
    evil = shared / "evil"
    evil.mkdir()
    marker = tmp_path / MARKER
    _planted_program(evil, workload_name, marker)
    if ROOT and owner == "another user's":
        os.chown(evil, OTHER, OTHER)
    else:
        evil.chmod(0o777)
    _plant(shared / f"perflab-cache-{os.geteuid()}", evil, "symbolic")
    done = _perflab(*TINY_SWEEP, "-o", str(tmp_path / "out.parquet"), env=_fallback(shared))
    _refused(done, "cache directory", "XDG_CACHE_HOME")
    assert not marker.exists()


def test_a_world_writable_temporary_directory_holds_no_cache(tmp_path):
    """TMPDIR writable by all and not sticky: anyone could swap the cache under perflab."""
    open_dir = tmp_path / "open"
    open_dir.mkdir()
    open_dir.chmod(0o777)
    done = _perflab(*TINY_SWEEP, "-o", str(tmp_path / "out.parquet"), env=_fallback(open_dir))
    _refused(done, "cache directory", "another user can change")
    assert not list(open_dir.iterdir())


def test_a_cached_build_whose_bytes_changed_is_built_again_not_run(tmp_path, monkeypatch):
    """The cache's own file replaced (by a bug, an older perflab, a restore): trusted by its
    recorded sha256, not its name, so it is rebuilt and what was there never runs."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    built = windows.build_loop().path
    marker = tmp_path / MARKER
    built.unlink()
    _planted_program(built.parent, built.name, marker)
    assert not compiler.cached(built)
    done = _perflab(*TINY_SWEEP, "-o", str(tmp_path / "out.parquet"), env={
        "XDG_CACHE_HOME": str(tmp_path / "cache")})  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert not marker.exists() and compiler.cached(built)
    assert stat.S_IMODE(built.parent.stat().st_mode) == 0o700


def test_a_forged_tsc_calibration_is_not_trusted(tmp_path, monkeypatch):
    """A calibration reached through a link (anyone's to plant where the cache is shared)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    machine.tsc_hz.cache_clear()
    try:
        hz = machine.tsc_hz()[0]
        forged = tmp_path / "forged.json"
        boot = Path(machine.BOOT_ID).read_text().strip()
        doc = {"identity": machine.identity(), "boot_id": boot, "hz": 12345.0, "how": "forged"}
        forged.write_text(json.dumps(doc))
        path = machine.calibration_path(machine.TSC_CALIBRATION)
        path.unlink(missing_ok=True)
        _plant(path, forged, "symbolic")
        machine.tsc_hz.cache_clear()
        assert machine.tsc_hz() != (12345.0, "forged")
        assert machine.tsc_hz()[0] == pytest.approx(hz, rel=0.005)
    finally:
        machine.tsc_hz.cache_clear()


def test_files_perflab_did_not_create_are_unchanged(victims, shared):
    """The issue's test: another user plants links to root's files at every path perflab writes
    in a shared directory, perflab sweeps with exports, and root's files hash as before."""
    before = _digests(victims)
    out = shared / "out.csv"
    plot, page, md = shared / "out.png", shared / "r.html", shared / "r.md"
    written = [out, Path(f"{out}.json"), plot, page, md]
    at_files = [*written, filelock.lock_path(out)]
    at_dirs = [Path(f"{out}.parts"), shared / f"perflab-cache-{os.geteuid()}"]
    targets = sorted(p for p in victims.iterdir() if p.is_file())
    for i, name in enumerate(at_files):
        _plant(name, targets[i % len(targets)], "symbolic")
    _plant(at_dirs[0], victims / "dir", "symbolic")
    if ROOT:  # the planter's link
        _plant(at_dirs[1], victims / "dir", "symbolic")
    else:  # the user's own link is theirs to make: into a directory anyone may change, then
        (victims / "dir").chmod(0o777)
        _plant(at_dirs[1], victims / "dir", "symbolic")
    sweep = [*TINY_SWEEP, "-o", str(out), "--plot", str(plot)]
    for planted in [at_files[-1], *at_dirs]:  # each refuses the run; then the next is tried
        _refused(_perflab(*sweep, env=_fallback(shared)))
        assert _digests(victims) == before, planted
        planted.unlink()
    done = _perflab(*sweep, env=_fallback(shared))
    assert done.returncode == 0, done.stderr
    done = _perflab("report", str(out), "--html", str(page), "--md", str(md), env=_fallback(shared))
    assert done.returncode == 0, done.stderr
    assert _digests(victims) == before
    assert all(stat.S_ISREG(os.lstat(p).st_mode) for p in written)
    cache = shared / f"perflab-cache-{os.geteuid()}"
    assert stat.S_IMODE(os.lstat(cache).st_mode) == 0o700 and os.lstat(cache).st_uid == os.geteuid()
