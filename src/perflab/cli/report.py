"""`perflab report` and `perflab diff`: saved results read back, and two of them compared."""

import sys
from pathlib import Path

import click

from perflab.cli import cli
from perflab.cli.common import check_paths, emit_json, records, table
from perflab.errors import PerflabError


class ReportGroup(click.Group):
    """`perflab report FILE` is `perflab report show FILE`; `report hosts FILE` stays a verb."""

    def parse_args(self, ctx, args):
        if args and args[0] not in self.commands and args[0] not in ("-h", "--help"):
            args = ["show", *args]
        return super().parse_args(ctx, args)


def _export_path(path: str | None, suffix: str) -> str | None:
    """An export path ('-' for stdout) checked before any work: suffix and directory."""
    if path is None or path == "-":
        return path
    p = Path(path)
    if p.suffix != suffix:
        raise PerflabError(f"{p}: expected a {suffix} file")
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise PerflabError(f"{p}: directory {parent} does not exist")
    return path


def _write(path: str | None, render) -> None:
    """Render only when asked: a page draws its figure."""
    if path == "-":
        sys.stdout.write(render())
    elif path:
        Path(path).write_text(render(), encoding="utf-8")


def export_options(func):
    """--md FILE and --html FILE ('-': stdout), checked before the files are read."""
    func = click.option(
        "--html",
        "html_path",
        metavar="FILE",
        help="Write one self-contained page (figure embedded) to FILE.html; opens offline.",
    )(func)
    return click.option(
        "--md",
        "md_path",
        metavar="FILE",
        help="Write GitHub Markdown tables to FILE.md ('-': stdout), to paste into a PR.",
    )(func)


@cli.group(cls=ReportGroup)
def report() -> None:
    """Read back a result saved with -o: `perflab report FILE`, or `report hosts FILE`."""


@report.command("show")
@click.argument("path", type=click.Path(dir_okay=True))
@click.option("--json", "as_json", is_flag=True, help="Print the summary tables as JSON.")
@click.option(
    "--plot", "plot_path", type=click.Path(dir_okay=False), help="Redraw the figure to FILE."
)
@export_options
def show_cmd(path, as_json, plot_path, md_path, html_path):
    """The summary the experiment's verb printed, and where and how it was measured.

    \b
    perflab report env-size.parquet --plot env-size.png
    perflab report sweep.parquet --md - >> pr.md
    perflab report sweep.parquet --html sweep.html
    """
    from perflab import exports, reports

    check_paths(None, plot_path)
    md_path, html_path = _export_path(md_path, ".md"), _export_path(html_path, ".html")
    r = reports.report(path)
    if plot_path:
        r.plot(plot_path)
    _write(md_path, lambda: exports.report_markdown(r))
    _write(html_path, lambda: exports.report_html(r))
    if "-" in (md_path, html_path):
        return
    if as_json:
        emit_json(
            {
                "file": r.path,
                "experiment": r.experiment,
                "partial": r.partial,
                "notes": r.notes,
                "lines": r.summary.lines,
                **r.summary.values,
                **{name: records(frame) for name, frame in r.tables.items()},
                "conditions": r.conditions(),
                "metadata": r.meta,
            }
        )
        return
    click.echo(f"{r.experiment} result {r.path}")
    if r.partial:
        click.echo(f"PARTIAL: {r.partial}")
    for line in r.summary.lines + r.notes:
        click.echo(line)
    for t in r.summary.tables:
        if len(t.display.columns):
            click.echo()
            table(t.display, t.floatfmt, title=t.title)
    click.echo("\nmeasured on:")
    for k, v in r.conditions().items():
        click.echo(f"  {k}: {exports.cell(v)}")
    for done, what in ((plot_path, "plot"), (md_path, "markdown"), (html_path, "page")):
        if done:
            click.echo(f"{what}: {done}")


@cli.command("diff")
@click.argument("before", type=click.Path(dir_okay=True))
@click.argument("after", type=click.Path(dir_okay=True))
@click.option(
    "--confidence",
    default=0.95,
    show_default=True,
    type=click.FloatRange(0, 1, min_open=True, max_open=True),
    help="Level that holds for all points together (each point's interval is wider).",
)
@click.option(
    "--intersect", is_flag=True, help="Compare the parameter values both files have, not refuse."
)
@click.option("--all", "show_all", is_flag=True, help="Print every point, not only the changed.")
@click.option("--json", "as_json", is_flag=True, help="Print the verdict and every point as JSON.")
@click.option(
    "--plot",
    "plot_path",
    type=click.Path(dir_okay=False),
    help="Draw the ratio along the parameter, its interval as a band, to FILE.",
)
@export_options
def diff_cmd(before, after, confidence, intersect, show_all, as_json, plot_path, md_path,
             html_path):  # fmt: skip
    """What changed from BEFORE to AFTER, two results of one experiment: per parameter value,
    after/before of the medians with an interval, changes flagged where it excludes 1.

    \b
    perflab diff main.parquet branch.parquet --plot diff.png
    perflab diff old.parquet new.parquet --md - >> pr.md
    """
    from perflab import diffs, exports

    check_paths(None, plot_path)
    md_path, html_path = _export_path(md_path, ".md"), _export_path(html_path, ".html")
    d = diffs.diff(before, after, confidence, intersect)
    if plot_path:
        d.plot(plot_path)
    _write(md_path, lambda: exports.diff_markdown(d, d.table if show_all else None))
    _write(html_path, lambda: exports.diff_html(d))
    if "-" in (md_path, html_path):
        return
    if as_json:
        emit_json({**diffs.summary_values(d), "points_table": records(d.table)})
        return
    for w in d.warnings:
        click.echo(f"warning: {w}", err=True)
    for n in d.notes:
        click.echo(n)
    shown = d.table if show_all else d.flagged
    if len(shown):
        level = d.table.attrs["level"]
        table(shown, "{:,.3f}", title=f"after/before of median {d.value} ({level:.4%} per point)")
    click.echo(d.verdict)
    for done, what in ((plot_path, "plot"), (md_path, "markdown"), (html_path, "page")):
        if done:
            click.echo(f"{what}: {done}")


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
    from perflab import fleet, results

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
