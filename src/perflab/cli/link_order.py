"""`perflab sweep link-order`: the paper's link-order experiment and the layout behind it."""

from __future__ import annotations

import functools
import shlex
from typing import TYPE_CHECKING, Any

import click

from perflab.cli import sweep
from perflab.cli.options import (
    build_timeout_option,
    check_paths,
    journal_options,
    output_options,
    plan_options,
    run_controls,
)
from perflab.cli.params import WORDS, Words
from perflab.cli.printing import print_result
from perflab.cli.running import Bars, journaled_run, record_path
from perflab.lab.link_order import LinkOrderPlan
from perflab.system import compiler

if TYPE_CHECKING:
    import pandas as pd

PARAMS = ("permutations", "repeat", "order", "mlock")


@sweep.command("link-order")
@click.option(
    "--objects",
    "objects_flag",
    is_flag=True,
    help="The arguments are object files to permute (default: the built-in workload).",
)
@click.option(
    "--cc", type=WORDS, help="Compiler/linker driver, e.g. gcc or 'clang -fuse-ld=lld'. [$CC, cc]"
)
@click.option("--ldflags", default="", type=WORDS, help="Link flags after the objects, e.g. '-lm'.")
@click.option(
    "--link-cmd",
    "template",
    type=Words(("objects", "output")),
    help="Link command template, run without a shell: '{objects}' (one word, replaced by the "
    "objects in order) and '{output}', e.g. 'gcc {objects} -lm -o {output}'.",
)
@click.option(
    "--cflags",
    default=shlex.join(compiler.LINKORDER_CFLAGS),
    show_default=True,
    type=WORDS,
    help="Flags for the built-in workload's objects.",
)
@click.option("--symbol", "symbols", multiple=True, help="Locate this symbol (repeatable).")
@plan_options(LinkOrderPlan, PARAMS)
@run_controls
@journal_options
@build_timeout_option
@output_options
@click.argument("objects", nargs=-1, type=click.Path(dir_okay=False))
def link_order_cmd(objects_flag: bool, cflags: str, resume: str | None, discard_bad: bool,
                   output: str | None, as_json: bool, plot_path: str | None,
                   objects: tuple[str, ...], **params: Any) -> None:  # fmt: skip
    """Link OBJECTS (default: the built-in workload) in every order, run each REPEAT times.

    \b
    perflab sweep link-order --repeat 20 -o lo.parquet --plot lo.png
    perflab sweep link-order --objects a.o b.o c.o --cc gcc --ldflags -lm --permutations 6
    perflab sweep link-order --objects a.o b.o --link-cmd 'gcc {objects} -o {output}'
    """
    from perflab.lab import link_order

    if objects_flag and not objects:
        raise click.BadParameter("--objects needs object files after it", param_hint="--objects")
    if (params["template"] or params["ldflags"]) and not objects:
        raise click.BadParameter("--link-cmd/--ldflags need --objects FILE...")
    named = bool(output or resume)
    output, resuming = record_path(output, resume, "link-order")
    check_paths(output, plot_path)
    bars = Bars()
    sweep_it = functools.partial(
        link_order.sweep, objects, cflags=tuple(shlex.split(cflags)), output=output,
        resume=resuming, discard_bad=discard_bad, on_build=lambda n: bars.open("link", n),
        **params,
    )  # fmt: skip
    df = journaled_run(sweep_it, output, named, "run", bars)
    _report(df, output, plot_path, as_json)


def _report(df: pd.DataFrame, output: str, plot_path: str | None, as_json: bool) -> None:
    """The sweep's summary, as `perflab report` prints its file."""
    from perflab.running.childruns import status_counts

    if not (df["status"] == "ok").any():
        raise click.ClickException(
            f"no run ended 'ok' (status: {status_counts(df)}): nothing to compare; the "
            f"{len(df)} runs are recorded in {output} (see its exit_code and signal columns)"
        )
    print_result(df, as_json, output, plot_path)
