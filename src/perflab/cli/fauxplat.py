"""`perflab run fauxplat`: FauxPlat/sec alone and under each perturbation."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

import click

from perflab.cli import run
from perflab.cli.interference import interference_options, priority
from perflab.cli.options import check_paths, cluster_options, output_options, resume_option
from perflab.cli.params import Count
from perflab.cli.printing import emit_json, print_result, table
from perflab.cli.running import campaign_verb, journaled_run, optional_record
from perflab.lab.threads import plan
from perflab.plan import controls

if TYPE_CHECKING:
    from perflab.lab import threads


@run.command("fauxplat")
@click.option(
    "-l",
    "--loops",
    default=plan.DEFAULT_LOOPS,
    show_default=True,
    type=Count(each_s=controls.LOOP_S, what="its loops"),
    help=f"Loops of {plan.LOOP_FACTOR} per measurement (the post: {plan.POST_LOOPS}).",
)
@click.option(
    "--repeat", default=5, show_default=True, type=Count(1, controls.ROW_BYTES), help="Repeats."
)
@click.option("--cpu", default=0, show_default=True, type=int, help="CPU the index runs on.")
@click.option(
    "--kernel",
    type=click.Choice(plan.KERNEL_NAMES),
    default="loop",
    show_default=True,
    help="loop is the post's index; stream over a cache-sized --size shows what cache@ does.",
)
@click.option(
    "--size",
    default=plan.DEFAULT_STREAM_BYTES,
    show_default=True,
    type=Count(8, 1, what="its buffer"),
    help="Buffer bytes for --kernel stream.",
)
@interference_options
@output_options
@cluster_options
@resume_option
def fauxplat_cmd(
    resume: str | None,
    loops: int,
    repeat: int,
    cpu: int,
    kernel: str,
    size: int,
    perturb: list[threads.Perturbation],
    nice: int,
    rt: bool,
    rt_limit: float,
    output: str | None,
    as_json: bool,
    plot_path: str | None,
    cluster: str | None,
    hosts: tuple[str, ...],
) -> None:
    """FauxPlat/sec (loops / CPU second) alone and under each perturbation (default: cpu, cache
    and rt hogs on --cpu), with its spread and its change vs alone."""
    from perflab.lab import threads
    from perflab.lab.threads import fauxplat
    from perflab.reports import fleet
    from perflab.system import machine

    machine.check_cpus([cpu])
    record = optional_record(output, resume)
    check_paths(record[0], plot_path)
    chosen = list(perturb) or threads.default_perturbations(cpu)
    if cluster:
        measure = functools.partial(
            fauxplat.point,
            loops=loops,
            cpu=cpu,
            perturb=chosen,
            priority=priority(nice, rt, rt_limit),
            kernel=kernel,
            size=size,
        )
        points = [{"rep": r} for r in range(repeat)]
        params = {
            "loops": loops,
            "loop_factor": threads.LOOP_FACTOR,
            "nice": nice,
            "rt": rt,
            "rt_limit_s": rt_limit if rt else None,
            "perturb": [str(p) for p in chosen],
            "cpu": cpu,
            "kernel": kernel,
        }
        df, out = campaign_verb(measure, points, cluster, hosts, record, params, "fauxplat",
                                ("host", "rep", "condition"))  # fmt: skip
        per_host = fleet.per_host(df[df["condition"] == "alone"], "fauxplat_per_s")
        if as_json:
            emit_json({"hosts": per_host, "missing": out.missing, "refused": out.refused})
            return
        table(
            per_host[["host", "n", "median", "min", "max", "vs_fleet_pct", "outlier"]],
            title="FauxPlat/sec alone, per host",
        )
        for m in out.missing:
            click.echo(f"missing: {m}")
        return
    timed = functools.partial(fauxplat.run, loops, repeat, cpu, chosen,
                              priority(nice, rt, rt_limit), kernel=kernel, size=size,
                              output=record[0], resume=record[1])  # fmt: skip
    df = journaled_run(timed, record[0], True, "fauxplat")
    print_result(df, as_json, record[0], plot_path)  # says when the CPU was busy alone
