"""The program's own output never mixes with perflab's: profile and counters leave stdout to
the program (their reports go to stderr), and --program-output sends the program's stdout
and stderr to /dev/null or a file, the same option in each verb that runs a program."""

import json
import subprocess
import sys

import pytest
from conftest import long_beyond

PERFLAB = [sys.executable, "-m", "perflab"]
# 16 KiB of every byte value (binary, as a compressor's stream is), then a line on stderr.
WRITE = "import sys; sys.stdout.buffer.write(bytes(range(256)) * 64); sys.stderr.write('err\\n')"
BYTES = bytes(range(256)) * 64
VERBS = {
    "profile": ["profile", "--interval", "0.01"],
    "counters": ["counters", "-e", "task-clock"],
}


def _run(tmp_path, verb, *options):
    """perflab VERB OPTIONS -- python WRITE with perflab's stdout on a file: that file's
    bytes, perflab's stderr, its exit status."""
    out = tmp_path / f"{verb}.out"
    with out.open("wb") as f:
        done = subprocess.run([*PERFLAB, *VERBS[verb], *options, "--", sys.executable, "-c",
                               WRITE], stdout=f, stderr=subprocess.PIPE, check=False)  # fmt: skip
    return out.read_bytes(), done.stderr.decode(), done.returncode


@pytest.mark.parametrize("verb", long_beyond(list(VERBS), {"counters"}))
def test_by_default_stdout_holds_the_programs_bytes_and_nothing_else(tmp_path, verb):
    got, err, rc = _run(tmp_path, verb)
    assert rc == 0, err
    assert got == BYTES
    assert "err\n" in err and ("threads" in err or "task-clock" in err)


@pytest.mark.parametrize("verb", long_beyond(list(VERBS), {"profile"}))
def test_null_discards_the_programs_streams(tmp_path, verb):
    got, err, rc = _run(tmp_path, verb, "--program-output", "null")
    assert rc == 0, err
    assert got == b"" and "err\n" not in err


@pytest.mark.parametrize("verb", long_beyond(list(VERBS), {"counters"}))
def test_a_file_takes_both_streams_and_json_stays_valid(tmp_path, verb):
    child = tmp_path / "child.bin"
    got, err, rc = _run(tmp_path, verb, "--json", "--program-output", str(child))
    assert rc == 0, err
    assert child.read_bytes() == BYTES + b"err\n"
    assert isinstance(json.loads(got), dict) and "err\n" not in err


@pytest.mark.parametrize("verb", long_beyond(list(VERBS), {"profile"}))
def test_json_discards_the_program_by_default_and_refuses_to_mix_it_in(tmp_path, verb):
    got, err, rc = _run(tmp_path, verb, "--json")
    assert rc == 0, err
    assert isinstance(json.loads(got), dict) and "err\n" not in err
    got, err, rc = _run(tmp_path, verb, "--json", "--program-output", "inherit")
    assert rc == 2 and got == b"" and "would mix the program's stdout" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) <= 3


def test_a_file_in_no_directory_is_refused_before_anything_runs(tmp_path):
    got, err, rc = _run(tmp_path, "counters", "--program-output", str(tmp_path / "no/x"))
    assert rc == 2 and got == b"" and "does not exist" in err and "Traceback" not in err


# A sweep's runs: each writes "x" on stdout and "y" on stderr.
MARK = ["sh", "-c", "printf x; printf y >&2"]
SWEEPS = {
    "env-size": ["sweep", "env-size", "--min", "0", "--max", "4", "--step", "2", "--repeat", "1",
                 "--no-rt", "--", *MARK],
    "threads": ["sweep", "threads", "--threads", "1", "--repeat", "2", "--", *MARK],
    "compare": ["compare", "sh -c 'printf x; printf y >&2'", "sh -c 'printf x; printf y >&2'",
                "--setups", "1", "--repeat", "2", "--no-rt"],
}  # fmt: skip
RUNS = {"env-size": 3, "threads": 2, "compare": 4}


def _sweep(tmp_path, verb, *options):
    out = tmp_path / f"{verb}.out"
    args = [*SWEEPS[verb][:2], *options, *SWEEPS[verb][2:]]
    with out.open("wb") as f:
        argv = [*PERFLAB, *args, "-o", str(tmp_path / f"{verb}.parquet")]
        done = subprocess.run(argv, stdout=f, stderr=subprocess.PIPE, cwd=tmp_path, check=False)
    return out.read_bytes(), done.stderr.decode(), done.returncode


# Three sweeps of real runs: env-size's in the suite, each verb's in CI's long step.
@pytest.mark.parametrize("verb", long_beyond(list(SWEEPS), {"env-size"}))
def test_a_sweep_discards_the_programs_streams_unless_told(tmp_path, verb):
    got, err, rc = _sweep(tmp_path, verb)
    assert rc == 0, err
    assert b"xy" not in got  # perflab's text alone
    child = tmp_path / "runs.txt"
    got, err, rc = _sweep(tmp_path, verb, "--program-output", str(child))
    assert rc == 0, err
    runs = child.read_bytes()
    assert runs == b"xy" * (len(runs) // 2) and len(runs) // 2 >= RUNS[verb]
    assert b"xy" not in got


def test_the_built_in_kernels_refuse_an_output_they_would_not_use(tmp_path):
    done = subprocess.run([*PERFLAB, "sweep", "threads", "--program-output", "null"],
                          capture_output=True, text=True, check=False)  # fmt: skip
    assert done.returncode == 2 and "--program-output needs a PROGRAM" in done.stderr


def test_counters_without_a_command_refuse_an_output_for_it():
    done = subprocess.run([*PERFLAB, "counters", "--program-output", "null"],
                          capture_output=True, text=True, check=False)  # fmt: skip
    assert done.returncode == 2 and "--program-output needs a COMMAND" in done.stderr
    assert "Traceback" not in done.stderr
