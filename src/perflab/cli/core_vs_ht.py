"""`perflab run core-vs-ht`: DjiBee's one thread, then two, per placement."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from perflab.cli import run
from perflab.cli.common import (
    busy_hint,
    check_paths,
    interference_options,
    output_options,
    print_result,
    priority,
    progressbar,
    warnings_to_stderr,
)
from perflab.lab.plans import threads as plan

if TYPE_CHECKING:
    pass


@run.command("core-vs-ht")
@click.option(
    "-l",
    "--loops",
    default=plan.DEFAULT_LOOPS,
    show_default=True,
    type=click.IntRange(1),
    help=f"Loops of {plan.LOOP_FACTOR} iterations per thread (the post used "
    f"{plan.POST_LOOPS}: ~10.7 s per thread on its i5).",
)
@click.option(
    "-p",
    "cpus",
    multiple=True,
    type=int,
    help="CPU for thread 1, then thread 2 (up to two, as the post); none: the placement matrix.",
)
@click.option("--repeat", default=1, show_default=True, type=click.IntRange(1), help="Runs.")
@interference_options
@output_options
def core_vs_ht_cmd(loops, cpus, repeat, perturb, nice, rt, rt_limit, output, as_json, plot_path):
    """1 thread, then 2 released together: CPU and wall time per placement (cputime_core_vs_ht)."""
    from perflab.engine import results
    from perflab.lab import threads
    from perflab.lab.threads import core_vs_ht
    from perflab.system import machine

    if len(cpus) > 2:
        raise click.BadParameter("at most two -p CPUs, as in the post", param_hint="-p")
    if cpus:
        machine.check_cpus(cpus)
    check_paths(output, plot_path)
    runs = repeat * (1 if cpus else sum(p.available for p in threads.placements()))
    with warnings_to_stderr(), progressbar(runs, "core-vs-ht") as bar:
        df = core_vs_ht.run(
            loops, cpus, repeat, priority(nice, rt, rt_limit), perturb, progress=bar.update
        )
    if output:
        results.save(df, output)
    shown = print_result(df, as_json, output, plot_path)
    if not as_json:
        ran = shown.tables["placements"].dropna(subset=["cpu_ms_1"])
        busy_hint((ran["wall_ms_1"] / ran["cpu_ms_1"]).median(), rt)
