"""`perflab counters`: which perf events count here and why the others do not; count a command."""

import click

from perflab import counters, machine, results
from perflab.cli import cli
from perflab.cli.common import check_paths, emit_json, records, table


@cli.command("counters", context_settings={"ignore_unknown_options": True})
@click.option("--json", "as_json", is_flag=True, help="Print a machine-readable report.")
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False),
    help="Save the counts to FILE (.parquet, or .csv with a JSON sidecar).",
)
@click.option(
    "-e",
    "--event",
    "events",
    multiple=True,
    type=click.Choice(list(counters.EVENTS)),
    help="Only these events (repeatable).",
)
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
def counters_cmd(as_json, output, events, command):
    """List the perf events that count here (with a sample count), or count COMMAND
    (`perflab counters -- make -j2`) with every thread and child it starts."""
    check_paths(output, None)
    out = counters.run(command, events)
    if command:
        status = results.metadata(out)["returncode"]
        title = f"counts of {' '.join(command)} (exit status {status})"
    else:
        title = "perf events on this machine (count: a small Python region on this thread)"
    if output:
        results.save(out, output)
    if as_json:
        emit_json({"perf_event_paranoid": machine.perf_paranoid(), "events": records(out)})
        return
    shown = counters.summarize(out)
    if not command:
        shown.insert(1, "kind", out["kind"])
    table(shown, title=title)
    click.echo(f"perf_event_paranoid={machine.perf_paranoid()}")
