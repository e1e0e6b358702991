"""`perflab run trig`: what libm's first call costs against the warm ones."""

import click

from perflab.cli import run
from perflab.cli.common import (
    at_least_one,
    check_paths,
    output_options,
    print_result,
    progressbar,
)


@run.command("trig")
@click.argument("calls", nargs=-1)
@click.option(
    "--repeat",
    default=10,
    show_default=True,
    type=int,
    help="Warm repeats of the sequence (trig-rep used 10); shows the histogram.",
)
@click.option(
    "--cold",
    "cold_runs",
    default=0,
    type=int,
    help="Also run the sequence once in each of N fresh processes (first calls fault).",
)
@output_options
def trig_cmd(calls, repeat, cold_runs, output, as_json, plot_path):
    """Ticks of libm calls (default sin(1.0) tan(1.0) sin(0.0)), timer cost subtracted."""
    from perflab.engine import results
    from perflab.lab import trig

    at_least_one(repeat, "--repeat")
    if cold_runs < 0:
        raise click.BadParameter(f"must be >= 0, not {cold_runs}", param_hint="--cold")
    texts = calls or trig.DEFAULT_CALLS
    for text in texts:
        trig.parse_call(text)
    check_paths(output, plot_path)
    if cold_runs:
        with progressbar(cold_runs, "fresh processes") as bar:
            df = trig.run(texts, repeat, cold_runs, bar.update)
    else:
        df = trig.run(texts, repeat)
    if output:
        results.save(df, output)
    print_result(df, as_json, output, plot_path)
