"""`perflab clocks`: the clock article's tables on this machine."""

from __future__ import annotations

import functools
from collections.abc import Sequence

import click

from perflab.cli import cli
from perflab.cli.options import check_paths, cluster_options, output_options, resume_option
from perflab.cli.params import Count
from perflab.cli.printing import emit_json, print_result, table
from perflab.cli.running import campaign_verb, record_path
from perflab.plan import controls


@cli.command("clocks")
@click.option(
    "--samples",
    default=1000,
    show_default=True,
    type=Count(1, controls.ROW_BYTES, controls.CALL_S, "its rows (one a read of each clock)"),
    help="Back-to-back reads per clock (ClockBench used 255).",
)
@click.option(
    "--clock",
    "names",
    multiple=True,
    help="Only these clocks/methods (repeatable), e.g. --clock rdtscp.",
)
@output_options
@cluster_options
@resume_option
def clocks_cmd(
    samples: int,
    names: tuple[str, ...],
    output: str | None,
    as_json: bool,
    plot_path: str | None,
    cluster: str | None,
    hosts: tuple[str, ...],
    resume: str | None,
) -> None:
    """Resolution, value and read cost of every clock and TSC method; TSC trust verdict."""
    from perflab.lab import clocks
    from perflab.store import results
    from perflab.system import provenance

    selected = clocks.resolve(names) if names else None
    check_paths(output, plot_path)
    if cluster:
        record = record_path(output, resume, "clocks") if output or resume else (None, False)
        _fleet(cluster, hosts, samples, selected, record, as_json)
        return
    if resume:
        raise click.BadParameter("only a --cluster run is journaled", param_hint="--resume")
    res = clocks.resolution_table()
    costs = clocks.read_costs(samples, selected)
    table = clocks.cost_table(costs)
    # What the verb measures beside the reads goes in the file too, so a report shows it all.
    meta = {
        **provenance.metadata(),
        "experiment": "clocks",
        "unit": "ns",
        "resolution": res.to_dict(orient="records"),
        "batch_ns": dict(zip(table["method"], table["batch_ns"], strict=True)),
        "tsc": clocks.tsc_report(),
    }
    df = results.attach(costs, meta)
    if output:
        results.save(df, output)
    print_result(df, as_json, output, plot_path)


def _fleet(
    address: str,
    hosts: Sequence[str],
    samples: int,
    selected: list[str] | None,
    record: tuple[str | None, bool],
    as_json: bool,
) -> None:
    """The read-cost table on every host of a Dask cluster, medians side by side."""
    from perflab.lab import clocks

    methods = clocks.available(selected)
    measure = functools.partial(clocks.cost_of, samples=samples)
    df, out = campaign_verb(measure, [{"method": m} for m in methods], address, hosts, record,
                            {"samples": samples, "methods": methods}, "clocks",
                            ("host", "method", "rep"), extra_meta={"unit": "ns"})  # fmt: skip
    medians = df.pivot_table(index="method", columns="host", values="ns", aggfunc="median")
    if as_json:
        emit_json({"median_ns": medians.to_dict(), "missing": out.missing, "refused": out.refused})
        return
    table(medians.reset_index(), title="median cost of one read (ns) per host")
    for m in out.missing:
        click.echo(f"missing: {m}")
