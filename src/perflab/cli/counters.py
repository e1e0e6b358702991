"""`perflab counters`: which perf events count here and why the others do not; count a command."""

import contextlib
from collections.abc import Iterator
from typing import Any

import click

from perflab.cli import cli
from perflab.cli.common import FileToWrite, Needs, check_paths, print_result
from perflab.lab.plans import defaults


@cli.command("counters", context_settings={"ignore_unknown_options": True})
@click.option("--json", "as_json", is_flag=True, help="Print a machine-readable report.")
@click.option(
    "-o",
    "--output",
    type=FileToWrite(),
    help="Save the counts to FILE (.parquet, or .csv with a JSON sidecar).",
)
@click.option(
    "-e",
    "--event",
    "events",
    multiple=True,
    type=click.Choice(defaults.EVENT_NAMES),
    help="Only these events (repeatable).",
)
@click.option(
    "--output-child",
    type=FileToWrite(writable=True),
    cls=Needs,
    needs="command",
    shown="a COMMAND",
    help="Write COMMAND's standard output to FILE (with --json it goes to stderr otherwise, so "
    "the JSON stays valid).",
)
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
@click.pass_context
def counters_cmd(
    ctx: click.Context,
    as_json: bool,
    output: str | None,
    events: tuple[str, ...],
    output_child: str | None,
    command: tuple[str, ...],
) -> None:
    """List the perf events that count here (with a sample count), or count COMMAND
    (`perflab counters -- make -j2`) with every thread and child it starts.

    With COMMAND, perflab exits with its status (128+N when signal N killed it), as perf stat."""
    from perflab.engine import results
    from perflab.lab import counters

    check_paths(output, None)
    with _child_stdout(output_child, as_json) as stdout:
        out = counters.run(command, events, stdout)
    if output:
        results.save(out, output)
    print_result(out, as_json, output)
    ctx.exit(results.metadata(out)["returncode"] if command else 0)


@contextlib.contextmanager
def _child_stdout(path: str | None, as_json: bool) -> Iterator[Any]:
    """The counted command's stdout: FILE if given, stderr under --json, else perflab's stdout."""
    if path:
        with open(path, "wb") as f:
            yield f
    else:
        yield 2 if as_json else None  # the process's own stderr, whoever wraps sys.stderr
