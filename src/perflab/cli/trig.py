"""`perflab run trig`: what libm's first call costs against the warm ones."""

import functools

import click

from perflab.cli import run
from perflab.cli.options import check_paths, journal_options, output_options
from perflab.cli.params import Count
from perflab.cli.printing import print_result
from perflab.cli.running import journaled_run, optional_record
from perflab.plan import controls


@run.command("trig")
@click.argument("calls", nargs=-1)
@click.option(
    "--repeat",
    default=10,
    show_default=True,
    type=Count(1, controls.ROW_BYTES, controls.CALL_S),
    help="Warm repeats of the sequence (trig-rep used 10), each call a batch lasting 200 "
    "timer steps; shows the histogram.",
)
@click.option(
    "--cold",
    "cold_runs",
    default=0,
    type=Count(0, controls.ROW_BYTES, controls.SPAWN_S, "its rows (one a process)"),
    help="Also run the sequence once in each of N fresh processes (first calls fault).",
)
@output_options
@journal_options
def trig_cmd(
    calls: tuple[str, ...],
    repeat: int,
    cold_runs: int,
    output: str | None,
    as_json: bool,
    plot_path: str | None,
    resume: str | None,
    discard_bad: bool,
) -> None:
    """Ticks of libm calls (default sin(1.0) tan(1.0) sin(0.0)), timer cost subtracted."""
    from perflab.lab import trig

    texts = calls or trig.DEFAULT_CALLS
    for text in texts:
        trig.parse_call(text)
    output, resuming = optional_record(output, resume)
    check_paths(output, plot_path)
    timed = functools.partial(trig.run, texts, repeat, cold_runs, output=output,
                              resume=resuming, discard_bad=discard_bad)  # fmt: skip
    df = journaled_run(timed, output, True, "trig")
    print_result(df, as_json, output, plot_path)
