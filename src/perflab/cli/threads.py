"""`perflab run core-vs-ht`, `perflab sweep threads`, `perflab run fauxplat`: threads and
interference, printed as DjiBee's and easyperf's programs print them."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

import click

from perflab import errors, plans
from perflab.cli import run, sweep
from perflab.cli.common import (
    SECONDS,
    Number,
    campaign_verb,
    check_paths,
    cluster_options,
    cpu_list,
    emit_json,
    output_options,
    progressbar,
    record_path,
    records,
    resume_option,
    table,
)
from perflab.plans import threads as plan

if TYPE_CHECKING:
    from perflab import threads


def _perturbation(ctx, param, values):
    """KIND@CPU values; a bad one is a PerflabError: one line, like a bad -p."""
    from perflab import threads

    return [threads.Perturbation.parse(v) for v in values]


def interference_options(func):
    """--perturb, --nice, --rt and --rt-limit, shared by every verb that runs workers."""
    func = click.option(
        "--rt-limit",
        default=plan.RT_LIMIT_S,
        show_default=True,
        type=Number(0.1, 600),
        help="Watchdog for --rt: seconds a real-time worker may compute without blocking "
        "(RLIMIT_RTTIME); past it the workers drop to normal priority and perflab stops with "
        "one line, keeping what -o recorded.",
    )(func)
    func = click.option(
        "--rt",
        is_flag=True,
        help="Run the workers SCHED_RR (the post's high priority); warns and goes on "
        "without permission.",
    )(func)
    func = click.option(
        "--nice",
        default=0,
        type=click.IntRange(-20, 19),
        help="Nice value of the workers (the post's `nice -n -20` shields them from hogs).",
    )(func)
    func = click.option(
        "--perturb",
        multiple=True,
        callback=_perturbation,
        metavar="KIND@CPU",
        help="Run a hog during the measurement: cpu@N (busy loop), cache@N (cache thrasher), "
        "rt@N (bounded SCHED_FIFO bursts). Repeatable; perflab stops them before returning.",
    )(func)
    return func


def _priority(nice: int, rt: bool, rt_limit: float) -> threads.Priority:
    from perflab import threads

    return threads.Priority(nice=nice, rt=rt, rt_limit=rt_limit)


def _warnings_to_stderr():
    """PerflabWarnings as one 'perflab: warning:' line each, not Python's file:line format."""
    return errors.warnings_as_lines(lambda line: click.echo(line, err=True))


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
    from perflab import machine, results, threads
    from perflab.threads import ht_pairs

    if len(cpus) > 2:
        raise click.BadParameter("at most two -p CPUs, as in the post", param_hint="-p")
    if cpus:
        machine.check_cpus(cpus)
    check_paths(output, plot_path)
    runs = repeat * (1 if cpus else sum(p.available for p in threads.placements()))
    with _warnings_to_stderr(), progressbar(runs, "core-vs-ht") as bar:
        df = ht_pairs.run(
            loops, cpus, repeat, _priority(nice, rt, rt_limit), perturb, progress=bar.update
        )
    summary = ht_pairs.summarize(df)
    if output:
        results.save(df, output)
    if plot_path:
        ht_pairs.plot(df, plot_path)
    if as_json:
        runs_text = [line for _, line in ht_pairs.post_lines(df, loops)]
        emit_json({"runs": runs_text, "placements": records(summary)})
        return
    lines = ht_pairs.post_lines(df, loops)
    if cpus:
        for _, line in lines:
            click.echo(line)
        _busy_hint(summary["wall_ms_1"].iloc[0] / summary["cpu_ms_1"].iloc[0], rt)
        return
    for p in ht_pairs.placements():
        click.echo(f"# {p.name}: {p.label}")
        for name, line in lines:
            if name == p.name:
                click.echo(line)
    click.echo()
    table(summary, title="per placement (ms; ratio = 2 threads / 1 thread)")
    ran = summary.dropna(subset=["cpu_ms_1"])
    _busy_hint((ran["wall_ms_1"] / ran["cpu_ms_1"]).median(), rt)


@sweep.command("threads")
@click.option(
    "--threads",
    "counts",
    callback=lambda ctx, param, value: plan.parse_counts(value) if value else None,
    help="With -- PROGRAM: the thread counts to run, e.g. 1,2,4,8 [default: 1..--max].",
)
@click.option(
    "--threads-env",
    metavar="NAME",
    help="With -- PROGRAM: also pass the count as NAME=N (default: OMP_NUM_THREADS when no "
    "argument holds {threads}).",
)
@click.option(
    "--cpu",
    "cpus",
    callback=cpu_list,
    help="With -- PROGRAM: CPUs it may use (e.g. 0-1). [default: every usable CPU]",
)
@click.option(
    "--seed",
    default=0,
    show_default=True,
    type=click.IntRange(0),
    help="With -- PROGRAM: seed of the random run order.",
)
@click.option(
    "--timeout",
    default=600.0,
    show_default=True,
    type=SECONDS,
    help="With -- PROGRAM: seconds before a run is killed (status 'timeout').",
)
@click.option(
    "--inherit-env",
    is_flag=True,
    help="With -- PROGRAM: run it with perflab's environment, not an empty one.",
)
@click.option(
    "--runq",
    type=click.Choice(plans.RUNQ_MODES),
    default="auto",
    show_default=True,
    help="With -- PROGRAM: how the run-queue wait of all its threads is read: auto (the "
    "kernel's exact sum via taskstats where perflab may, else /proc readings), proc, off.",
)
@resume_option
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
@click.option(
    "--max",
    "max_threads",
    default=None,
    type=click.IntRange(1),
    help="Up to N threads (default: the online CPUs).",
)
@click.option(
    "--kernel",
    type=click.Choice(plan.KERNEL_NAMES),
    default="loop",
    show_default=True,
    help="loop: the post's int/double mix; stream: read-modify-write of a buffer; spin: CAS "
    "increments of one shared counter (synchronisation overhead).",
)
@click.option(
    "-l",
    "--loops",
    default=plan.DEFAULT_LOOPS,
    show_default=True,
    type=click.IntRange(1),
    help=f"Total loops of {plan.LOOP_FACTOR} iterations, shared among the threads.",
)
@click.option(
    "--size",
    default=plan.DEFAULT_STREAM_BYTES,
    show_default=True,
    type=click.IntRange(8),
    help="Buffer bytes per thread for --kernel stream.",
)
@click.option("--repeat", type=click.IntRange(1), help="Repeats. [default: 3, with -- PROGRAM 7]")
@click.option(
    "--free",
    is_flag=True,
    help="Let the scheduler place threads instead of pinning "
    "them round-robin over the online CPUs.",
)
@click.option("--oversubscribe", is_flag=True, help="Allow more threads than online CPUs.")
@interference_options
@output_options
def sweep_threads_cmd(
    counts,
    threads_env,
    cpus,
    seed,
    timeout,
    inherit_env,
    runq,
    resume,
    command,
    max_threads,
    kernel,
    loops,
    size,
    repeat,
    free,
    oversubscribe,
    perturb,
    nice,
    rt,
    rt_limit,
    output,
    as_json,
    plot_path,
):
    """Throughput, speedup, efficiency and CPU utilisation vs thread count (easyperf): of a
    built-in kernel, or of your program given after -- with {threads} where its count goes.

    \b
    perflab sweep threads --kernel spin --max 2
    perflab sweep threads --threads 1,2 -- xz -T{threads} -c FILE
    perflab sweep threads --threads 1,2,4 --oversubscribe -- ./omp_solver   # OMP_NUM_THREADS
    """
    from perflab import machine, results, threads
    from perflab.cli._threads_program import program_sweep
    from perflab.threads import thread_count

    if command:
        ctx = click.get_current_context()
        kernel_only = ["kernel", "loops", "size", "free", "nice", "rt", "rt_limit"]
        given = [n for n in kernel_only if ctx.get_parameter_source(n).name != "DEFAULT"]
        if given:
            flag = "--" + given[0].replace("_", "-")
            raise click.UsageError(f"{flag} is for the built-in kernels, not a PROGRAM")
        counts = counts or tuple(range(1, (max_threads or len(cpus or machine.usable_cpus())) + 1))
        return program_sweep(command, counts, repeat or 7, oversubscribe, perturb, output,
                             resume, as_json, plot_path, cpus=cpus, threads_env=threads_env,
                             seed=seed, timeout=timeout, inherit_env=inherit_env,
                             runq=runq)  # fmt: skip
    if counts or threads_env or cpus is not None or resume or runq != "auto":
        raise click.UsageError(
            "--threads, --threads-env, --cpu, --runq and --resume need -- PROGRAM"
        )
    repeat = repeat or 3
    max_threads = max_threads or len(machine.usable_cpus())
    threads.check_placement([None] * max_threads, oversubscribe)
    check_paths(output, plot_path)
    with _warnings_to_stderr(), progressbar(repeat * max_threads, "threads") as bar:
        df = thread_count.run(
            max_threads,
            kernel,
            loops,
            size,
            repeat,
            not free,
            oversubscribe,
            _priority(nice, rt, rt_limit),
            perturb,
            progress=bar.update,
        )
    summary = thread_count.summarize(df)
    if output:
        results.save(df, output)
    if plot_path:
        thread_count.plot(df, plot_path)
    status = threads.counter_status(["instructions", "cycles"])
    if as_json:
        emit_json({"kernel": kernel, "scaling": records(summary), "counters": status})
        return
    hidden = [] if kernel == "spin" else ["cas_retries", "retry_pct"]
    if summary["ipc"].isna().all():
        hidden += ["instructions", "ipc"]
    shown = summary.drop(columns=hidden)
    table(
        shown,
        title=f"{kernel} kernel, {loops} loops({plan.LOOP_FACTOR}) shared, median of {repeat}",
    )
    if summary["ipc"].isna().all():
        click.echo(f"instructions, IPC: {status['instructions']}")


def _busy_hint(wall_over_cpu: float, rt: bool) -> None:
    """Say when other tasks shared the CPUs alone, and which flag keeps them off."""
    if wall_over_cpu > 1.2 and not rt:
        click.echo(
            f"note: alone, elapsed time was {wall_over_cpu:.1f}x the CPU time: other tasks shared "
            "these CPUs; --rt (or --nice -20) keeps them off, as the post's high priority did",
            err=True,
        )


@run.command("fauxplat")
@click.option(
    "-l",
    "--loops",
    default=plan.DEFAULT_LOOPS,
    show_default=True,
    type=click.IntRange(1),
    help=f"Loops of {plan.LOOP_FACTOR} per measurement (the post: {plan.POST_LOOPS}).",
)
@click.option("--repeat", default=5, show_default=True, type=click.IntRange(1), help="Repeats.")
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
    type=click.IntRange(8),
    help="Buffer bytes for --kernel stream.",
)
@interference_options
@output_options
@cluster_options
@resume_option
def fauxplat_cmd(
    resume,
    loops,
    repeat,
    cpu,
    kernel,
    size,
    perturb,
    nice,
    rt,
    rt_limit,
    output,
    as_json,
    plot_path,
    cluster,
    hosts,
):
    """FauxPlat/sec (loops / CPU second) alone and under each perturbation (default: cpu, cache
    and rt hogs on --cpu), with its spread and its change vs alone."""
    from perflab import fleet, machine, results, threads
    from perflab.threads import fauxplat_sec

    machine.check_cpus([cpu])
    check_paths(output, plot_path)
    chosen = list(perturb) or threads.default_perturbations(cpu)
    if cluster:
        measure = functools.partial(
            fauxplat_sec.point,
            loops=loops,
            cpu=cpu,
            perturb=chosen,
            priority=_priority(nice, rt, rt_limit),
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
        record = record_path(output, resume, "fauxplat") if output or resume else (None, False)
        df, out = campaign_verb(measure, points, cluster, hosts, record, params, "fauxplat",
                                ("host", "rep", "condition"))  # fmt: skip
        per_host = fleet.per_host(df[df["condition"] == "alone"], "fauxplat_per_s")
        if as_json:
            emit_json({"hosts": records(per_host), "missing": out.missing, "refused": out.refused})
            return
        table(
            per_host[["host", "n", "median", "min", "max", "vs_fleet_pct", "outlier"]],
            title="FauxPlat/sec alone, per host",
        )
        for m in out.missing:
            click.echo(f"missing: {m}")
        return
    with _warnings_to_stderr(), progressbar(repeat * (1 + len(chosen)), "fauxplat") as bar:
        df = fauxplat_sec.run(
            loops,
            repeat,
            cpu,
            chosen,
            _priority(nice, rt, rt_limit),
            progress=bar.update,
            kernel=kernel,
            size=size,
        )
    summary = fauxplat_sec.summarize(df)
    if output:
        results.save(df, output)
    if plot_path:
        fauxplat_sec.plot(df, plot_path)
    if as_json:
        emit_json({"loops": loops, "cpu": cpu, "kernel": kernel, "fauxplat": records(summary)})
        return
    alone = summary.iloc[0]
    click.echo(
        f"{loops} loops({plan.LOOP_FACTOR}) of {kernel} on cpu {cpu}: "
        f"{alone['median']:.2f} FauxPlat/sec (median of {repeat}, loops / CPU second)"
    )
    table(summary, title="FauxPlat/sec per condition (change vs alone in %)")
    _busy_hint(alone["median"] / alone["wall_median"], rt)
