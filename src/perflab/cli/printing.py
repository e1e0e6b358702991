"""What a verb prints: tables, JSON on stdout, and a measured frame as `perflab report`
shows it."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

from perflab.cli import echo

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

    from perflab.reports import report


def emit_json(obj: Any) -> None:
    """Print one JSON document on stdout (NaN as null)."""
    from perflab.reports import exporters

    click.echo(exporters.json_text(obj))


def table(df: pd.DataFrame, floatfmt: str = "{:,.2f}", title: str | None = None) -> None:
    """Print a text table as reports render it."""
    from perflab.reports import exporters

    echo(exporters.text_table(df, floatfmt, title))


def print_result(
    df: pd.DataFrame,
    as_json: bool,
    output: str | None = None,
    plot_path: str | None = None,
    draw: Callable[[report.Report], Figure] | None = None,
    err: bool = False,
) -> report.Report:
    """Print what a verb just measured as `perflab report` prints the file it saved: the
    summary's text after where the data and figure went, or the report's JSON document. The
    figure is the summary's, or draw(report)'s when the verb has its own view of it.
    err: the text on stderr, where a verb leaves stdout to the program it ran."""
    from perflab.reports import exporters
    from perflab.reports import report as reports

    shown = reports.of_frame(df, output)
    if plot_path:
        shown.plot(plot_path, None if draw is None else draw(shown))
    if as_json:
        click.echo(exporters.JSON.report(shown))
        return shown
    if output:
        echo(f"data: {output}", err=err)
    if plot_path:
        echo(f"plot: {plot_path}", err=err)
    echo(exporters.TEXT.summary(shown.summary), err=err)
    return shown
