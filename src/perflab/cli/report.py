"""`perflab report`: views of saved results."""

import click

from perflab import fleet, results
from perflab.cli import cli
from perflab.cli.common import check_paths, emit_json, records, table


@cli.group()
def report() -> None:
    """Summaries of results saved with -o."""


@report.command("hosts")
@click.argument("path", type=click.Path(dir_okay=False))
@click.option(
    "--value", default="ticks", show_default=True, help="The value column to compare across hosts."
)
@click.option(
    "--where",
    multiple=True,
    metavar="COLUMN=VALUE",
    help="Only rows where COLUMN equals VALUE (repeatable), e.g. condition=alone.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the per-host table as JSON.")
@click.option(
    "--plot",
    "plot_path",
    type=click.Path(dir_okay=False),
    help="Draw hosts sorted by median to FILE.",
)
def hosts_cmd(path, value, where, as_json, plot_path):
    """Per-host spread of a campaign: medians, fleet distribution, outlier hosts."""
    check_paths(None, plot_path)
    df = results.load(path)
    per_host = fleet.per_host(fleet.select(df, list(where)), value)
    summary = fleet.fleet_summary(per_host)
    missing = results.metadata(df).get("missing", [])
    if plot_path:
        fleet.plot_hosts(per_host, value, plot_path)
    if as_json:
        emit_json({"hosts": records(per_host), "fleet": summary, "missing": missing})
        return
    cols = ["host", "n", "min", "median", "mean", "stdev", "mad", "vs_fleet_pct", "outlier"]
    table(per_host[cols], title=f"per host ({value})")
    click.echo(
        f"fleet: {summary['hosts']} hosts, median {summary['fleet_median']:,.2f}, "
        f"spread {summary['spread_pct']:.1f} % ({summary['lowest']} lowest, "
        f"{summary['highest']} highest); outliers: "
        f"{', '.join(summary['outliers']) or 'none'}"
    )
    for m in missing:
        click.echo(f"missing: {m}")
