"""`perflab sweep threads -- PROGRAM ARGS`: the user's program at each thread count, reported
as easyperf's table, with the runs that cannot be trusted said so."""

from __future__ import annotations

import functools
import signal
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import click

from perflab.cli.common import Bars, check_paths, journaled_run, print_result

if TYPE_CHECKING:
    from perflab.lab import threads


def program_sweep(
    command: tuple[str, ...],
    counts: Sequence[int],
    repeat: int,
    oversubscribe: bool,
    perturb: list[threads.Perturbation],
    output: str | None,
    resume: str | None,
    as_json: bool,
    plot_path: str | None,
    **params: Any,
) -> None:
    """Check, measure (journaled when -o or --resume names a file), then report."""
    from perflab.lab.threads import program

    if resume and output and output != resume:
        raise click.UsageError(f"-o {output} and --resume {resume} name different files")
    output = output or resume
    check_paths(output, plot_path)

    run = functools.partial(program.run, command, counts, perturb=perturb, output=output,
                            resume=bool(resume), repeat=repeat,
                            oversubscribe=oversubscribe, **params)  # fmt: skip
    if output:
        df = journaled_run(run, output, True, "threads")
    else:
        bars = Bars()

        def start(todo: int, done: int) -> None:
            bars.open("threads", todo, done)

        try:
            df = run(on_start=start, progress=bars.update)
        except KeyboardInterrupt as exc:
            bars.close()
            click.echo("Error: interrupted: nothing recorded (-o FILE keeps runs)", err=True)
            raise click.exceptions.Exit(128 + getattr(exc, "signum", signal.SIGINT)) from None
        finally:
            bars.close()
    print_result(df, as_json, output, plot_path)
