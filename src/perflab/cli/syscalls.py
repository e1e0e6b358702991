"""`perflab run syscalls`: FileGuard's trimmed table of system-call costs."""

import click

from perflab.cli import run
from perflab.cli.common import (
    at_least_one,
    check_paths,
    output_options,
    print_result,
    progressbar,
)
from perflab.lab.plans import defaults


@run.command("syscalls")
@click.option(
    "--call",
    "calls",
    multiple=True,
    help=f"Calls to time (repeatable): {', '.join(defaults.SYSCALL_NAMES)}.",
)
@click.option("--trials", default=10000, show_default=True, type=int, help="Calls timed each.")
@click.option(
    "--trim",
    default=10,
    show_default=True,
    type=int,
    help="Drop this many best and worst samples too (FileGuard dropped 10 and 10).",
)
@click.option(
    "--dir",
    "directory",
    type=click.Path(file_okay=False),
    help="Directory of the 4 KiB scratch file (default: the temp dir); its filesystem counts.",
)
@output_options
def syscalls_cmd(calls, trials, trim, directory, output, as_json, plot_path):
    """Cost of getpid, open+close, read/write of 4 KiB, stat... in ticks and µs."""
    from perflab.engine import results
    from perflab.lab import syscalls

    at_least_one(trials, "--trials")
    if trim < 0 or 2 * trim >= trials:
        raise click.BadParameter(
            f"must be >= 0 and leave samples: 2*{trim} >= {trials} trials", param_hint="--trim"
        )
    names = syscalls.resolve(calls or syscalls.DEFAULT_CALLS)
    check_paths(output, plot_path)
    with progressbar(len(names), "syscalls") as bar:
        df = syscalls.run(names, trials, directory, bar.update)
    df = results.attach(df, {**results.metadata(df), "trim": trim})
    if output:
        results.save(df, output)
    print_result(df, as_json, output, plot_path)
