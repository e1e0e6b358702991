"""The one verb builder: an experiment whose registry entry names a plan gets its verb from the
plan's fields (each an option with its flag, default, help and bounds), the shared -o, --json
and --plot, and --resume with --discard-bad where it journals; nothing is declared twice. The
entry's hooks (prepare, preface, epilogue) name what one experiment adds around its run; one
with exit_status runs its user's program (COMMAND after --) and exits as that program did.

Light: building a verb reads only the plan (no numpy), so `perflab VERB --help` stays fast."""

from __future__ import annotations

import dataclasses
import inspect
import signal
import sys
from collections.abc import Callable
from typing import Any

import click

from perflab.cli.options import (
    check_paths,
    cluster_options,
    journal_options,
    output_options,
    plan_options,
    program_where,
    resume_option,
)
from perflab.cli.printing import emit_json, print_result, table
from perflab.cli.running import campaign_verb, journaled_run, optional_record
from perflab.errors import Interrupted, PerflabError
from perflab.plan.base import Plan
from perflab.plan.experiment import Experiment, Fleet
from perflab.system.limits import LimitTooSmall


def build(experiment: Experiment) -> click.Command:
    """The click command of an experiment with a plan, named as the last word of its verb."""
    plan = experiment.plan
    assert plan is not None and experiment.verb is not None
    names = [f.name for f in dataclasses.fields(plan) if "cli" in f.metadata]
    # options of how the verb prints, not of what run measures (memcpy's --full)
    shown_only = {
        f.name for f in dataclasses.fields(plan) if f.metadata.get("cli", {}).get("display")
    }

    def measure(output: str | None = None, as_json: bool = False, plot_path: str | None = None,
                resume: str | None = None, discard_bad: bool = False,
                cluster: str | None = None, hosts: tuple[str, ...] = (),
                **values: Any) -> None:  # fmt: skip
        from perflab.store.recording import Recording

        check(plan, values)
        if resume and not (experiment.journaled or cluster):
            raise click.BadParameter("only a --cluster run is journaled", param_hint="--resume")
        output, resuming = optional_record(output, resume)
        check_paths(output, plot_path)
        module: Any = experiment.load()
        given = dict(values)
        measured_values = {k: v for k, v in values.items() if k not in shown_only}
        if cluster:
            fleet = getattr(module, experiment.campaign)(**measured_values)
            on_fleet(experiment.name, fleet, cluster, hosts, (output, resuming), as_json)
            return
        if experiment.prepare:
            measured_values = getattr(module, experiment.prepare)(measured_values)
        if experiment.exit_status:
            run_program(experiment, module, measured_values, (output, as_json, plot_path))
            return

        def measured(on_start: Any, progress: Any) -> Any:
            where = Recording(output, resuming, discard_bad, on_start, progress)
            return module.run(**measured_values, recording=where)

        label = (experiment.label or experiment.name).format(**measured_values)
        df = journaled_run(measured, output, True, label)
        if experiment.preface:
            for t in getattr(module, experiment.preface)(df, given, output):
                if not as_json:
                    table(t.frame, t.floatfmt, title=t.title)
                    click.echo()
        print_result(df, as_json, output, plot_path)
        if experiment.epilogue:
            for line in getattr(module, experiment.epilogue)(df):
                click.echo(line, err=True)

    command = measure
    if experiment.journaled:
        command = journal_options(command)
    elif experiment.campaign:
        command = resume_option(command)  # a campaign's
    if experiment.campaign:
        command = cluster_options(command)
    command = output_options(command, [n for n in experiment.outputs if n not in names])
    command = plan_options(plan, names)(command)
    text = experiment.help + (f"\n\n{inspect.cleandoc(experiment.details)}"
                              if experiment.details else "")  # fmt: skip
    text += (f"\n\n\b\n{inspect.cleandoc(experiment.examples)}"
             if experiment.examples else "")  # fmt: skip
    # a program's words after -- pass untouched, and so do they without it (counters make -j2)
    words = any(f.metadata.get("cli", {}).get("command") for f in dataclasses.fields(plan))
    settings = {"ignore_unknown_options": True} if words else {}
    return click.command(experiment.verb.rpartition(" ")[2], help=text,
                         context_settings=settings)(command)  # fmt: skip


def run_program(experiment: Experiment, module: Any, values: dict[str, Any],
                shown: tuple[str | None, bool, str | None]) -> None:  # fmt: skip
    """A verb that runs its user's program once: the program's stdout and stderr where the
    plan's program_output field says, the result saved and printed (on stderr where a program
    ran, stdout being the program's), and perflab's exit status the program's. Stopped by a
    signal, what the run kept is printed and said, else nothing was measured; 128 + signal."""
    from perflab.running import program_output as streams
    from perflab.store import results

    output, as_json, plot_path = shown
    where = [f.name for f in dataclasses.fields(experiment.plan or Plan)
             if f.metadata.get("cli", {}).get("kind") == "program_output"]  # fmt: skip
    given = values.pop(where[0]) if where else None
    ticker = _ticker(experiment.ticker)
    stopped: Interrupted | None = None
    with streams.opened(program_where(given, as_json)) as fd:  # SIGTERM stops it as Ctrl-C does
        try:
            df = module.run(**values, stdout=fd, stderr=fd,
                            **({"progress": ticker} if ticker else {}))  # fmt: skip
        except Interrupted as exc:
            df, stopped = exc.frame, exc
        except KeyboardInterrupt as exc:  # before the program ran, or as its result was built
            click.echo("Error: interrupted: nothing measured", err=True)
            raise SystemExit(128 + getattr(exc, "signum", signal.SIGINT)) from None
    if ticker:
        click.echo("\r\033[K", err=True, nl=False)
    if output:
        results.save(df, output)
    status = getattr(module, experiment.exit_status)(df)
    print_result(df, as_json, output, plot_path, err=status is not None)
    if stopped:
        click.echo(f"perflab: interrupted by signal {stopped.signum}: {stopped.kept}", err=True)
        raise SystemExit(128 + stopped.signum)
    click.get_current_context().exit(status or 0)


def _ticker(line: str) -> Callable[[float, int], None] | None:
    """The run's status line, on a terminal's stderr only, once it has lasted a second."""
    if not line or not sys.stderr.isatty():
        return None

    def show(seconds: float, count: int) -> None:
        if seconds >= 1:
            click.echo("\r" + line.format(seconds=seconds, count=count), err=True, nl=False)

    return show


def check(plan: type[Plan], values: dict[str, Any]) -> None:
    """The plan the options make, checked before anything is opened or measured: what its
    fields' bounds and check_more refuse is a usage mistake, said with its --help (a limit no
    count would fit is the limit's line)."""
    try:
        plan(**values).check()
    except LimitTooSmall:
        raise
    except PerflabError as exc:
        raise click.UsageError(str(exc), click.get_current_context()) from None


def on_fleet(name: str, fleet: Fleet, cluster: str, hosts: tuple[str, ...],
             record: tuple[str | None, bool], as_json: bool) -> None:  # fmt: skip
    """A --cluster campaign of the experiment, journaled by host and point: the median of its
    value per point and host, and the points a host never returned."""
    df, out = campaign_verb(fleet.measure, fleet.points, cluster, hosts, record, fleet.params,
                            name, fleet.unique, extra_meta=fleet.meta)  # fmt: skip
    medians = df.pivot_table(index=fleet.index, columns="host", values=fleet.value,
                             aggfunc="median")  # fmt: skip
    if as_json:
        emit_json({fleet.key: medians.to_dict(), "missing": out.missing, "refused": out.refused})
        return
    table(medians.reset_index(), title=fleet.title)
    for m in out.missing:
        click.echo(f"missing: {m}")
