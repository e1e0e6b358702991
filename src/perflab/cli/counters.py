"""`perflab counters`: which perf events count here and why the others do not; count a command."""

import click

from perflab.cli import cli
from perflab.cli.options import check_paths, program_output_option, program_where
from perflab.cli.params import SECONDS, FileToWrite, Needs
from perflab.cli.printing import print_result
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
@program_output_option(
    "inherit, or null with --json",
    "the counts go to stderr, or as JSON to stdout, never into the program's stream",
    "--output-child",
)
@click.option(
    "--timeout",
    type=SECONDS,
    cls=Needs,
    needs="command",
    shown="a COMMAND",
    help="Seconds before COMMAND is killed (its counts up to then are reported).",
)
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
@click.pass_context
def counters_cmd(
    ctx: click.Context,
    as_json: bool,
    output: str | None,
    events: tuple[str, ...],
    program_output: str | None,
    timeout: float | None,
    command: tuple[str, ...],
) -> None:
    """List the perf events that count here (with a sample count), or count COMMAND
    (`perflab counters -- make -j2`) with every thread and child it starts.

    Its counts go to stderr, as perf stat's, so that COMMAND's own stdout stays whole.
    With COMMAND, perflab exits with its status (128+N when signal N killed it), as perf stat."""
    from perflab.lab import counters
    from perflab.running import program_output as streams
    from perflab.store import results

    check_paths(output, None)
    if program_output and not command:
        raise click.UsageError("--program-output needs a COMMAND")
    with streams.opened(program_where(program_output, as_json)) as fd:
        out = counters.run(command, events, fd, fd, timeout)
    if output:
        results.save(out, output)
    print_result(out, as_json, output, err=bool(command))
    ctx.exit(results.metadata(out)["returncode"] if command else 0)
