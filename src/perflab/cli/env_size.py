"""`perflab sweep env-size`: Mytkowicz's environment-size experiment, resumable, in minutes."""

import functools

import click
import pandas as pd

from perflab import build, campaigns, env_size, journal, machine, plot
from perflab.cli import sweep
from perflab.cli.common import (
    SECONDS,
    Bars,
    Number,
    check_complete,
    check_paths,
    cluster_options,
    cpu_list,
    discard_bad_option,
    emit_json,
    interrupted,
    output_options,
    record_path,
    records,
    table,
)


def _zoom(ctx, param, value):
    return env_size.parse_zoom(value) if value else None


@sweep.command("env-size")
@click.option(
    "--aslr",
    type=click.Choice(["off", "on", "system"]),
    default="off",
    show_default=True,
    help="off: personality(ADDR_NO_RANDOMIZE) for the child only (no root, nothing "
    "system-wide); on: force randomisation; system: leave randomize_va_space decide.",
)
@click.option("--min", "min_size", default=0, show_default=True, help="Smallest padding (bytes).")
@click.option("--max", "max_size", default=8192, show_default=True, help="Largest padding.")
@click.option("--step", default=1, show_default=True, help="Padding step (the post: 1).")
@click.option("--repeat", default=100, show_default=True, help="Runs per size (the post: 100).")
@click.option(
    "--cpu",
    "cpus",
    callback=cpu_list,
    help="Pin the child to these CPUs (e.g. 1 or 0-1), as taskset did. [default: last online]",
)
@click.option("--env-var", "var", default="A", show_default=True, help="The padding variable.")
@click.option(
    "--inherit-env",
    is_flag=True,
    help="Pad perflab's own environment instead of an empty one (the post used env -i).",
)
@click.option(
    "--order",
    type=click.Choice(["random", "sequential"]),
    default="random",
    show_default=True,
    help="random keeps drift over time from posing as an env-size effect.",
)
@click.option(
    "--seed", default=0, show_default=True, type=click.IntRange(0), help="Seed of the random order."
)
@click.option(
    "-O",
    "opt",
    type=click.Choice(build.OPT_LEVELS),
    default=build.DEFAULT_OPT,
    show_default=True,
    help="Optimisation level of the built-in loop (-O1 keeps the loop in registers, "
    "-O2 folds it away: only -O0 touches the stack each iteration).",
)
@click.option(
    "--timeout",
    default=10.0,
    show_default=True,
    type=SECONDS,
    help="Seconds before a run is killed and recorded as 'timeout'.",
)
@click.option(
    "--rt/--no-rt",
    default=True,
    show_default=True,
    help="Ask SCHED_FIFO priority 1 for the child (as chrt did), capped by RLIMIT_RTTIME; "
    "refused -> one warning, then normal priority.",
)
@click.option(
    "--mlock",
    is_flag=True,
    help="Ask the probed child to mlockall() (only a child with perflab's probe can honour it).",
)
@click.option(
    "--resume",
    type=click.Path(dir_okay=False),
    help="Complete an interrupted sweep recorded in FILE (same parameters required).",
)
@discard_bad_option
@click.option("--zoom", callback=_zoom, help="Plot only env sizes A:B, e.g. --zoom 2300:2400.")
@click.option(
    "-k",
    "k",
    default=5.0,
    show_default=True,
    type=Number(0),
    help="Window threshold: median of medians + k robust sigmas (1.4826·MAD).",
)
@output_options
@cluster_options
@click.argument("program", nargs=-1, type=click.UNPROCESSED)
def env_size_cmd(
    aslr,
    min_size,
    max_size,
    step,
    repeat,
    cpus,
    var,
    inherit_env,
    order,
    seed,
    opt,
    timeout,
    rt,
    mlock,
    resume,
    discard_bad,
    zoom,
    k,
    output,
    as_json,
    plot_path,
    cluster,
    hosts,
    program,
):
    """Run PROGRAM (default: the paper's loop) with env sizes MIN..MAX, REPEAT times each.

    \b
    perflab sweep env-size --aslr off --step 2 --repeat 20 -o env-size.parquet --plot env-size.png
    perflab sweep env-size --aslr off -- ./my_benchmark --flag
    """
    chosen = output or resume
    output, resuming = record_path(output, resume, "env-size")
    check_paths(output, plot_path)
    common = dict(
        min_size=min_size,
        max_size=max_size,
        step=step,
        repeat=repeat,
        var=var,
        aslr=aslr,
        cpus=cpus,
        order=order,
        seed=seed,
        inherit_env=inherit_env,
        opt=opt,
        timeout=timeout,
        rt=rt,
        mlock=mlock,
    )
    if cluster:
        _fleet(cluster, hosts, program, common, output, resuming, k, as_json)
        return
    bars = Bars()

    def start(todo: int, done: int) -> None:
        if not chosen:  # said only once the input proved valid and runs begin
            click.echo(f"recording to {output} (choose with -o FILE)", err=True)
        bars.open("env-size", todo, done)

    try:
        df = env_size.sweep(
            program,
            **common,
            output=output,
            resume=resuming,
            discard_bad=discard_bad,
            on_start=start,
            progress=bars.update,
        )
    except KeyboardInterrupt as exc:
        bars.close()
        raise interrupted(output, exc) from None
    finally:
        bars.close()
    check_complete(df, output)
    _report(df, output, plot_path, zoom, k, as_json)


def _report(df, output, plot_path, zoom, k, as_json) -> None:
    """Summary, status counts and windows: as tables, or as one JSON document."""
    value = env_size.value_column(df)
    summary = env_size.summarize(df, value)
    windows = env_size.detect_windows(summary, k=k)
    counts = env_size.status_counts(df)
    if plot_path:
        env_size.plot(df, plot_path, windows, zoom, value, summary)
    overall = summary["median"].describe()
    if as_json:
        emit_json(
            {
                "output": output,
                "plot": plot_path,
                "value": value,
                "runs": len(df),
                "status": counts,
                "baseline": windows.attrs.get("baseline"),
                "threshold": windows.attrs.get("threshold"),
                "windows": records(windows),
                "sizes": records(summary),
            }
        )
        return
    click.echo(f"{len(df)} runs recorded in {output}; status: {counts}")
    if summary["n"].sum() == 0:
        click.echo("no run ended 'ok': nothing to summarise (see the status and exit_code columns)")
        return
    click.echo(
        f"median {value} per size: min {overall['min']:,.0f}, median {overall['50%']:,.0f}, "
        f"max {overall['max']:,.0f}"
    )
    if windows.empty:
        threshold = windows.attrs.get("threshold", 0)
        click.echo(f"no window: no sizes stand out in median (> {threshold:,.0f}) and minimum")
    else:
        table(
            windows,
            "{:,.3f}",
            title=f"windows (median > {windows.attrs['threshold']:,.0f}; "
            f"baseline {windows.attrs['baseline']:,.0f})",
        )
    click.echo()
    table(summary.nlargest(10, "median"), "{:,.0f}", title=f"10 slowest sizes ({value})")
    if plot_path:
        click.echo(f"plot: {plot.check_plot_path(plot_path)}")


def _fleet(address, hosts, program, common, output, resuming, k, as_json) -> None:
    """The same sweep on every host of a Dask cluster, in blocks of sizes, journaled by host."""
    points = env_size.campaign_points(common["min_size"], common["max_size"], common["step"])
    options = {key: v for key, v in common.items() if key != "min_size"}
    measure = functools.partial(env_size.sweep_block, program=program, **options)
    params = {**common, "program": list(program), "cluster": address, "hosts": sorted(hosts)}
    meta = {**machine.metadata(), "experiment": "env-size campaign"}
    expect = journal.Expect(unique=("host", "env_size", "rep"))
    recorder = journal.Journal(
        output, params, meta, ("host", "env_size_from"), resuming, expect=expect
    )
    complete, out = False, None
    bars = Bars()
    try:
        out = campaigns.run(
            measure,
            points,
            address,
            hosts,
            recorder,
            lambda: bars.update(1),
            lambda todo: bars.open("env-size blocks", todo),
            functools.partial(machine.check_cpus, common["cpus"] or ()),
        )
        complete = not out.missing
    except KeyboardInterrupt as exc:
        raise interrupted(output, exc) from None
    finally:
        bars.close()
        extra = {"missing": out.missing, "refused": out.refused} if out else {}
        df = recorder.finish(complete, extra)
    for line in out.refused:
        click.echo(f"refused {line}", err=True)
    rows = []
    for host, part in df.groupby("host"):
        summary = env_size.summarize(part, env_size.value_column(part))
        windows = env_size.detect_windows(summary, k=k)
        rows.append(
            {
                "host": host,
                "runs": len(part),
                "median": summary["median"].median(),
                "windows": len(windows),
                "spacing": windows["spacing"].median(),
            }
        )
    per_host = pd.DataFrame(rows)
    if as_json:
        emit_json({"output": output, "hosts": records(per_host), "missing": out.missing})
        return
    table(per_host, "{:,.0f}", title=f"env-size on {len(per_host)} hosts, recorded in {output}")
    for m in out.missing:
        click.echo(f"missing: {m}")
    click.echo(f"fleet view: perflab report hosts {output}")
