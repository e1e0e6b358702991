"""`perflab diff`: what changed from one saved result to another, with intervals."""

import math
from typing import TYPE_CHECKING

import click

from perflab.cli import cli, echo
from perflab.cli.exports import export_options, export_path, one_stdout, write_export
from perflab.cli.options import check_paths
from perflab.cli.params import FileToWrite, fraction
from perflab.cli.printing import emit_json, table
from perflab.plan import metrics

if TYPE_CHECKING:
    import pandas as pd


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
@click.option(
    "--force",
    is_flag=True,
    help="Compare results whose parameters that define a point differ (another loop count), "
    "after a warning, instead of refusing.",
)
@click.option(
    "--change",
    default="2%",
    show_default=True,
    metavar="PCT",
    callback=lambda ctx, param, text: fraction(text),
    help="The smallest change of interest (2% or 0.02): for each point without a decision, "
    "diff says how many runs would show a change this large.",
)
@click.option(
    "--metric",
    default="time",
    show_default=True,
    help="What is compared: " + metrics.listed("diff", time="the experiment's own value") + ".",
)
@click.option("--all", "show_all", is_flag=True, help="Print every point, not only the changed.")
@click.option("--json", "as_json", is_flag=True, help="Print the verdict and every point as JSON.")
@click.option(
    "--plot",
    "plot_path",
    type=FileToWrite(),
    help="Draw the ratio along the parameter, its interval as a band, to FILE.",
)
@export_options
def diff_cmd(
    before: str,
    after: str,
    confidence: float,
    intersect: bool,
    force: bool,
    change: float,
    metric: str,
    show_all: bool,
    as_json: bool,
    plot_path: str | None,
    md_path: str | None,
    html_path: str | None,
) -> None:
    """What changed from BEFORE to AFTER, two results of one experiment: per parameter value,
    after/before of the medians with an interval, changes flagged where it excludes 1.

    Results whose points measure different things (another loop count) are refused unless
    --force; what makes either file doubtful is warned first, on stderr.

    \b
    perflab diff main.parquet branch.parquet --plot diff.png
    perflab diff old.parquet new.parquet --md >> pr.md
    """
    from perflab.reports import diff, exporters

    check_paths(None, plot_path)
    one_stdout(as_json, md_path, html_path)
    md_path, html_path = export_path(md_path, ".md"), export_path(html_path, ".html")
    d = diff.diff(before, after, confidence, intersect, force, change, metric)
    if plot_path:
        d.plot(plot_path)
    write_export(md_path, lambda: exporters.diff_markdown(d, d.table if show_all else None))
    write_export(html_path, lambda: exporters.diff_html(d))
    if "-" in (md_path, html_path):
        return
    if as_json:
        emit_json({**diff.summary_values(d), "points_table": d.table})
        return
    for n in d.notes:
        echo(n)
    shown = d.table if show_all else d.flagged
    if len(shown):
        level = d.table.attrs["level"]
        title = f"after/before of median {d.value} ({level:.4%} per point)"
        table(_whole_medians(shown), "{:,.3f}", title=title)
    echo(d.verdict)
    for done, what in ((plot_path, "plot"), (md_path, "markdown"), (html_path, "page")):
        if done:
            echo(f"{what}: {done}")


def _whole_medians(shown: "pd.DataFrame") -> "pd.DataFrame":
    """Medians of 100 and more as whole numbers: '196,378.000 ticks' shows digits no clock has;
    the ratios keep their three decimals."""
    out = shown.copy()
    for col in ("median_before", "median_after"):
        values = out[col].dropna() if col in out else None
        if values is not None and len(values) and (values.abs() >= 100).all():
            out[col] = [f"{v:,.0f}" if math.isfinite(v) else "" for v in out[col]]
    return out
