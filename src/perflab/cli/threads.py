"""`perflab run core-vs-ht`, `perflab sweep threads`, `perflab run fauxplat`: threads and
interference, printed as DjiBee's and easyperf's programs print them."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

import click

from perflab.cli import sweep
from perflab.cli.interference import interference_options, priority
from perflab.cli.options import (
    SWEEP_OUTPUT,
    check_paths,
    output_options,
    plan_options,
    program_output_option,
    resume_option,
)
from perflab.cli.params import Count, Needs
from perflab.cli.printing import print_result
from perflab.cli.running import journaled_run, optional_record
from perflab.lab.threads import plan
from perflab.plan import controls

if TYPE_CHECKING:
    from perflab.lab import threads


@sweep.command("threads")
@plan_options(plan.ThreadsPlan, plan.PROGRAM_OPTIONS)
@resume_option
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
@click.option(
    "--max",
    "max_threads",
    default=None,
    type=Count(most=controls.most_threads),
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
    type=Count(each_s=controls.LOOP_S, what="its loops"),
    help=f"Total loops of {plan.LOOP_FACTOR} iterations, shared among the threads.",
)
@click.option(
    "--size",
    default=plan.DEFAULT_STREAM_BYTES,
    show_default=True,
    type=Count(8, 1, what="its buffer"),
    help="Buffer bytes per thread for --kernel stream.",
)
@click.option(
    "--repeat",
    type=Count(1, controls.ROW_BYTES),
    help="Repeats. [default: 3, with -- PROGRAM 7]",
)
@click.option(
    "--free",
    is_flag=True,
    help="Let the scheduler place threads instead of pinning "
    "them round-robin over the online CPUs.",
)
@click.option("--oversubscribe", is_flag=True, help="Allow more threads than online CPUs.")
@interference_options
@program_output_option(*SWEEP_OUTPUT, cls=Needs, needs="command", shown="a PROGRAM")
@output_options
def sweep_threads_cmd(
    counts: tuple[int, ...] | None,
    threads_env: str | None,
    cpus: list[int] | None,
    seed: int,
    timeout: float,
    inherit_env: bool,
    runq: str,
    resume: str | None,
    command: tuple[str, ...],
    max_threads: int | None,
    kernel: str,
    loops: int,
    size: int,
    repeat: int | None,
    free: bool,
    oversubscribe: bool,
    perturb: list[threads.Perturbation],
    nice: int,
    rt: bool,
    rt_limit: float,
    program_output: str | None,
    output: str | None,
    as_json: bool,
    plot_path: str | None,
) -> None:
    """Throughput, speedup, efficiency and CPU utilisation vs thread count (easyperf): of a
    built-in kernel, or of your program given after -- with {threads} where its count goes.

    \b
    perflab sweep threads --kernel spin --max 2
    perflab sweep threads --threads 1,2 -- xz -T{threads} -c FILE
    perflab sweep threads --threads 1,2,4 --oversubscribe -- ./omp_solver   # OMP_NUM_THREADS
    """
    from perflab.cli._threads_program import program_sweep
    from perflab.lab import threads
    from perflab.lab.threads import thread_count
    from perflab.system import machine

    if command:
        ctx = click.get_current_context()
        kernel_only = ["kernel", "loops", "size", "free", "nice", "rt", "rt_limit"]
        default = click.core.ParameterSource.DEFAULT
        given = [n for n in kernel_only if ctx.get_parameter_source(n) is not default]
        if given:
            flag = "--" + given[0].replace("_", "-")
            raise click.UsageError(f"{flag} is for the built-in kernels, not a PROGRAM")
        counts = counts or tuple(range(1, (max_threads or len(cpus or machine.usable_cpus())) + 1))
        return program_sweep(command, counts, repeat or 7, oversubscribe, perturb, output,
                             resume, as_json, plot_path, cpus=cpus, threads_env=threads_env,
                             seed=seed, timeout=timeout, inherit_env=inherit_env,
                             runq=runq, program_output=program_output)  # fmt: skip
    repeat = repeat or 3
    max_threads = max_threads or len(machine.usable_cpus())
    threads.check_placement([None] * max_threads, oversubscribe)
    output, resuming = optional_record(output, resume)
    check_paths(output, plot_path)
    timed = functools.partial(thread_count.run, max_threads, kernel, loops, size, repeat,
                              not free, oversubscribe, priority(nice, rt, rt_limit), perturb,
                              output=output, resume=resuming)  # fmt: skip
    df = journaled_run(timed, output, True, "threads")
    print_result(df, as_json, output, plot_path)
