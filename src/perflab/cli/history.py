"""`perflab history`: the series per machine from the history store, its change points each
confirmed or dismissed by a comparison, and the CI gate (--fail-above)."""

import math
import sys
from typing import Any

import click

from perflab.cli import cli, echo
from perflab.cli.exports import export_options, export_path, one_stdout, write_export
from perflab.cli.options import build_timeout_option, commit_controls, plan_options
from perflab.cli.params import FileToWrite
from perflab.plan import metrics
from perflab.plan.commits import CommitPlan


def _finite(value: float | None) -> float | None:
    if value is not None and not math.isfinite(value):
        raise click.BadParameter(f"{value} is not a percentage")
    return value


@cli.command("history")
@click.option(
    "--store",
    type=click.Path(file_okay=False),
    default=None,
    help="The history store [default: .perflab/history at the repository's top].",
)
@click.option("--repo", type=click.Path(file_okay=False), default=None,
              help="The git repository the change points' commits are built from [default: "
              "the one around the current directory].")  # fmt: skip
@click.option("--no-confirm", is_flag=True,
              help="Leave the change points unconfirmed: build and run nothing.")  # fmt: skip
@click.option("--confidence", default=0.95, show_default=True,
              type=click.FloatRange(0.5, 1, max_open=True),
              help="The chance that no confirming comparison errs.")  # fmt: skip
@plan_options(CommitPlan)
@click.option("--metric", default="time", show_default=True,
              help=f"The series read: {metrics.listed('history')}.")  # fmt: skip
@click.option("--fail-above", "fail_above", type=click.FloatRange(0, 1000), default=None,
              callback=lambda ctx, param, v: _finite(v),
              metavar="PCT",
              help="Exit with status 4 when the newest confirmed change point of this machine "
              "is a slowdown beyond PCT percent: the CI gate.")  # fmt: skip
@click.option("--json", "as_json", is_flag=True,
              help="Print a machine-readable summary on stdout instead of tables.")  # fmt: skip
@click.option("--plot", "plot_path", type=FileToWrite(), default=None,
              help="Draw the series to FILE (.png, .svg, .pdf).")  # fmt: skip
@export_options
@commit_controls
@build_timeout_option
def history_cmd(store: str | None, repo: str | None, no_confirm: bool, confidence: float,
                setups: int, repeat: int, seed: int, metric: str, fail_above: float | None,
                as_json: bool,
                md_path: str | None, html_path: str | None,
                plot_path: str | None, **children: Any) -> None:  # fmt: skip
    """The series of every machine in the history store, and where it changed.

    Change points are found by PELT (ruptures) on each commit's value; each one of this
    machine is confirmed or dismissed by comparing the commits on either side over random
    layouts, built afresh (kept in the store: the next history does not run it again).

    \b
    perflab history --html history.html
    perflab history --fail-above 2   # in CI: exit 4 on a confirmed slowdown beyond 2 %
    """
    from perflab.analysis import plot
    from perflab.lab import history
    from perflab.reports import exporters

    if fail_above is not None:
        history.gate_can_trip(not no_confirm)
    one_stdout(as_json, md_path, html_path)
    md_path, html_path = export_path(md_path, ".md"), export_path(html_path, ".html")
    if plot_path:
        plot.check_plot_path(plot_path)
    df = history.history(store, repo=repo, confirm=not no_confirm, confidence=confidence,
                         setups=setups, repeat=repeat, seed=seed, metric=metric,
                         controls=children, say=lambda line: echo(line, err=True))  # fmt: skip
    meta = df.attrs["perflab"]
    s = history.summary(df, meta)
    if plot_path:
        history.plot(df, meta, plot_path)
    write_export(md_path, lambda: exporters.MARKDOWN.summary(s) + "\n")
    write_export(html_path, lambda: exporters.HTML.page("perflab history", s))
    if as_json:
        click.echo(exporters.JSON.summary(s))
    elif "-" not in (md_path, html_path):
        for done, what in ((plot_path, "plot"), (md_path, "markdown"), (html_path, "page")):
            if done:
                echo(f"{what}: {done}")
        echo(exporters.TEXT.summary(s))
    said = history.tripped(meta, fail_above / 100) if fail_above is not None else None
    if said:
        echo(f"perflab history: {said}", err=True)
        sys.exit(history.FAILED)
