"""`perflab run pagefault`: what a page fault costs, per page."""

import functools

import click

from perflab.cli import run
from perflab.cli.options import check_paths, journal_options, output_options
from perflab.cli.params import Count
from perflab.cli.printing import print_result
from perflab.cli.running import journaled_run, optional_record
from perflab.lab.plans import defaults
from perflab.plan import controls


@run.command("pagefault")
@click.option(
    "--pages",
    default=1024,
    show_default=True,
    type=Count(1, defaults.PAGE, controls.CALL_S, "its region"),
    help="4 KiB pages touched per region.",
)
@click.option(
    "--reps",
    default=20,
    show_default=True,
    type=Count(1, controls.ROW_BYTES, controls.CALL_S),
    help="Fresh regions measured per condition.",
)
@output_options
@journal_options
def pagefault_cmd(
    pages: int,
    reps: int,
    output: str | None,
    as_json: bool,
    plot_path: str | None,
    resume: str | None,
    discard_bad: bool,
) -> None:
    """Ticks per page: first touch (a fault each) vs touching again vs mlock'ed memory."""
    from perflab.lab import pagefault

    output, resuming = optional_record(output, resume)
    check_paths(output, plot_path)
    touched = functools.partial(pagefault.run, pages, reps, output=output, resume=resuming,
                                discard_bad=discard_bad)  # fmt: skip
    df = journaled_run(touched, output, True, "page faults")
    print_result(df, as_json, output, plot_path)
