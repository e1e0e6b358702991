"""Shared fixtures: a CLI runner, and a way to run perflab where real-time priority is refused."""

import os
import resource
import shutil

import pytest
from click.testing import CliRunner

from perflab import machine


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


@pytest.fixture
def no_rt_prefix() -> list[str]:
    """A command prefix under which SCHED_FIFO is refused: nothing if it already is here, else
    setpriv dropping CAP_SYS_NICE (root only); a skip where neither holds."""
    if not machine.realtime_allowed():
        return []
    if resource.getrlimit(resource.RLIMIT_RTPRIO)[0] > 0:
        pytest.skip("RLIMIT_RTPRIO grants real-time priority without CAP_SYS_NICE")
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("real-time is granted here and only root with setpriv can drop it")
    return ["setpriv", "--bounding-set=-sys_nice", "--inh-caps=-sys_nice"]


def own_children() -> list:
    """This process's descendants, less perflab's spawner helper (it lives for the process)."""
    import psutil

    from perflab import spawn

    def is_helper(p) -> bool:
        try:
            return p.exe() == str(spawn.SPAWNER)
        except psutil.Error:
            return False

    return [c for c in psutil.Process().children(recursive=True) if not is_helper(c)]
