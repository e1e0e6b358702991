"""A verb whose stdout reader leaves early (`perflab machine | head -1`) stops quietly with the
status a shell reports for a tool SIGPIPE killed (141), as coreutils do."""

import os
import shutil
import subprocess
import sys

import pytest

PERFLAB = [sys.executable, "-m", "perflab"]


def test_a_verb_writing_to_a_pipe_nobody_reads_exits_141_without_a_word():
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the first line, as head after its line
    try:
        done = subprocess.run(
            [*PERFLAB, "machine"], stdout=write_end, stderr=subprocess.PIPE, text=True, timeout=300
        )
    finally:
        os.close(write_end)
    assert done.stderr == ""
    assert done.returncode == 141


@pytest.mark.skipif(shutil.which("head") is None, reason="needs head(1)")
def test_perflab_machine_into_head_prints_one_line_and_no_error():
    head = subprocess.Popen(["head", "-1"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert head.stdin is not None and head.stdout is not None
    verb = subprocess.run(
        [*PERFLAB, "machine"], stdout=head.stdin, stderr=subprocess.PIPE, text=True, timeout=300
    )
    first, _ = head.communicate(timeout=60)
    assert verb.stderr == ""
    # 141 when head left before perflab's last write, 0 when everything fit in the pipe first
    assert verb.returncode in (0, 141)
    assert first.count(b"\n") == 1 and first.strip()
