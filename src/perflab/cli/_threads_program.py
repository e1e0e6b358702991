"""`perflab sweep threads -- PROGRAM ARGS`: the user's program at each thread count, reported
as easyperf's table, with the runs that cannot be trusted said so."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from perflab.cli.options import check_paths
from perflab.cli.printing import print_result
from perflab.cli.running import journaled_run, optional_record

if TYPE_CHECKING:
    from perflab.lab import threads


def program_sweep(
    command: tuple[str, ...],
    counts: Sequence[int],
    repeat: int,
    oversubscribe: bool,
    perturb: list[threads.Perturbation],
    output: str | None,
    resume: str | None,
    as_json: bool,
    plot_path: str | None,
    program_output: str | None = None,
    **params: Any,
) -> None:
    """Check, measure (journaled when -o or --resume names a file), then report."""
    from perflab.lab.threads import program

    output, resuming = optional_record(output, resume)
    check_paths(output, plot_path)
    run = functools.partial(program.run, command, counts, perturb=perturb, output=output,
                            resume=resuming, repeat=repeat,
                            oversubscribe=oversubscribe, **params)  # fmt: skip
    df = journaled_run(run, output, True, "threads", program_output=program_output)
    print_result(df, as_json, output, plot_path)
