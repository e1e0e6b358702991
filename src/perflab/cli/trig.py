"""`perflab run trig`: what libm's first call costs against the warm ones."""

import functools

import click

from perflab.cli import run
from perflab.cli.common import (
    at_least_one,
    check_paths,
    emit_json,
    journal_options,
    journaled_run,
    optional_record,
    output_options,
    records,
    table,
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
@journal_options
def trig_cmd(calls, repeat, cold_runs, output, as_json, plot_path, resume, discard_bad):
    """Ticks of libm calls (default sin(1.0) tan(1.0) sin(0.0)), timer cost subtracted."""
    from perflab.lab import trig

    at_least_one(repeat, "--repeat")
    if cold_runs < 0:
        raise click.BadParameter(f"must be >= 0, not {cold_runs}", param_hint="--cold")
    texts = calls or trig.DEFAULT_CALLS
    for text in texts:
        trig.parse_call(text)
    output, resuming = optional_record(output, resume)
    check_paths(output, plot_path)
    timed = functools.partial(trig.run, texts, repeat, cold_runs, output=output,
                              resume=resuming, discard_bad=discard_bad)  # fmt: skip
    df = journaled_run(timed, output, True, "trig")
    summ, hist, conv = trig.summarize(df), trig.histogram(df), trig.convergence(df)
    if plot_path:
        trig.plot(df, plot_path)
    if as_json:
        emit_json(
            {
                "repeat": repeat,
                "cold_runs": cold_runs,
                "summary": records(summ),
                "histogram": records(hist),
                "running_min": records(conv),
            }
        )
        return
    for r in summ.itertuples(index=False):
        cold = (
            f"; cold first call {r.cold_min:,}..{r.cold_median:,.0f} (min..median of {cold_runs})"
            if cold_runs
            else ""
        )
        click.echo(f"{r.call} takes {r.warm_min:5d} ticks (warm min of {repeat}){cold}")
    click.echo()
    table(hist.tail(max(3, len(summ))), "{:.0f}", title="sort | uniq -c | sort | tail")
    click.echo()
    table(conv, "{:.0f}", title="running minimum per repeat")
