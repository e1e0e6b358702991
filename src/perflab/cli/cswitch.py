"""`perflab run cswitch`: the cost of a context switch through a pipe."""

import functools

import click

from perflab.cli import run
from perflab.cli.options import check_paths, journal_options, output_options
from perflab.cli.params import Count, cpu_values
from perflab.cli.printing import print_result
from perflab.cli.running import journaled_run, optional_record
from perflab.plan import controls


@run.command("cswitch")
@click.argument("n", type=Count(each_s=controls.CALL_S, what="its round trips"), default=20000)
@click.option(
    "--reps",
    default=3,
    show_default=True,
    type=Count(1, controls.ROW_BYTES, controls.SPAWN_S),
    help="Runs per placement; medians shown.",
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
    callback=cpu_values(2),
    help="CPUs for the pinned runs (first: parent and one-CPU runs, second: child).",
)
@output_options
@journal_options
def cswitch_cmd(
    n: int,
    reps: int,
    rt: bool | None,
    cpus: tuple[int, ...],
    output: str | None,
    as_json: bool,
    plot_path: str | None,
    resume: str | None,
    discard_bad: bool,
) -> None:
    """N one-byte write+read alone, N round trips with a child, and the difference."""
    from perflab.lab import cswitch

    realtime = cswitch.realtime_wanted(rt)
    output, resuming = optional_record(output, resume)
    check_paths(output, plot_path)
    timed = functools.partial(cswitch.run, n, reps, realtime, list(cpus) if cpus else None,
                              output=output, resume=resuming, discard_bad=discard_bad)  # fmt: skip
    df = journaled_run(timed, output, True, f"cswitch {n}")
    print_result(df, as_json, output, plot_path)
    if realtime and not df["rt_applied"].any():
        click.echo("SCHED_RR refused (needs root or RLIMIT_RTPRIO); --no-rt skips it", err=True)
