"""`perflab sweep threads -- PROGRAM ARGS`: the user's program at each thread count, reported
as easyperf's table, with the runs that cannot be trusted said so."""

import functools
import signal

import click

from perflab.cli.common import Bars, check_paths, journaled_run, print_result


def program_sweep(command, counts, repeat, oversubscribe, perturb, output, resume, as_json,
                  plot_path, **params) -> None:  # fmt: skip
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
