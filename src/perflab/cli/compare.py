"""`perflab compare`: is B faster than A, over random setups rather than one lucky one?"""

from __future__ import annotations

import functools
import shlex
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import click

from perflab.cli import cli
from perflab.cli.common import (
    check_paths,
    emit_json,
    interference_report,
    journal_options,
    journaled_run,
    output_options,
    plan_options,
    record_path,
    records,
    run_controls,
    table,
)
from perflab.lab.plans.compare import Plan

if TYPE_CHECKING:
    import pandas as pd

    from perflab.lab import compare


def _randomize(
    ctx: click.Context, param: click.Parameter, value: str | None
) -> tuple[str, ...] | None:
    from perflab.lab import compare

    return compare.parse_randomize(value) if value is not None else None


@cli.command("compare")
@click.option(
    "--build",
    "use_build",
    is_flag=True,
    help="Compare two builds of the built-in multi-object workload instead of two programs.",
)
@click.option("--cflags-a", default="-O2", show_default=True, help="With --build: A's flags.")
@click.option("--cflags-b", default="-O3", show_default=True, help="With --build: B's flags.")
@click.option(
    "--randomize",
    callback=_randomize,
    help="Setup dimensions drawn at random per setup: env-size, link-order (--build only), "
    "or none. [default: env-size, plus link-order with --build]",
)
@plan_options(Plan, ("setups", "repeat", "env_max"))
@run_controls
@journal_options
@output_options
@click.argument("a", required=False)
@click.argument("b", required=False)
def compare_cmd(use_build: bool, cflags_a: str, cflags_b: str,
                randomize: tuple[str, ...] | None, resume: str | None, discard_bad: bool,
                output: str | None, as_json: bool, plot_path: str | None, a: str | None,
                b: str | None, **params: Any) -> None:  # fmt: skip
    """Run A and B interleaved in random setups; report B/A per setup and over all of them.

    \b
    perflab compare ./old ./new --setups 20 --repeat 10
    perflab compare './prog --fast' './prog --careful' --randomize env-size
    perflab compare --build --cflags-a -O2 --cflags-b -O3 --plot ab.png
    """
    from perflab.lab import compare

    if use_build and (a or b):
        raise click.BadParameter("give either two programs or --build, not both")
    if not use_build and not (a and b):
        raise click.BadParameter("give two programs A B (or --build to compare two builds)")
    named = bool(output or resume)
    output, resuming = record_path(output, resume, "compare")
    check_paths(output, plot_path)
    if randomize is None:
        randomize = ("env-size", "link-order") if use_build else ("env-size",)
    if use_build:
        side_a = compare.build_side("A", shlex.split(cflags_a))
        side_b = compare.build_side("B", shlex.split(cflags_b))
    else:
        assert a and b  # refused above without both
        side_a, side_b = compare.program_side("A", a), compare.program_side("B", b)
    run = functools.partial(compare.compare, side_a, side_b, randomize=randomize, output=output,
                            resume=resuming, discard_bad=discard_bad, **params)  # fmt: skip
    df = journaled_run(run, output, named, "compare")
    _report(df, side_a, side_b, randomize, output, plot_path, as_json)


def _report(
    df: pd.DataFrame,
    side_a: compare.Side,
    side_b: compare.Side,
    randomize: Sequence[str],
    output: str,
    plot_path: str | None,
    as_json: bool,
) -> None:
    """B/A per setup and over all setups: as tables, or as one JSON document."""
    from perflab.analysis import plot
    from perflab.engine import results
    from perflab.engine.childruns import status_counts
    from perflab.lab import compare

    value = compare.value_column(df)
    per = compare.per_setup(df, value)
    summary = compare.overall(df, per, value)
    if plot_path:
        compare.plot(df, plot_path, per, summary)
    if as_json:
        emit_json(
            {
                "a": side_a.label,
                "b": side_b.label,
                "randomize": list(randomize),
                "value": value,
                "runs": len(df),
                "status": status_counts(df),
                "output": output,
                "plot": plot_path,
                "identical": results.metadata(df)["identical"],
                "overall": summary,
                "setups": records(per),
                "interference": results.metadata(df).get("interference"),
            }
        )
        return
    click.echo(f"A: {side_a.label}\nB: {side_b.label}")
    if results.metadata(df)["identical"]:
        click.echo("note: A and B are byte-identical programs run with the same arguments")
    click.echo(f"{len(df)} runs, status {status_counts(df)}; randomized: {', '.join(randomize)}")
    cols = ["setup", "env_size", "link_order", "median_a", "median_b", "ratio", "ci_low",
            "ci_high", "verdict"]  # fmt: skip
    shown = per[cols].astype({"median_a": "int64", "median_b": "int64"})
    table(shown, "{:,.3f}", title=f"B/A of median {value} per setup (-1: no padding)")
    click.echo(
        f"\nper setup: B/A from {summary['min_ratio']:.3f} to {summary['max_ratio']:.3f}; "
        f"B slower in {summary['b_slower']}, faster in {summary['b_faster']}, "
        f"unclear in {summary['unclear']} of {summary['setups']}"
    )
    click.echo(summary["conclusion"])
    interference_report(df)
    click.echo(f"data: {output}")
    if plot_path:
        click.echo(f"plot: {plot.check_plot_path(plot_path)}")
