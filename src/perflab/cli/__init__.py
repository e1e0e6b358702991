"""The `perflab` command: a click group whose verbs live in one module each.

A verb's module is imported only when that verb runs, completes or shows its help, so
`perflab --help` and `import perflab.cli` load neither pandas nor matplotlib (see VERBS).
"""

import contextlib
import gc
import importlib
import os
import signal
import sys
import threading
from collections.abc import Iterator
from typing import Any

import click
from click.shell_completion import CompletionItem

from perflab import __version__
from perflab.core import terminal
from perflab.errors import PerflabError, Stopped, warnings_as_lines
from perflab.lab.registry import EXPERIMENTS
from perflab.system import limits

QUIET = "perflab.quiet"  # ctx.meta key: --quiet, read by cli.running.progressbar


def echo(text: str, err: bool = False) -> None:
    """Print a line that may carry text from a file (a result's metadata, a path), its control
    characters escaped so the file cannot drive the terminal."""
    click.echo(terminal.escape(text), err=err)


class UsageMistake(click.ClickException):
    """A bad option or argument: one line (no usage dump) and exit code 2, as click uses."""

    exit_code = 2


# The verbs that are not an experiment's: where each is, its cli module, and the first
# paragraph of its help. An experiment's verb comes from its entry in perflab.lab.registry, its
# module named as the verb ("run core-vs-ht": cli/core_vs_ht.py). A test checks each help line
# is the verb's own; listings show them without importing the verb's module.
OTHER_VERBS = {
    "machine": (
        "machine",
        "CPU, topology, caches, clocks, ASLR, counters, and the conditions that spoil timing.",
    ),
    "report": (
        "report",
        "Read back a result saved with -o: `perflab report FILE`, or `report hosts FILE`.",
    ),
    "track": (
        "track",
        "Measure each commit of RANGE (A..B, or one revision; default HEAD) into the history "
        "store.",
    ),
    "history": (
        "history",
        "The series of every machine in the history store, and where it changed.",
    ),
    "diff": (
        "diff",
        "What changed from BEFORE to AFTER, two results of one experiment: per parameter value, "
        "after/before of the medians with an interval, changes flagged where it excludes 1.",
    ),
}


def _verbs() -> dict[str, tuple[str, str]]:
    """Every verb: where it is ("sweep env-size") -> (its cli module, its help line)."""
    found = dict(OTHER_VERBS)
    for e in EXPERIMENTS.values():
        if e.verb and e.help:
            # a verb with a plan is built from it (cli/verbs.py): no module of its own
            found[e.verb] = ("" if e.plan else e.verb.rpartition(" ")[2].replace("-", "_"), e.help)
    return found


VERBS = _verbs()


class Group(click.Group):
    """Loads verbs on first use; turns user mistakes into one line and an exit, not a traceback."""

    group_class = type  # sweep and run are Groups too, lazy in the same way

    def _lazy(self, ctx: click.Context) -> dict[str, tuple[str, str]]:
        """This group's verbs not loaded yet: name -> (module, help)."""
        names = []
        while ctx.parent is not None:
            names.append(ctx.info_name or "")
            ctx = ctx.parent
        where = " ".join(reversed(names))
        found = {}
        for path, entry in VERBS.items():
            group, _, name = path.rpartition(" ")
            if group == where and name not in self.commands:
                found[name] = entry
        return found

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(self.commands) | set(self._lazy(ctx)))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        lazy = self._lazy(ctx)
        if cmd_name in lazy and lazy[cmd_name][0]:
            importlib.import_module(f"perflab.cli.{lazy[cmd_name][0]}")
        elif cmd_name in lazy:
            from perflab.cli import verbs

            where = " ".join(filter(None, (ctx.info_name if ctx.parent else "", cmd_name)))
            built = [e for e in EXPERIMENTS.values() if e.verb == where and e.plan]
            self.add_command(verbs.build(built[0]))
        return super().get_command(ctx, cmd_name)

    def _short_help(self, ctx: click.Context, name: str, limit: int) -> str:
        """A verb's help in a listing: its own when loaded, else VERBS's, without importing."""
        lazy = self._lazy(ctx)
        if name in lazy:
            return click.Command(name, help=lazy[name][1]).get_short_help_str(limit)
        return self.commands[name].get_short_help_str(limit)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        names = self.list_commands(ctx)
        if not names:
            return
        limit = formatter.width - 6 - max(len(n) for n in names)
        with formatter.section("Commands"):
            formatter.write_dl([(n, self._short_help(ctx, n, limit)) for n in names])

    def shell_complete(self, ctx: click.Context, incomplete: str) -> list[CompletionItem]:
        items = [
            CompletionItem(n, help=self._short_help(ctx, n, 45))
            for n in self.list_commands(ctx)
            if n.startswith(incomplete)
        ]
        return items + click.Command.shell_complete(self, ctx, incomplete)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            limits.load_libraries()  # an address-space limit they cannot load under: one line
            with warnings_as_lines(lambda line: echo(line, err=True)), _term_stops():
                return super().invoke(ctx)
        except click.UsageError as exc:
            where = exc.ctx.command_path if exc.ctx else "perflab"
            raise UsageMistake(f"{exc.format_message()} (see '{where} --help')") from None
        except PerflabError as exc:
            raise click.ClickException(terminal.escape(str(exc))) from None
        except BrokenPipeError:
            raise click.exceptions.Exit(_reader_gone()) from None
        except KeyboardInterrupt as exc:  # where no verb said more (before or after measuring)
            signum = int(getattr(exc, "signum", signal.SIGINT))
            click.echo(f"Error: interrupted by signal {signum}", err=True)
            raise click.exceptions.Exit(128 + signum) from None
        except OSError as exc:
            where = f"{exc.filename}: " if exc.filename else ""
            raise click.ClickException(terminal.escape(f"{where}{exc.strerror or exc}")) from None
        except click.ClickException as exc:  # its line may quote a file (check_complete's)
            exc.message = terminal.escape(exc.message)  # type: ignore[misc,unused-ignore]
            raise
        except (click.exceptions.Exit, click.Abort):
            raise
        except Exception as exc:
            if os.environ.get("PERFLAB_DEBUG"):
                raise
            if limits.out_of_memory(exc):  # a limit or a full machine, not a bug
                raise click.ClickException(limits.out_of_memory_text()) from None
            # A bug, not a user mistake: still one line, with the way to the traceback.
            first = terminal.escape((str(exc).strip().splitlines() or [""])[0][:200])
            raise click.ClickException(
                f"internal error ({type(exc).__name__}: {first}); "
                "PERFLAB_DEBUG=1 shows the traceback, please report it"
            ) from None


@contextlib.contextmanager
def _term_stops() -> Iterator[None]:
    """SIGTERM stops any verb as Ctrl-C does, between runs or in a build alike: what it holds
    is let go (locks, children under a supervisor), what it finished kept, and one line said;
    a sweep's own handler (running/interrupt.py) takes over while it measures."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum: int, frame: object) -> None:
        raise Stopped(signum)

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _reader_gone() -> int:
    """The reader of stdout left (`perflab machine | head -1`): stop quietly, as coreutils do.

    Python ignores SIGPIPE, so the write raised instead of killing the process; the status is
    the one a shell reports for a tool SIGPIPE killed (141), so `set -o pipefail` sees the cut.
    stdout now goes to /dev/null: the interpreter's last flush would fail again at exit.
    """
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # no real descriptor (CliRunner's stdout): nothing to flush
        pass
    return 128 + signal.SIGPIPE


@click.group(cls=Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="perflab")
@click.option(
    "-q", "--quiet", is_flag=True, help="No progress display on stderr (errors still print)."
)
@click.pass_context
def cli(ctx: click.Context, quiet: bool) -> None:
    """perflab: low-level performance experiments on Linux, measured honestly.

    Progress goes to stderr: a bar in a terminal, a line every 10 s or 5 % when stderr is a
    file or a pipe.

    \b
    Shell completion (bash; zsh_source and fish_source for the others):
      eval "$(_PERFLAB_COMPLETE=bash_source perflab)"
    """
    ctx.meta[QUIET] = quiet


@cli.group()
def sweep() -> None:
    """Sweep a condition that biases measurements and record every run."""


@cli.group()
def run() -> None:
    """Run one experiment of the published articles (docs/sources.md)."""


def main() -> None:
    """Console-script entry point."""
    try:
        cli(prog_name="perflab")
    finally:
        # Everything the command built lives until the process ends: the interpreter's
        # collections at exit need not walk it (55 of the 75 ms its teardown took with pandas).
        gc.freeze()
