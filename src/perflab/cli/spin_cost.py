"""`perflab run spin-cost`: what one turn of the core's spin loop costs."""

import click

from perflab.cli import run
from perflab.cli.options import check_paths, output_options
from perflab.cli.params import Count
from perflab.cli.printing import print_result
from perflab.plan import controls


@run.command("spin-cost")
@click.option(
    "--samples",
    default=50,
    show_default=True,
    type=Count(1, controls.ROW_BYTES),
    help="Samples per length.",
)
@output_options
def spin_cost_cmd(samples: int, output: str | None, as_json: bool, plot_path: str | None) -> None:
    """Ticks per turn of the core's spin loop, at 1000 to 8000 turns."""
    from perflab.lab import spin_cost
    from perflab.store import results

    check_paths(output, plot_path)
    df = spin_cost.run(samples=samples)
    if output:
        results.save(df, output)
    print_result(df, as_json, output, plot_path)
