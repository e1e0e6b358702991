"""`perflab run cswitch`: the cost of a context switch through a pipe."""

import click

from perflab.cli import run
from perflab.cli.common import (
    at_least_one,
    check_paths,
    output_options,
    print_result,
    progressbar,
)


@run.command("cswitch")
@click.argument("n", type=int, default=20000)
@click.option(
    "--reps", default=3, show_default=True, type=int, help="Runs per placement; medians shown."
)
@click.option(
    "--rt/--no-rt",
    "rt",
    default=None,
    help="Also run with SCHED_RR priority (default: yes unless BENCH_NORT is set).",
)
@click.option(
    "--cpu",
    "cpus",
    multiple=True,
    type=int,
    help="CPUs for the pinned runs (first: parent and one-CPU runs, second: child).",
)
@output_options
def cswitch_cmd(n, reps, rt, cpus, output, as_json, plot_path):
    """N one-byte write+read alone, N round trips with a child, and the difference."""
    from perflab.engine import results
    from perflab.lab import cswitch

    at_least_one(n, "N")
    at_least_one(reps, "--reps")
    places = cswitch.placements(list(cpus) if cpus else None)
    realtime = cswitch.realtime_wanted(rt)
    check_paths(output, plot_path)
    runs = len(places) * reps * (2 if realtime else 1)
    with progressbar(runs, f"cswitch {n}") as bar:
        df = cswitch.run(n, reps, realtime, list(cpus) if cpus else None, bar.update)
    if output:
        results.save(df, output)
    print_result(df, as_json, output, plot_path)
    if realtime and not df["rt_applied"].any():
        click.echo("SCHED_RR refused (needs root or RLIMIT_RTPRIO); --no-rt skips it", err=True)
