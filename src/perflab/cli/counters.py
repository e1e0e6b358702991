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
    if command:
        out = counters.count_command(list(command), events or None)
        title = f"counts of {' '.join(command)} (exit status {out.attrs['returncode']})"
        columns = ["event", "count", "status"]
    else:
        out = counters.available()
        if events:
            out = out[out["event"].isin(events)]
        title = "perf events on this machine (count: a small Python region on this thread)"
        columns = ["event", "kind", "count", "status"]
    if output:
        meta = {**machine.metadata(), "counted": list(command) or "a small Python region"}
        results.save(results.attach(out.reset_index(drop=True), meta), output)
    if as_json:
        emit_json({"perf_event_paranoid": machine.perf_paranoid(), "events": records(out)})
        return
    shown = out[columns].copy()
    shown["count"] = [f"{v:,.0f}" if v == v else "-" for v in shown["count"]]
    table(shown, title=title)
    click.echo(f"perf_event_paranoid={machine.perf_paranoid()}")
