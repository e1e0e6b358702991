"""`perflab VERB --help` starts at once: every verb builds its options from its plan and
loads neither numpy, pandas nor matplotlib until the command runs."""

import subprocess
import sys

import pytest

from perflab.cli import VERBS

HEAVY = ("numpy", "pandas", "matplotlib")
SUBVERBS = ("report show", "report hosts")
HELP = """import sys
from perflab.cli import main
sys.argv = ['perflab', *{argv!r}, '--help']
try:
    main()
except SystemExit as e:
    assert not e.code, e.code
print('LOADED', sorted(m for m in {heavy!r} if m in sys.modules))
"""


@pytest.mark.parametrize("verb", [*VERBS, *SUBVERBS])
def test_verb_help_loads_no_numpy_pandas_or_matplotlib(verb):
    code = HELP.format(argv=verb.split(), heavy=HEAVY)
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.rstrip().endswith("LOADED []"), done.stdout[-500:]
    assert f"Usage: perflab {verb} [OPTIONS]" in done.stdout


def test_the_choices_help_shows_are_the_ones_the_experiments_take():
    from perflab.lab import counters as experiment
    from perflab.lab import memcpy, syscalls, threads
    from perflab.lab.threads import plan
    from perflab.system import counters

    assert tuple(threads.KERNELS) == plan.KERNEL_NAMES
    assert tuple(memcpy.KERNELS) == memcpy.KERNEL_NAMES
    assert tuple(syscalls.CALLS) == syscalls.NAMES
    assert tuple(counters.EVENTS) == experiment.EVENT_NAMES
