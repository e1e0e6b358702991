"""`perflab run trig|cswitch|syscalls`: what libm's first call, a context switch, a syscall cost."""

import click

from perflab.cli import run
from perflab.cli.common import check_paths, emit_json, output_options, progressbar, records, table
from perflab.plans import defaults


def _at_least_one(value: int, hint: str) -> None:
    if value < 1:
        raise click.BadParameter(f"must be at least 1, not {value}", param_hint=hint)


@run.command("trig")
@click.argument("calls", nargs=-1)
@click.option(
    "--repeat",
    default=10,
    show_default=True,
    type=int,
    help="Warm repeats of the sequence (trig-rep used 10); shows the histogram.",
)
@click.option(
    "--cold",
    "cold_runs",
    default=0,
    type=int,
    help="Also run the sequence once in each of N fresh processes (first calls fault).",
)
@output_options
def trig_cmd(calls, repeat, cold_runs, output, as_json, plot_path):
    """Ticks of libm calls (default sin(1.0) tan(1.0) sin(0.0)), timer cost subtracted."""
    from perflab import results, trig

    _at_least_one(repeat, "--repeat")
    if cold_runs < 0:
        raise click.BadParameter(f"must be >= 0, not {cold_runs}", param_hint="--cold")
    texts = calls or trig.DEFAULT_CALLS
    for text in texts:
        trig.parse_call(text)
    check_paths(output, plot_path)
    if cold_runs:
        with progressbar(cold_runs, "fresh processes") as bar:
            df = trig.run(texts, repeat, cold_runs, bar.update)
    else:
        df = trig.run(texts, repeat)
    summ, hist, conv = trig.summarize(df), trig.histogram(df), trig.convergence(df)
    if output:
        results.save(df, output)
    if plot_path:
        trig.plot(df, plot_path)
    if as_json:
        emit_json(
            {
                "repeat": repeat,
                "cold_runs": cold_runs,
                "summary": records(summ),
                "histogram": records(hist),
                "running_min": records(conv),
            }
        )
        return
    for r in summ.itertuples(index=False):
        cold = (
            f"; cold first call {r.cold_min:,}..{r.cold_median:,.0f} (min..median of {cold_runs})"
            if cold_runs
            else ""
        )
        click.echo(f"{r.call} takes {r.warm_min:5d} ticks (warm min of {repeat}){cold}")
    click.echo()
    table(hist.tail(max(3, len(summ))), "{:.0f}", title="sort | uniq -c | sort | tail")
    click.echo()
    table(conv, "{:.0f}", title="running minimum per repeat")


@run.command("cswitch")
@click.argument("n", type=int, default=20000)
@click.option(
    "--reps", default=3, show_default=True, type=int, help="Runs per placement; medians shown."
)
@click.option(
    "--rt/--no-rt",
    "rt",
    default=None,
    help="Also run with SCHED_RR priority (default: yes unless BENCH_NORT is set).",
)
@click.option(
    "--cpu",
    "cpus",
    multiple=True,
    type=int,
    help="CPUs for the pinned runs (first: parent and one-CPU runs, second: child).",
)
@output_options
def cswitch_cmd(n, reps, rt, cpus, output, as_json, plot_path):
    """N one-byte write+read alone, N round trips with a child, and the difference."""
    from perflab import cswitch, results

    _at_least_one(n, "N")
    _at_least_one(reps, "--reps")
    places = cswitch.placements(list(cpus) if cpus else None)
    realtime = cswitch.realtime_wanted(rt)
    check_paths(output, plot_path)
    runs = len(places) * reps * (2 if realtime else 1)
    with progressbar(runs, f"cswitch {n}") as bar:
        df = cswitch.run(n, reps, realtime, list(cpus) if cpus else None, bar.update)
    summ = cswitch.summarize(df)
    if output:
        results.save(df, output)
    if plot_path:
        cswitch.plot(df, plot_path)
    if as_json:
        emit_json({"n": n, "reps": reps, "table": records(summ)})
        return
    first = df[(df["placement"] == "unpinned") & ~df["realtime"]].iloc[0]
    for line in cswitch.article_lines(first):
        click.echo(line)
    click.echo()
    table(summ, "{:.3f}", title="per iteration, median of reps (µs; switches from rusage)")
    if realtime and not df["rt_applied"].any():
        click.echo("SCHED_RR refused (needs root or RLIMIT_RTPRIO); --no-rt skips it", err=True)


@run.command("syscalls")
@click.option(
    "--call",
    "calls",
    multiple=True,
    help=f"Calls to time (repeatable): {', '.join(defaults.SYSCALL_NAMES)}.",
)
@click.option("--trials", default=10000, show_default=True, type=int, help="Calls timed each.")
@click.option(
    "--trim",
    default=10,
    show_default=True,
    type=int,
    help="Drop this many best and worst samples too (FileGuard dropped 10 and 10).",
)
@click.option(
    "--dir",
    "directory",
    type=click.Path(file_okay=False),
    help="Directory of the 4 KiB scratch file (default: the temp dir); its filesystem counts.",
)
@output_options
def syscalls_cmd(calls, trials, trim, directory, output, as_json, plot_path):
    """Cost of getpid, open+close, read/write of 4 KiB, stat... in ticks and µs."""
    from perflab import results, syscalls

    _at_least_one(trials, "--trials")
    if trim < 0 or 2 * trim >= trials:
        raise click.BadParameter(
            f"must be >= 0 and leave samples: 2*{trim} >= {trials} trials", param_hint="--trim"
        )
    names = syscalls.resolve(calls or syscalls.DEFAULT_CALLS)
    check_paths(output, plot_path)
    with progressbar(len(names), "syscalls") as bar:
        df = syscalls.run(names, trials, directory, bar.update)
    fg = syscalls.summarize(df, trim)
    df = results.attach(df, {**results.metadata(df), "trim": trim})
    if output:
        results.save(df, output)
    if plot_path:
        syscalls.plot(df, plot_path)
    if as_json:
        emit_json({"trials": trials, "trim": trim, "calls": records(fg)})
        return
    table(
        syscalls.fileguard_text(fg),
        title=f"{trials} trials, ticks as all/without the {trim} best and {trim} worst",
    )
