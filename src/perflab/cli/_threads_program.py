"""`perflab sweep threads -- PROGRAM ARGS`: the user's program at each thread count, reported
as easyperf's table, with the runs that cannot be trusted said so."""

import functools
import signal

import click

from perflab import errors
from perflab.cli.common import (
    Bars,
    check_paths,
    emit_json,
    journaled_run,
    records,
    table,
)

SHOWN = ["threads", "runs", "wall_ms", "wall_lo", "wall_hi", "cpu_ms", "utilisation", "speedup",
         "speedup_lo", "speedup_hi", "efficiency", "nvcsw", "nivcsw", "runq_ms", "ipc",
         "disturbed", "failed"]  # fmt: skip


def program_sweep(command, counts, repeat, oversubscribe, perturb, output, resume, as_json,
                  plot_path, **params) -> None:  # fmt: skip
    """Check, measure (journaled when -o or --resume names a file), then report."""
    from perflab.lab.threads import program

    if resume and output and output != resume:
        raise click.UsageError(f"-o {output} and --resume {resume} name different files")
    output = output or resume
    check_paths(output, plot_path)

    def warn(line: str) -> None:
        click.echo(f"perflab: warning: {line}", err=True)

    run = functools.partial(program.run, command, counts, perturb=perturb, output=output,
                            resume=bool(resume), warn=warn, repeat=repeat,
                            oversubscribe=oversubscribe, **params)  # fmt: skip
    with errors.warnings_as_lines(lambda line: click.echo(line, err=True)):
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
    _report(df, output, plot_path, as_json)


def _report(df, output, plot_path, as_json) -> None:
    from perflab.engine import results
    from perflab.engine.childruns import status_counts
    from perflab.lab.threads import program

    meta = results.metadata(df)
    summary = program.summarize(df)
    if plot_path:
        program.plot(df, plot_path)
    if as_json:
        emit_json({"command": meta["command"], "threads_via": meta["threads_via"],
                   "status": status_counts(df), "scaling": records(summary),
                   "counters": meta["counters"], "floor": meta["floor"],
                   "runq": meta.get("runq"),
                   "warnings": meta["trust_warnings"], "output": output,
                   "plot": plot_path})  # fmt: skip
        return
    cpus = ",".join(map(str, meta["cpus"]))
    click.echo(f"{meta['command']}  (count via {meta['threads_via']}; CPUs {cpus})")
    shown = summary[SHOWN].rename(columns={"disturbed": "disturbed_runs"})
    few = "" if meta["repeat"] >= 7 else " (±inf: too few runs for one; --repeat 7 gives it)"
    title = (
        f"median of {meta['repeat']} runs per count; wall in ms, its {program.CONFIDENCE:.0%} "
        f"interval{few}; speedup vs {int(summary['threads'].min())} thread(s)"
    )
    table(shown, title=title)
    if summary["ipc"].isna().all():
        why = meta["counters"].get("instructions", "no counters")
        click.echo(f"IPC: not measured here (instructions: {why})")
    if meta.get("runq"):
        click.echo(f"runq_ms (run-queue wait of all its threads): {meta['runq']}")
    click.echo(f"runs: {status_counts(df)}")
    if output:
        click.echo(f"data: {output}")
    if plot_path:
        click.echo(f"plot: {plot_path}")
