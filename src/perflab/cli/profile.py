"""`perflab profile -- PROGRAM ARGS`: where each thread's time goes (easyperf's per-thread view)."""

import signal
import sys
from collections.abc import Callable
from typing import Any

import click

from perflab.cli import cli
from perflab.cli.options import check_paths, output_options, program_output_option, program_where
from perflab.cli.params import Number, cpu_list
from perflab.cli.printing import print_result
from perflab.lab import contention as contention_plan
from perflab.lab.plans import defaults


def _progress() -> Callable[[float, int], None] | None:
    """A status line on a terminal's stderr once the run has lasted a second."""
    if not sys.stderr.isatty():
        return None

    def show(elapsed: float, threads: int) -> None:
        if elapsed >= 1:
            click.echo(f"\rprofiling: {elapsed:.0f} s, {threads} threads seen", err=True, nl=False)

    return show


@cli.command("profile", context_settings={"ignore_unknown_options": True})
@click.option(
    "--interval",
    type=Number(0.001, 10),
    default=defaults.PROFILE_INTERVAL_S,
    show_default=True,
    help="Seconds between two readings of the threads; a thread that lives less than this may "
    "be seen only in the '(between readings)' row.",
)
@click.option(
    "--cpu",
    "cpus",
    callback=cpu_list,
    help="Pin the program (all its threads) to these CPUs, e.g. 0-1. [default: not pinned]",
)
@click.option("--timeout", type=Number(0.001, 1e6), help="Seconds before the program is killed.")
@click.option(
    "--strace",
    "use_strace",
    is_flag=True,
    help="Run the program under strace -f -T for the time each thread spends in each system "
    "call (futex, read, ...); ptrace slows every call, so the other figures grow too.",
)
@click.option(
    "--no-exit-records",
    is_flag=True,
    help="Do not use taskstats exit records (exact figures at each thread's exit, CAP_NET_ADMIN "
    "only); /proc readings alone, as for a user without it.",
)
@click.option(
    "--samples",
    "use_samples",
    is_flag=True,
    help="Sample each thread's CPU by symbol with perf record (the cycles event, or cpu-clock "
    "where there is no PMU): which functions each thread runs.",
)
@click.option(
    "--sample-hz",
    type=click.IntRange(1, defaults.MAX_SAMPLE_HZ),
    help="Samples per second of each thread's CPU time (implies --samples): finer, and "
    f"costlier. [default: {defaults.SAMPLE_HZ}]",
)
@click.option(
    "--workload",
    type=click.Choice(contention_plan.KINDS),
    help="Profile the built-in reproduction instead of COMMAND: threads doing serial work under "
    "one lock, waiting in futex (mutex) or spinning (spin).",
)
@click.option(
    "--threads",
    type=click.IntRange(1, contention_plan.MAX_THREADS),
    help="Worker threads of --workload. [default: the usable CPUs, at least 2]",
)
@program_output_option(
    "inherit, or null with --json",
    "the profile goes to stderr, or as JSON to stdout, never into the program's stream",
)
@output_options
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
def profile_cmd(
    interval: float,
    cpus: list[int] | None,
    timeout: float | None,
    use_strace: bool,
    no_exit_records: bool,
    use_samples: bool,
    sample_hz: int | None,
    workload: str | None,
    threads: int | None,
    program_output: str | None,
    output: str | None,
    as_json: bool,
    plot_path: str | None,
    command: tuple[str, ...],
) -> None:
    """Where each thread of COMMAND spends its time: CPU, run-queue wait, blocked.

    `perflab profile -- ./app -t 8`: per thread, CPU (user/system), lifetime, utilisation,
    context switches, run-queue wait and time blocked, split by the call each thread was seen
    sleeping in (futex, io, poll, sleep, wait, other; sampled at the readings, no ptrace); the
    program's utilisation (CPU / wall: threads busy on average), on stderr, so that the
    program's own stdout stays whole (`perflab profile -- xz -c data > data.xz`); exits with the
    program's status
    (130 at Ctrl-C: the program killed, its profile up to then kept). `perflab profile
    --workload mutex --threads 4 --samples`: the built-in lock contention, profiled by symbol
    too."""
    from perflab.lab import profile
    from perflab.running import program_output as streams
    from perflab.store import results

    check_paths(output, plot_path)
    where = program_where(program_output, as_json)
    stopped: int | None = None
    with streams.opened(where) as fd:  # SIGTERM stops it as Ctrl-C does (cli._term_stops)
        try:
            df = profile.run(
                _command(command, workload, threads),
                interval=interval,
                cpus=cpus or (),
                timeout=timeout,
                strace=use_strace,
                stdout=fd,
                stderr=fd,
                progress=_progress(),
                exit_records=not no_exit_records,
                sample_hz=sample_hz or (defaults.SAMPLE_HZ if use_samples else None),
            )
        except profile.Interrupted as exc:
            df, stopped = exc.frame, exc.signum
        except KeyboardInterrupt as exc:  # before the program ran, or as its profile was built
            click.echo("Error: interrupted: nothing measured", err=True)
            raise SystemExit(128 + getattr(exc, "signum", signal.SIGINT)) from None
    if sys.stderr.isatty():
        click.echo("\r\033[K", err=True, nl=False)
    if output:
        results.save(df, output)
    over = print_result(df, as_json, output, plot_path, err=True).summary.values["program"]
    if stopped:
        click.echo(
            f"perflab: interrupted by signal {stopped}: the program was killed; "
            "its profile up to then is above",
            err=True,
        )
        raise SystemExit(128 + stopped)
    raise SystemExit(_status(over))


def _command(command: tuple[str, ...], workload: str | None, threads: int | None) -> list[str]:
    """COMMAND, or the built-in workload's argv: one of the two, refused in one line."""
    if workload and command:
        raise click.UsageError("give either --workload or a COMMAND, not both")
    if threads is not None and not workload:
        raise click.UsageError("--threads is for --workload; a COMMAND takes its own options")
    if not workload:
        if not command:
            raise click.UsageError(
                "Missing argument COMMAND: perflab profile -- PROGRAM ARGS, or --workload"
            )
        return list(command)
    from perflab.lab import contention
    from perflab.system import machine

    return contention.command(workload, threads or max(2, len(machine.usable_cpus())))


def _status(over: dict[str, Any]) -> int:
    """The program's own exit status, 128 + signal when it was killed (as a shell says)."""
    if over["signal"]:
        return 128 + over["signal"]
    return over["exit_code"] or 0
