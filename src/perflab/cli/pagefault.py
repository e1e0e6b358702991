"""`perflab run pagefault`: what a page fault costs, per page."""

import click

from perflab.cli import run
from perflab.cli.common import check_paths, output_options, print_result, progressbar


@run.command("pagefault")
@click.option(
    "--pages", default=1024, show_default=True, type=int, help="4 KiB pages touched per region."
)
@click.option(
    "--reps", default=20, show_default=True, type=int, help="Fresh regions measured per condition."
)
@output_options
def pagefault_cmd(pages, reps, output, as_json, plot_path):
    """Ticks per page: first touch (a fault each) vs touching again vs mlock'ed memory."""
    from perflab.engine import results
    from perflab.lab import pagefault

    if pages < 1:
        raise click.BadParameter(f"must be at least 1, not {pages}", param_hint="--pages")
    if reps < 1:
        raise click.BadParameter(f"must be at least 1, not {reps}", param_hint="--reps")
    check_paths(output, plot_path)
    with progressbar(reps, "page faults") as bar:
        df = pagefault.run(pages, reps, bar.update)
    if output:
        results.save(df, output)
    print_result(df, as_json, output, plot_path)
