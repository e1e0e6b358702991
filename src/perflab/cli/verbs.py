"""The one verb builder: an experiment whose registry entry names a plan gets its verb from the
plan's fields (each an option with its flag, default, help and bounds), the shared -o, --json
and --plot, and --resume with --discard-bad where it journals; nothing is declared twice.

Light: building a verb reads only the plan (no numpy), so `perflab VERB --help` stays fast."""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any

import click

from perflab.cli.options import check_paths, journal_options, output_options, plan_options
from perflab.cli.printing import print_result
from perflab.cli.running import journaled_run, optional_record
from perflab.errors import PerflabError
from perflab.plan.base import Plan
from perflab.plan.experiment import Experiment
from perflab.system.limits import LimitTooSmall


def build(experiment: Experiment) -> click.Command:
    """The click command of an experiment with a plan, named as the last word of its verb."""
    plan = experiment.plan
    assert plan is not None and experiment.verb is not None
    names = [f.name for f in dataclasses.fields(plan) if "cli" in f.metadata]

    def measure(output: str | None, as_json: bool, plot_path: str | None,
                resume: str | None = None, discard_bad: bool = False,
                **values: Any) -> None:  # fmt: skip
        from perflab.store.recording import Recording

        check(plan, values)
        output, resuming = optional_record(output, resume)
        check_paths(output, plot_path)
        run = experiment.load().run  # type: ignore[attr-defined]

        def measured(on_start: Any, progress: Any) -> Any:
            where = Recording(output, resuming, discard_bad, on_start, progress)
            return run(**values, recording=where)

        label = (experiment.label or experiment.name).format(**values)
        df = journaled_run(measured, output, True, label)
        print_result(df, as_json, output, plot_path)
        if experiment.epilogue:
            for line in getattr(experiment.load(), experiment.epilogue)(df):
                click.echo(line, err=True)

    command = measure
    if experiment.journaled:
        command = journal_options(command)
    command = output_options(command)
    command = plan_options(plan, names)(command)
    text = experiment.help + (f"\n\n\b\n{inspect.cleandoc(experiment.examples)}"
                              if experiment.examples else "")  # fmt: skip
    return click.command(experiment.verb.rpartition(" ")[2], help=text)(command)


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
