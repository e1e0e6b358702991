"""Every verb's `--help` is the one recorded in tests/data/help/: a refactoring that changes an
option, a default or a line of help shows here, and the change goes into CHANGELOG.md with the
recorded text rewritten (`python tests/test_help_unchanged.py` writes it)."""

import sys
from collections.abc import Iterator
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from perflab.cli import cli

RECORDED = Path(__file__).parent / "data" / "help"


def verbs() -> Iterator[tuple[str, ...]]:
    """Every command path under perflab, the groups included, in the order --help lists them."""

    def walk(
        cmd: click.Command, path: tuple[str, ...], ctx: click.Context
    ) -> Iterator[tuple[str, ...]]:
        yield path
        if isinstance(cmd, click.Group):
            for name in cmd.list_commands(ctx):
                sub = cmd.get_command(ctx, name)
                assert sub is not None
                yield from walk(sub, (*path, name), click.Context(sub, parent=ctx, info_name=name))

    yield from walk(cli, (), click.Context(cli, info_name="perflab"))


def help_text(path: tuple[str, ...]) -> str:
    """What `perflab PATH --help` prints on a 100-column terminal."""
    result = CliRunner().invoke(cli, [*path, "--help"], prog_name="perflab", terminal_width=100)
    assert result.exit_code == 0, result.output
    return result.output


def name(path: tuple[str, ...]) -> str:
    """The recorded file of a command path."""
    return "-".join(path) or "perflab"


def test_the_verbs_are_the_recorded_ones():
    assert sorted(f"{name(p)}.txt" for p in verbs()) == sorted(f.name for f in RECORDED.iterdir())


@pytest.mark.parametrize("path", list(verbs()), ids=name)
def test_help_is_the_recorded_one(path):
    assert help_text(path) == (RECORDED / f"{name(path)}.txt").read_text()


if __name__ == "__main__":
    for old in RECORDED.glob("*.txt"):
        old.unlink()
    for path in verbs():
        (RECORDED / f"{name(path)}.txt").write_text(help_text(path))
    sys.exit(0)
