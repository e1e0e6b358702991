"""The `perflab` command: a click group whose verbs live in one module each."""

import os

import click

from perflab import __version__
from perflab.errors import PerflabError


class UsageMistake(click.ClickException):
    """A bad option or argument: one line (no usage dump) and exit code 2, as click uses."""

    exit_code = 2


class Group(click.Group):
    """Turns user mistakes into one line and a non-zero exit, never a traceback."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except click.UsageError as exc:
            where = exc.ctx.command_path if exc.ctx else "perflab"
            raise UsageMistake(f"{exc.format_message()} (see '{where} --help')") from None
        except PerflabError as exc:
            raise click.ClickException(str(exc)) from None
        except OSError as exc:
            where = f"{exc.filename}: " if exc.filename else ""
            raise click.ClickException(f"{where}{exc.strerror or exc}") from None
        except (click.ClickException, click.exceptions.Exit, click.Abort):
            raise
        except Exception as exc:
            if os.environ.get("PERFLAB_DEBUG"):
                raise
            # A bug, not a user mistake: still one line, with the way to the traceback.
            first = (str(exc).strip().splitlines() or [""])[0][:200]
            raise click.ClickException(
                f"internal error ({type(exc).__name__}: {first}); "
                "PERFLAB_DEBUG=1 shows the traceback, please report it"
            ) from None


@click.group(cls=Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="perflab")
def cli() -> None:
    """perflab: low-level performance experiments on Linux, measured honestly."""


@cli.group()
def sweep() -> None:
    """Sweep a condition that biases measurements and record every run."""


@cli.group()
def run() -> None:
    """Run one experiment of the published articles (docs/sources.md)."""


def main() -> None:
    """Console-script entry point."""
    cli(prog_name="perflab")


from perflab.cli import (  # noqa: E402,F401 - verbs register on the group
    clocks,
    compare,
    counters,
    env_size,
    link_order,
    machine,
    memory,
    oscost,
    profile,
    report,
    threads,
)
