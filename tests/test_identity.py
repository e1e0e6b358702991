"""Every journal and result records an identity: the experiment, its parameters, the bytes and
arguments of the programs it runs, the environment they start from, its plan and the C core.
--resume refuses, in one line naming what changed, a file whose identity differs (another verb's,
a rebuilt program, another environment) and leaves the file as it was; for every verb, since
they all record through the one journal."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import suite_runs
from click.testing import CliRunner
from conftest import WORKER, compile_children, lock_free, long_beyond, tiny_argv, wait_for

from perflab.cli import cli
from perflab.core.bindings import core_digest
from perflab.lab import env_size, registry
from perflab.lab.env_size import measure
from perflab.lab.threads import program
from perflab.store import results

# Twice the work per step count: the program "rebuilt" between a stop and its resume.
TWICE = WORKER.replace("atol(argv[2]) : 1000", "atol(argv[2]) * 2 : 2000")
# The journaled experiments: those a stop can cut between two chunks (tests/test_interrupt.py).
NAMES = sorted(e.name for e in registry.EXPERIMENTS.values() if suite_runs.of(e.name).lasting)


def _argv(name: str, *record: str, change: tuple[str, str] | None = None) -> list[str]:
    """The experiment's tiny run through its verb, -o/--resume FILE before any `--`, no progress
    display."""
    argv = ["--quiet", *tiny_argv(name)]
    if change is not None:
        flag, value = change
        argv[argv.index(flag) + 1] = value
    at = argv.index("--") if "--" in argv else len(argv)
    return [*argv[:at], *record, *argv[at:]]


def _refused(res, out: Path, before: bytes) -> str:
    """The one error line of a refused resume; the file is as it was."""
    assert res.exit_code == 1, res.output
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), res.stderr
    assert out.read_bytes() == before and not Path(f"{out}.parts").exists()
    return lines[0].removeprefix("Error: ")


def test_every_journaled_experiment_has_a_changed_parameter():
    assert NAMES and all(suite_runs.of(name).changed for name in NAMES)


# A journaled verb of each kind (a sweep of child runs, an A/B comparison, threads, a kernel in
# perflab's own process, a link) in the suite, every one in CI's long step.
KINDS = {"env-size", "compare", "threads", "trig", "link-order"}


@pytest.mark.parametrize("name", long_beyond(NAMES, KINDS))
def test_a_resume_refuses_another_verbs_file_and_other_parameters(name, tmp_path):
    out = tmp_path / f"{name}.parquet"
    run = CliRunner()
    res = run.invoke(cli, _argv(name, "-o", str(out)))
    assert res.exit_code == 0, res.output
    df = results.load(out)
    meta = results.metadata(df)
    ident = meta["identity"]
    assert ident["experiment"] == name and ident["core"] == core_digest()
    assert len(ident["sha256"]) == 64 and ident["plan"]["runs"] == len(df)
    assert set(registry.EXPERIMENTS[name].defines) <= set(meta["params"])
    before = out.read_bytes()

    other = NAMES[(NAMES.index(name) + 1) % len(NAMES)]
    said = _refused(run.invoke(cli, _argv(other, "--resume", str(out))), out, before)
    wrong = registry.describe(name), registry.describe(other)
    assert said == f"{out} holds a {wrong[0]} result, not {wrong[1]}"

    changed = suite_runs.of(name).changed
    assert changed is not None
    flag, value, param = changed
    res = run.invoke(cli, _argv(name, "--resume", str(out), change=(flag, value)))
    said = _refused(res, out, before)
    assert said.startswith(f"{out}: refusing to resume with different parameters ({param}: ")

    again = run.invoke(cli, _argv(name, "--resume", str(out)))
    assert again.exit_code == 0, again.output  # the same identity: nothing left to measure
    assert len(results.load(out)) == len(df)


def _stopped_at_first_chunk(n: int) -> None:
    raise KeyboardInterrupt


@pytest.fixture
def worker(tmp_path) -> Path:
    """The tests' pthread program, built for this test alone (tests rebuild it)."""
    (tmp_path / "bin").mkdir()
    return Path(compile_children(tmp_path / "bin", {"worker": WORKER})["worker"])


def _rebuild(worker: Path, tmp_path: Path) -> bytes:
    """The program at the same path rebuilt to do twice the work; its old bytes returned."""
    old = worker.read_bytes()
    built = compile_children(tmp_path, {"twice": TWICE})["twice"]
    shutil.copyfile(built, worker)
    assert worker.read_bytes() != old
    return old


@pytest.mark.parametrize("via", ["argument", "OMP_NUM_THREADS"])
def test_a_rebuilt_program_is_refused_on_resume_and_the_same_one_completes(via, worker, tmp_path):
    out = tmp_path / "threads.parquet"
    command = [str(worker), "{threads}" if via == "argument" else "-", "20000"]
    with pytest.raises(KeyboardInterrupt):
        program.run(command, [1, 2], repeat=4, oversubscribe=True, output=out,
                    progress=_stopped_at_first_chunk)  # fmt: skip
    kept = results.load(out)
    assert results.metadata(kept)["complete"] is False and 0 < len(kept) < 8
    before = out.read_bytes()
    argv = ["--quiet", "sweep", "threads", "--threads", "1,2", "--repeat", "4", "--oversubscribe",
            "--resume", str(out), "--", *command]  # fmt: skip

    old = _rebuild(worker, tmp_path)
    said = _refused(CliRunner().invoke(cli, argv), out, before)
    digests = results.metadata(kept)["identity"]["files"][str(worker)][:12]
    assert said.startswith(
        f"{out}: refusing to resume: the program {worker} changed since the file was started "
        f"(sha256 {digests}… → "
    )

    worker.write_bytes(old)
    done = CliRunner().invoke(cli, argv)
    assert done.exit_code == 0, done.output
    df = results.load(out)
    assert results.metadata(df)["complete"] is True and len(df) == 8


def test_env_size_refuses_a_rebuilt_program_after_a_stop(worker, tmp_path, monkeypatch):
    monkeypatch.setattr(measure, "CHUNK_RUNS", 8)
    out = tmp_path / "env.parquet"
    with pytest.raises(KeyboardInterrupt):
        env_size.sweep([str(worker), "0", "1000"], output=out, max_size=15, repeat=2, rt=False,
                       progress=_stopped_at_first_chunk)  # fmt: skip
    assert 0 < len(results.load(out)) < 32
    before = out.read_bytes()
    argv = ["--quiet", "sweep", "env-size", "--max", "15", "--repeat", "2", "--no-rt",
            "--resume", str(out), "--", str(worker), "0", "1000"]  # fmt: skip
    _rebuild(worker, tmp_path)
    said = _refused(CliRunner().invoke(cli, argv), out, before)
    assert f"refusing to resume: the program {worker} changed since the file was started" in said


def test_the_environment_the_runs_start_from_is_part_of_the_identity(tmp_path):
    out = tmp_path / "env.parquet"
    argv = [
        "--quiet",
        "sweep",
        "env-size",
        "--max",
        "3",
        "--repeat",
        "2",
        "--no-rt",
        "--inherit-env",
    ]
    run = CliRunner()
    assert run.invoke(cli, [*argv, "-o", str(out)], env={"PERFLAB_T": "1"}).exit_code == 0
    before = out.read_bytes()
    res = run.invoke(cli, [*argv, "--resume", str(out)], env={"PERFLAB_T": "22"})
    said = _refused(res, out, before)
    assert said == (
        f"{out}: refusing to resume: the environment the runs start from changed since the file "
        "was started (the values of its variables differ)"
    )
    res = run.invoke(cli, [*argv, "--resume", str(out)], env={"PERFLAB_T": "1", "PERFLAB_U": ""})
    assert _refused(res, out, before).endswith("(now with PERFLAB_U)")
    assert run.invoke(cli, [*argv, "--resume", str(out)], env={"PERFLAB_T": "1"}).exit_code == 0


def _edited(path: Path, **meta) -> bytes:
    """The result saved again with these metadata fields changed (None: removed)."""
    df = results.load(path)
    fields = {**results.metadata(df), **meta}
    results.save(results.attach(df, {k: v for k, v in fields.items() if v is not None}), path)
    return path.read_bytes()


def test_a_changed_core_an_older_and_a_newer_perflab_are_refused_on_resume(tmp_path):
    out = tmp_path / "pf.parquet"
    argv = ["--quiet", "run", "pagefault", "--pages", "2", "--reps", "2"]
    run = CliRunner()
    assert run.invoke(cli, [*argv, "-o", str(out)]).exit_code == 0
    ident = results.metadata(results.load(out))["identity"]

    before = _edited(out, identity={**ident, "core": "0123456789abcdef"})
    said = _refused(run.invoke(cli, [*argv, "--resume", str(out)]), out, before)
    assert said == (
        f"{out}: refusing to resume: the C core changed since the file was started "
        f"(0123456789abcdef → {core_digest()}): resume with the perflab that started it"
    )
    before = _edited(out, identity=None)
    said = _refused(run.invoke(cli, [*argv, "--resume", str(out)]), out, before)
    assert said.startswith(f"{out}: records no identity of what its runs executed")
    before = _edited(out, identity=ident, perflab_version="99.0")
    said = _refused(run.invoke(cli, [*argv, "--resume", str(out)]), out, before)
    assert said.startswith(f"{out}: started by perflab 99.0, newer than this perflab ")


@pytest.mark.long
def test_a_killed_sweep_refuses_a_rebuilt_program_and_keeps_its_journal(worker, tmp_path):
    out = tmp_path / "killed.parquet"
    parts = Path(f"{out}.parts")
    args = ["sweep", "env-size", "--max", "0", "--repeat", "1500", "--no-rt"]
    program = ["--", str(worker), "0", "1000", "2"]
    proc = subprocess.Popen([sys.executable, "-m", "perflab", *args, "-o", str(out), *program],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        wait_for(lambda: any(parts.glob("chunk-*.parquet")), "the sweep's first chunk")
    finally:
        proc.kill()
        proc.wait()
    wait_for(lambda: lock_free(out), "the killed sweep's lock")
    stored = json.loads((parts / "params.json").read_bytes())["identity"]
    assert stored["experiment"] == "env-size" and stored["plan"]["runs"] == 1500
    chunks = sorted(p.name for p in parts.iterdir())
    _rebuild(worker, tmp_path)
    res = CliRunner().invoke(cli, ["--quiet", *args, "--resume", str(out), *program])
    assert res.exit_code == 1 and len(res.stderr.strip().splitlines()) == 1, res.output
    assert f"the program {worker} changed since the file was started" in res.stderr
    assert sorted(p.name for p in parts.iterdir()) == chunks and not out.exists()
