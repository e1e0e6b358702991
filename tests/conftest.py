"""Shared fixtures: a CLI runner and a scratch directory for outputs."""

import pytest
from click.testing import CliRunner


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()
