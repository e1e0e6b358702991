"""`perflab compare`: is B faster than A, over random setups rather than one lucky one?"""

from __future__ import annotations

import functools
import shlex
from typing import Any

import click

from perflab.cli import cli
from perflab.cli.common import (
    WORDS,
    Needs,
    check_paths,
    journal_options,
    journaled_run,
    output_options,
    plan_options,
    print_result,
    record_path,
    run_controls,
)
from perflab.lab.plans.compare import Plan


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
@click.option(
    "--cflags-a",
    default="-O2",
    show_default=True,
    type=WORDS,
    cls=Needs,
    needs="use_build",
    help="With --build: A's flags.",
)
@click.option(
    "--cflags-b",
    default="-O3",
    show_default=True,
    type=WORDS,
    cls=Needs,
    needs="use_build",
    help="With --build: B's flags.",
)
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
@click.argument("a", required=False, type=WORDS)
@click.argument("b", required=False, type=WORDS)
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
    print_result(df, as_json, output, plot_path)
