"""`perflab sweep env-size`: Mytkowicz's environment-size experiment, resumable, in minutes."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import click

from perflab.cli import sweep
from perflab.cli.common import (
    Number,
    campaign_verb,
    check_paths,
    cluster_options,
    emit_json,
    journal_options,
    journaled_run,
    output_options,
    plan_options,
    record_path,
    records,
    table,
)
from perflab.lab.plans import env_size as plan

if TYPE_CHECKING:
    import pandas as pd


def _zoom(ctx: click.Context, param: click.Parameter, value: str | None) -> tuple[int, int] | None:
    from perflab.lab import env_size

    return env_size.parse_zoom(value) if value else None


@sweep.command("env-size")
@plan_options(plan.Plan, plan.PARAMS)
@journal_options
@click.option("--zoom", callback=_zoom, help="Plot only env sizes A:B, e.g. --zoom 2300:2400.")
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
@output_options
@cluster_options
@click.argument("program", nargs=-1, type=click.UNPROCESSED)
def env_size_cmd(program: tuple[str, ...], resume: str | None, discard_bad: bool,
                 zoom: tuple[int, int] | None, k: float, counters: bool, output: str | None,
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
        _fleet(cluster, hosts, program, params, (output, resuming), k, as_json)
        return
    sweep_it = functools.partial(env_size.sweep, program, output=output, resume=resuming,
                                 discard_bad=discard_bad, counters=counters,
                                 extra_meta={"window_k": k}, **params)  # fmt: skip
    df = journaled_run(sweep_it, output, named, "env-size")
    _report(df, output, plot_path, zoom, k, as_json)


def _report(
    df: pd.DataFrame,
    output: str,
    plot_path: str | None,
    zoom: tuple[int, int] | None,
    k: float,
    as_json: bool,
) -> None:
    """Summary, status counts and windows: as tables, or as one JSON document."""
    from perflab.analysis import plot
    from perflab.engine import results
    from perflab.lab import env_size
    from perflab.lab.env_size import alias_counters, windows

    value = env_size.value_column(df)
    summary = env_size.summarize(df, value)
    found = env_size.detect_windows(summary, k=k)
    counts = env_size.status_counts(df)
    predicted, verdicts, why = windows.explain(results.metadata(df), summary, found)
    if plot_path:
        env_size.plot(df, plot_path, found, zoom, value, summary, predicted)
    if summary["n"].sum() == 0:
        raise click.ClickException(
            f"no run ended 'ok' (status: {counts}): nothing to summarise; the {len(df)} runs "
            f"are recorded in {output} (see its exit_code and signal columns)"
        )
    overall = summary["median"].describe()
    if as_json:
        emit_json(
            {
                "output": output,
                "plot": plot_path,
                "value": value,
                "runs": len(df),
                "status": counts,
                "baseline": found.attrs.get("baseline"),
                "threshold": found.attrs.get("threshold"),
                "windows": records(found),
                "predicted": None if predicted is None else records(predicted),
                "verdicts": records(verdicts),
                "explanation": why,
                "alias_check": results.metadata(df).get("alias_check"),
                **_counters_json(results.metadata(df)),
                "sizes": records(summary),
                **_lanes_json(df, k),
            }
        )
        return
    click.echo(f"{len(df)} runs recorded in {output}; status: {counts}")
    click.echo(
        f"median {value} per size: min {overall['min']:,.0f}, median {overall['50%']:,.0f}, "
        f"max {overall['max']:,.0f}"
    )
    _windows(found)
    _explain(predicted, verdicts, why)
    for line in alias_counters.summary_lines(results.metadata(df)):
        click.echo(line)
    click.echo()
    table(summary.nlargest(10, "median"), "{:,.0f}", title=f"10 slowest sizes ({value})")
    _report_lanes(df, k)
    if plot_path:
        click.echo(f"plot: {plot.check_plot_path(plot_path)}")


def _explain(predicted: pd.DataFrame | None, verdicts: pd.DataFrame, why: list[str]) -> None:
    """Where the windows were predicted, the verdict on each, and why, in words."""
    click.echo()
    click.echo(why[0] if why else "")
    if len(verdicts):
        bounds = zip(verdicts.excess, verdicts.ci_low, verdicts.ci_high, strict=True)
        shown = verdicts.assign(excess=[f"{e:+.1%} [{lo:+.1%}, {hi:+.1%}]" for e, lo, hi in bounds])
        table(
            shown[["start", "end", "verdict", "excess"]], "{}", title="verdicts (excess, 95 % CI)"
        )
    for line in why[1:]:
        click.echo(line)


def _counters_json(meta: dict) -> dict:
    """The alias counter's line and counts per window, when the sweep asked for them."""
    if "alias_counter" not in meta:
        return {}
    keys = ("alias_counter", "alias_event", "alias_counts")
    return {k: meta.get(k) for k in keys}


def _windows(windows: pd.DataFrame) -> None:
    """The detected windows as a table, or why there are none."""
    if windows.empty:
        threshold = windows.attrs.get("threshold", 0)
        click.echo(f"no window: no sizes stand out in median (> {threshold:,.0f}) and minimum")
        return
    table(
        windows,
        "{:,.3f}",
        title=f"windows (median > {windows.attrs['threshold']:,.0f}; "
        f"baseline {windows.attrs['baseline']:,.0f})",
    )


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
        emit_json({"output": record[0], "hosts": records(per_host), "missing": out.missing})
        return
    table(per_host, "{:,.0f}", title=f"env-size on {len(per_host)} hosts, recorded in {record[0]}")
    for m in out.missing:
        click.echo(f"missing: {m}")
    click.echo(f"fleet view: perflab report hosts {record[0]}")


def _lanes_json(df: pd.DataFrame, k: float) -> dict:
    """A parallel sweep's per-CPU windows and interference check, for --json."""
    from perflab.engine import results
    from perflab.lab import env_size

    if "cpu" not in df:
        return {}
    return {
        "per_cpu": records(env_size.per_cpu_windows(df, k)),
        "interference": results.metadata(df).get("interference"),
    }


def _report_lanes(df: pd.DataFrame, k: float) -> None:
    """A parallel sweep: the windows per CPU and pooled, then parallel vs sequential runs."""
    from perflab.engine import lanes, results
    from perflab.lab import env_size

    if "cpu" not in df:
        return
    click.echo()
    table(env_size.per_cpu_windows(df, k), "{:,.0f}", title="per CPU (all: pooled)")
    for line in lanes.describe(results.metadata(df).get("interference", {})):
        click.echo(line)
