"""`perflab sweep env-size`: Mytkowicz's environment-size experiment, resumable, in minutes."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import click

from perflab.cli import sweep
from perflab.cli.options import (
    SWEEP_OUTPUT,
    check_paths,
    cluster_options,
    journal_options,
    output_options,
    plan_options,
    program_output_option,
)
from perflab.cli.params import Needs, Number
from perflab.cli.printing import emit_json, print_result, table
from perflab.cli.running import campaign_verb, journaled_run, record_path
from perflab.lab.env_size import plan

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

    from perflab.reports import report


def _zoom(ctx: click.Context, param: click.Parameter, value: str | None) -> tuple[int, int] | None:
    from perflab.lab import env_size

    return env_size.parse_zoom(value) if value else None


@sweep.command("env-size")
@plan_options(plan.EnvSizePlan, plan.PARAMS)
@journal_options
@click.option(
    "--zoom",
    callback=_zoom,
    cls=Needs,
    needs="plot_path",
    help="Plot only env sizes A:B, e.g. --zoom 2300:2400.",
)
@click.option(
    "-k",
    "k",
    default=5.0,
    show_default=True,
    type=Number(0),
    help="Window threshold: median of medians + k robust sigmas (1.4826·MAD).",
)
@click.option(
    "--counters",
    is_flag=True,
    help="Before the sweep, count the CPU's address-alias event (and cycles, instructions) in "
    "runs inside and outside each predicted window: did the CPU count the aliasing? Says why "
    "not where the CPU or VM has no such counter.",
)
@program_output_option(*SWEEP_OUTPUT)
@output_options
@cluster_options
@click.argument("program", nargs=-1, type=click.UNPROCESSED)
def env_size_cmd(program: tuple[str, ...], resume: str | None, discard_bad: bool,
                 zoom: tuple[int, int] | None, k: float, counters: bool,
                 program_output: str | None, output: str | None,
                 as_json: bool, plot_path: str | None, cluster: str | None,
                 hosts: tuple[str, ...], **params: Any) -> None:  # fmt: skip
    """Run PROGRAM (default: the paper's loop) with env sizes MIN..MAX, REPEAT times each.

    \b
    perflab sweep env-size --aslr off --step 2 --repeat 20 -o env-size.parquet --plot env-size.png
    perflab sweep env-size --aslr off -- ./my_benchmark --flag
    """
    from perflab.lab import env_size

    named = bool(output or resume)
    output, resuming = record_path(output, resume, "env-size")
    check_paths(output, plot_path)
    if cluster:
        if program_output:
            raise click.UsageError("--program-output is for runs here, not on a --cluster")
        _fleet(cluster, hosts, program, params, (output, resuming), k, as_json)
        return
    sweep_it = functools.partial(env_size.sweep, program, output=output, resume=resuming,
                                 discard_bad=discard_bad, counters=counters,
                                 extra_meta={"window_k": k}, **params)  # fmt: skip
    df = journaled_run(sweep_it, output, named, "env-size", program_output=program_output)
    _report(df, output, plot_path, zoom, k, as_json)


def _report(
    df: pd.DataFrame,
    output: str,
    plot_path: str | None,
    zoom: tuple[int, int] | None,
    k: float,
    as_json: bool,
) -> None:
    """The sweep's summary, as `perflab report` prints its file; the figure zoomed if asked."""
    from perflab.lab import env_size

    if not (df["status"] == "ok").any():
        if plot_path:
            env_size.plot(df, plot_path, zoom=zoom)
        raise click.ClickException(
            f"no run ended 'ok' (status: {env_size.status_counts(df)}): nothing to summarise; "
            f"the {len(df)} runs are recorded in {output} (see its exit_code and signal columns)"
        )

    def draw(shown: report.Report) -> Figure:
        tables, value = shown.tables, shown.summary.values["value"]
        return env_size.plot(df, None, tables["windows"], zoom, value, tables["sizes"],
                             tables.get("predicted"))  # fmt: skip

    print_result(df, as_json, output, plot_path, draw)


def _fleet(
    address: str,
    hosts: Sequence[str],
    program: Sequence[str],
    params: dict[str, Any],
    record: tuple[str, bool],
    k: float,
    as_json: bool,
) -> None:
    """The same sweep on every host of a Dask cluster, in blocks of sizes, journaled by host."""
    from perflab.lab import env_size
    from perflab.system import machine

    points = env_size.campaign_points(params["min_size"], params["max_size"], params["step"])
    options = {key: v for key, v in params.items() if key != "min_size"}
    measure = functools.partial(env_size.sweep_block, program=program, **options)
    check = functools.partial(machine.check_cpus, params["cpus"] or ())
    df, out = campaign_verb(measure, points, address, hosts, record,
                            {**params, "program": list(program)}, "env-size",
                            ("host", "env_size", "rep"), check,
                            extra_meta={"window_k": k})  # fmt: skip
    per_host = env_size.per_host_windows(df, k)
    if as_json:
        emit_json({"output": record[0], "hosts": per_host, "missing": out.missing})
        return
    title = f"env-size on {len(per_host)} hosts, recorded in {record[0]}"
    table(env_size.spacing_shown(per_host), "{:,.0f}", title=title)
    for m in out.missing:
        click.echo(f"missing: {m}")
    click.echo(f"fleet view: perflab report hosts {record[0]}")
