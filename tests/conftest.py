"""Shared fixtures: a CLI runner and a scratch directory for outputs."""

import pytest
from click.testing import CliRunner


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


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
