"""`perflab sweep link-order`: the paper's link-order experiment and the layout behind it."""

from __future__ import annotations

import functools
import shlex
from typing import TYPE_CHECKING, Any

import click

from perflab.cli import sweep
from perflab.cli.common import (
    Bars,
    check_paths,
    emit_json,
    interference_report,
    journal_options,
    journaled_run,
    output_options,
    plan_options,
    record_path,
    records,
    run_controls,
    table,
)
from perflab.lab.plans.link_order import Plan

if TYPE_CHECKING:
    import pandas as pd

PARAMS = ("permutations", "repeat", "order", "mlock")


@sweep.command("link-order")
@click.option(
    "--objects",
    "objects_flag",
    is_flag=True,
    help="The arguments are object files to permute (default: the built-in workload).",
)
@click.option("--cc", help="Compiler/linker driver, e.g. gcc or 'clang -fuse-ld=lld'. [$CC, cc]")
@click.option("--ldflags", default="", help="Link flags after the objects, e.g. '-lm'.")
@click.option(
    "--link-cmd",
    "template",
    help="Link command template, run without a shell: '{objects}' (one word, replaced by the "
    "objects in order) and '{output}', e.g. 'gcc {objects} -lm -o {output}'.",
)
@click.option(
    "--cflags", default="-O2", show_default=True, help="Flags for the built-in workload's objects."
)
@click.option("--symbol", "symbols", multiple=True, help="Locate this symbol (repeatable).")
@plan_options(Plan, PARAMS)
@run_controls
@journal_options
@output_options
@click.argument("objects", nargs=-1, type=click.Path(dir_okay=False))
def link_order_cmd(objects_flag: bool, cflags: str, resume: str | None, discard_bad: bool,
                   output: str | None, as_json: bool, plot_path: str | None,
                   objects: tuple[str, ...], **params: Any) -> None:  # fmt: skip
    """Link OBJECTS (default: the built-in workload) in every order, run each REPEAT times.

    \b
    perflab sweep link-order --repeat 20 -o lo.parquet --plot lo.png
    perflab sweep link-order --objects a.o b.o c.o --cc gcc --ldflags -lm --permutations 6
    perflab sweep link-order --objects a.o b.o --link-cmd 'gcc {objects} -o {output}'
    """
    from perflab.lab import link_order

    if objects_flag and not objects:
        raise click.BadParameter("--objects needs object files after it", param_hint="--objects")
    if (params["template"] or params["ldflags"]) and not objects:
        raise click.BadParameter("--link-cmd/--ldflags need --objects FILE...")
    named = bool(output or resume)
    output, resuming = record_path(output, resume, "link-order")
    check_paths(output, plot_path)
    bars = Bars()
    sweep_it = functools.partial(
        link_order.sweep, objects, cflags=tuple(shlex.split(cflags)), output=output,
        resume=resuming, discard_bad=discard_bad, on_build=lambda n: bars.open("link", n),
        **params,
    )  # fmt: skip
    df = journaled_run(sweep_it, output, named, "run", bars)
    _report(df, output, plot_path, as_json)


def _short(names: str) -> str:
    """The first two confounded features and how many more (all of them are in --json)."""
    parts = [p for p in names.split(", ") if p]
    return ", ".join(parts[:2]) + (f" (+{len(parts) - 2})" if len(parts) > 2 else "")


def _report(df: pd.DataFrame, output: str, plot_path: str | None, as_json: bool) -> None:
    """Per-order summary, spread and the alignment features: as tables, or one JSON document."""
    from perflab.analysis import plot
    from perflab.engine import results
    from perflab.engine.childruns import status_counts
    from perflab.lab import link_order

    if not (df["status"] == "ok").any():
        raise click.ClickException(
            f"no run ended 'ok' (status: {status_counts(df)}): nothing to compare; the "
            f"{len(df)} runs are recorded in {output} (see its exit_code and signal columns)"
        )
    value = link_order.value_column(df)
    summary = link_order.summarize(df, value)
    spread = link_order.spread(df, summary, value)
    lay = link_order.layout_frame(df)
    effects = link_order.alignment_effects(summary, lay)
    meta = df.attrs["perflab"]
    if plot_path:
        link_order.plot(df, plot_path, summary, effects, value)
    if as_json:
        emit_json(
            {
                "output": output,
                "plot": plot_path,
                "value": value,
                "runs": len(df),
                "status": status_counts(df),
                "hardware_counters": meta["hardware_counters"],
                "links": meta["links"],
                "build_s": meta["build_s"],
                "run_s": meta.get("run_s"),
                "spread": spread,
                "orders": records(summary),
                "alignment": records(effects),
                "layout": records(lay),
                "interference": results.metadata(df).get("interference"),
            }
        )
        return
    click.echo(
        f"{len(df)} runs of {len(summary)} orders recorded in {output}; "
        f"status: {status_counts(df)}; {meta['links']} programs linked in {meta['build_s']:.2f} s"
    )
    click.echo(f"hardware counters: {meta['hardware_counters']}")
    cols = ["link_order", "n", "median", "mad", "min", "p95"]
    table(summary[cols], "{:,.0f}", title=f"orders by median {value}")
    click.echo(
        f"\nspread: slowest {spread['slowest']} / fastest {spread['fastest']} = "
        f"{spread['ratio']:.3f} (95% CI {spread['ci_low']:.3f}-{spread['ci_high']:.3f})"
    )
    _alignment(effects)
    interference_report(df)
    if plot_path:
        click.echo(f"plot: {plot.check_plot_path(plot_path)}")


def _alignment(effects: pd.DataFrame) -> None:
    """The alignment features that best separate fast from slow orders, and the best one."""
    if effects.empty:
        click.echo("alignment: no feature varies across these orders")
        return
    click.echo()
    shown = effects.head(8).assign(same_split=effects["same_split"].map(_short))
    table(shown, "{:.3f}", title="alignment features, best separation first")
    best = effects.iloc[0]
    verdict = "separates" if best["p"] < 0.05 else "does not clearly separate"
    click.echo(
        f"best: {best['feature']} {verdict} fast from slow orders (score {best['score']:.2f}, "
        f"p {best['p']:.3f}; fast at {best['fast_value']}, slow at {best['slow_value']})"
    )
