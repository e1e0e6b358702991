"""`perflab report`: a saved result read back as its verb printed it, and a campaign's hosts."""

import click

from perflab.cli import cli, echo
from perflab.cli.exports import export_options, export_path, one_stdout, write_export
from perflab.cli.options import check_paths
from perflab.cli.params import FileToWrite, fraction
from perflab.cli.printing import emit_json, table
from perflab.errors import PerflabError
from perflab.plan import metrics as metric_table


class ReportGroup(click.Group):
    """`perflab report FILE` is `perflab report show FILE`; `report hosts FILE` stays a verb."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ("-h", "--help"):
            args = ["show", *args]
        return super().parse_args(ctx, args)


@cli.group(cls=ReportGroup)
def report() -> None:
    """Read back a result saved with -o: `perflab report FILE`, or `report hosts FILE`."""


@report.command("show")
@click.argument("path", type=click.Path(dir_okay=True))
@click.option("--json", "as_json", is_flag=True, help="Print the summary tables as JSON.")
@click.option("--plot", "plot_path", type=FileToWrite(), help="Redraw the figure to FILE.")
@click.option(
    "--change",
    metavar="PCT",
    callback=lambda ctx, param, text: None if text is None else fraction(text),
    help="For a compare result: the change (2% or 0.02) its setups without a verdict are "
    "weighed against, how many pairs each would need to show it [default: 2%].",
)
@click.option(
    "--metric",
    "metrics",
    multiple=True,
    metavar="METRIC",
    help=f"For a compare result: decide on METRIC too, from what its runs recorded: "
    f"{metric_table.listed('report')}; repeat it or give a comma list.",
)
@export_options
def show_cmd(
    path: str,
    as_json: bool,
    plot_path: str | None,
    change: float | None,
    metrics: tuple[str, ...],
    md_path: str | None,
    html_path: str | None,
) -> None:
    """The summary the experiment's verb printed, and where and how it was measured.

    \b
    perflab report env-size.parquet --plot env-size.png
    perflab report sweep.parquet --md >> pr.md
    perflab report sweep.parquet --html sweep.html
    """
    from perflab.reports import exporters, report

    check_paths(None, plot_path)
    one_stdout(as_json, md_path, html_path)
    md_path, html_path = export_path(md_path, ".md"), export_path(html_path, ".html")
    r = report.report(path, change, ",".join(metrics) or None)
    if plot_path:
        r.plot(plot_path)
    write_export(md_path, lambda: exporters.MARKDOWN.report(r))
    write_export(html_path, lambda: exporters.HTML.report(r))
    if "-" in (md_path, html_path):
        return
    echo(exporters.JSON.report(r) if as_json else exporters.TEXT.report(r))
    if as_json:
        return
    for done, what in ((plot_path, "plot"), (md_path, "markdown"), (html_path, "page")):
        if done:
            echo(f"{what}: {done}")


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
    type=FileToWrite(),
    help="Draw hosts sorted by median to FILE.",
)
def hosts_cmd(
    path: str, value: str, where: tuple[str, ...], as_json: bool, plot_path: str | None
) -> None:
    """Per-host spread of a campaign: medians, fleet distribution, outlier hosts."""
    from perflab.reports import fleet
    from perflab.store import results

    check_paths(None, plot_path)
    df = results.load(path)
    try:
        per_host = fleet.per_host(fleet.select(df, list(where)), value)
    except PerflabError as exc:
        raise PerflabError(f"{path}: {exc}") from None
    summary = fleet.fleet_summary(per_host)
    missing = results.metadata(df).get("missing", [])
    if plot_path:
        fleet.plot_hosts(per_host, value, plot_path)
    if as_json:
        emit_json({"hosts": per_host, "fleet": summary, "missing": missing})
        return
    cols = ["host", "n", "min", "median", "mean", "stdev", "mad", "vs_fleet_pct", "outlier"]
    table(per_host[cols], title=f"per host ({value})")
    echo(
        f"fleet: {summary['hosts']} hosts, median {summary['fleet_median']:,.2f}, "
        f"spread {summary['spread_pct']:.1f} % ({summary['lowest']} lowest, "
        f"{summary['highest']} highest); outliers: "
        f"{', '.join(summary['outliers']) or 'none'}"
    )
    for m in missing:
        echo(f"missing: {m}")
