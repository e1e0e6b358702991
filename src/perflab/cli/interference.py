"""The options of the verbs that run worker threads: hogs beside them, their nice value
and real-time priority."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import click

from perflab.cli.options import F
from perflab.cli.params import Needs, Number
from perflab.lab.threads import plan

if TYPE_CHECKING:
    from perflab.lab import threads


def perturbation_values(
    ctx: click.Context, param: click.Parameter, values: Sequence[str]
) -> list[threads.Perturbation]:
    """KIND@CPU values; a bad one is a PerflabError: one line, like a bad -p."""
    from perflab.lab import threads

    return [threads.Perturbation.parse(v) for v in values]


def interference_options(func: F) -> F:
    """--perturb, --nice, --rt and --rt-limit, shared by every verb that runs workers."""
    func = click.option(
        "--rt-limit",
        default=plan.RT_LIMIT_S,
        show_default=True,
        type=Number(0.1, 600),
        cls=Needs,
        needs="rt",
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
        callback=perturbation_values,
        metavar="KIND@CPU",
        help="Run a hog during the measurement: cpu@N (busy loop), cache@N (cache thrasher), "
        "rt@N (bounded SCHED_FIFO bursts). Repeatable; perflab stops them before returning.",
    )(func)
    return func


def priority(nice: int, rt: bool, rt_limit: float) -> threads.Priority:
    """The workers' priority that --nice, --rt and --rt-limit asked for."""
    from perflab.lab import threads

    return threads.Priority(nice=nice, rt=rt, rt_limit=rt_limit)
