"""`perflab run core-vs-ht`: DjiBee's one thread, then two, per placement."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

import click

from perflab.cli import run
from perflab.cli.interference import interference_options, priority
from perflab.cli.options import check_paths, journal_options, output_options
from perflab.cli.params import Count, cpu_values
from perflab.cli.printing import print_result
from perflab.cli.running import journaled_run, optional_record
from perflab.lab.threads import plan
from perflab.plan import controls

if TYPE_CHECKING:
    from perflab.lab import threads


@run.command("core-vs-ht")
@click.option(
    "-l",
    "--loops",
    default=plan.DEFAULT_LOOPS,
    show_default=True,
    type=Count(each_s=controls.LOOP_S, what="its loops"),
    help=f"Loops of {plan.LOOP_FACTOR} iterations per thread (the post used "
    f"{plan.POST_LOOPS}: ~10.7 s per thread on its i5).",
)
@click.option(
    "-p",
    "cpus",
    multiple=True,
    type=int,
    callback=cpu_values(2, distinct=False),
    help="CPU for thread 1, then thread 2 (up to two, as the post); none: the placement matrix.",
)
@click.option(
    "--repeat", default=1, show_default=True, type=Count(1, controls.ROW_BYTES), help="Runs."
)
@interference_options
@output_options
@journal_options
def core_vs_ht_cmd(
    loops: int,
    cpus: tuple[int, ...],
    repeat: int,
    perturb: list[threads.Perturbation],
    nice: int,
    rt: bool,
    rt_limit: float,
    output: str | None,
    as_json: bool,
    plot_path: str | None,
    resume: str | None,
    discard_bad: bool,
) -> None:
    """1 thread, then 2 released together: CPU and wall time per placement (cputime_core_vs_ht)."""
    from perflab.lab.threads import core_vs_ht

    output, resuming = optional_record(output, resume)
    check_paths(output, plot_path)
    timed = functools.partial(core_vs_ht.run, loops, cpus, repeat, priority(nice, rt, rt_limit),
                              perturb, output=output, resume=resuming,
                              discard_bad=discard_bad)  # fmt: skip
    df = journaled_run(timed, output, True, "core-vs-ht")
    print_result(df, as_json, output, plot_path)  # its summary says which runs were disturbed
