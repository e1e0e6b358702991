"""`perflab VERB --help` starts at once: every verb builds its options from its plan and
loads neither numpy, pandas nor matplotlib until the command runs."""

import subprocess
import sys

import pytest

from perflab.cli import VERBS

HEAVY = ("numpy", "pandas", "matplotlib")
SUBVERBS = ("report show", "report hosts")
# Every verb's help in one fresh process, in turn: the first whose help loads one of HEAVY is
# named by its own line, as it would be alone (what later verbs load is then not theirs).
HELP = """import contextlib, io, sys
from perflab.cli import main
for argv in {verbs!r}:
    sys.argv = ['perflab', *argv.split(), '--help']
    shown = io.StringIO()
    with contextlib.redirect_stdout(shown):
        try:
            main()
        except SystemExit as e:
            assert not e.code, (argv, e.code)
    usage = f'Usage: perflab {{argv}} [OPTIONS]' in shown.getvalue()
    loaded = sorted(m for m in {heavy!r} if m in sys.modules)
    print('VERB', argv, '|', usage, '|', loaded)
"""


@pytest.fixture(scope="module")
def helps() -> dict[str, str]:
    """What each verb's help showed and loaded, from one fresh interpreter."""
    code = HELP.format(verbs=[*VERBS, *SUBVERBS], heavy=HEAVY)
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    lines = [line.split(" ", 1)[1] for line in done.stdout.splitlines() if line.startswith("VERB ")]
    return dict(line.split(" | ", 1) for line in lines)


@pytest.mark.parametrize("verb", [*VERBS, *SUBVERBS])
def test_verb_help_loads_no_numpy_pandas_or_matplotlib(helps, verb):
    assert helps[verb] == "True | []", helps[verb]


def test_the_choices_help_shows_are_the_ones_the_experiments_take():
    from perflab.lab import counters as experiment
    from perflab.lab import memcpy, syscalls, threads
    from perflab.lab.threads import plan
    from perflab.system import counters

    assert tuple(threads.KERNELS) == plan.KERNEL_NAMES
    assert tuple(memcpy.KERNELS) == memcpy.KERNEL_NAMES
    assert tuple(syscalls.CALLS) == syscalls.NAMES
    assert tuple(counters.EVENTS) == experiment.EVENT_NAMES
