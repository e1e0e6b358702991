"""`perflab run syscalls`: FileGuard's trimmed table of system-call costs."""

import functools

import click

from perflab.cli import run
from perflab.cli.options import check_paths, journal_options, output_options
from perflab.cli.params import Count
from perflab.cli.printing import print_result
from perflab.cli.running import journaled_run, optional_record
from perflab.lab.plans import defaults
from perflab.plan import controls


@run.command("syscalls")
@click.option(
    "--call",
    "calls",
    multiple=True,
    help=f"Calls to time (repeatable): {', '.join(defaults.SYSCALL_NAMES)}.",
)
@click.option(
    "--trials",
    default=10000,
    show_default=True,
    type=Count(1, controls.ROW_BYTES, controls.CALL_S, "its rows (one a call timed)"),
    help="Samples of each call, each of enough back-to-back calls to last 200 timer steps.",
)
@click.option(
    "--trim",
    default=10,
    show_default=True,
    type=Count(0),
    help="Drop this many best and worst samples too (FileGuard dropped 10 and 10).",
)
@click.option(
    "--dir",
    "directory",
    type=click.Path(file_okay=False),
    help="Directory of the 4 KiB scratch file (default: the temp dir); its filesystem counts.",
)
@output_options
@journal_options
def syscalls_cmd(
    calls: tuple[str, ...],
    trials: int,
    trim: int,
    directory: str | None,
    output: str | None,
    as_json: bool,
    plot_path: str | None,
    resume: str | None,
    discard_bad: bool,
) -> None:
    """Cost of getpid, open+close, read/write of 4 KiB, stat... in ticks and µs."""
    from perflab.lab import syscalls

    if 2 * trim >= trials:
        raise click.BadParameter(
            f"must leave samples: 2*{trim} >= {trials} trials", param_hint="--trim"
        )
    names = syscalls.resolve(calls or syscalls.DEFAULT_CALLS)
    output, resuming = optional_record(output, resume)
    check_paths(output, plot_path)
    timed = functools.partial(syscalls.run, names, trials, directory, output=output,
                              resume=resuming, discard_bad=discard_bad,
                              extra_meta={"trim": trim})  # fmt: skip
    df = journaled_run(timed, output, True, "syscalls")
    print_result(df, as_json, output, plot_path)
