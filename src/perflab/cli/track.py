"""`perflab track [RANGE] --build CMD --run CMD`: each commit of RANGE measured over random
layouts into the history store."""

from typing import Any

import click

from perflab.cli import cli, echo
from perflab.cli.options import (
    build_timeout_option,
    commit_controls,
    commit_options,
    plan_options,
)
from perflab.plan.commits import TrackPlan


@cli.command("track")
@click.argument("revisions", default="HEAD", metavar="[RANGE]")
@commit_options
@click.option(
    "--store",
    type=click.Path(file_okay=False),
    default=None,
    help="The history store [default: .perflab/history at the repository's top].",
)
@click.option(
    "--reference",
    default=None,
    metavar="REV",
    help="The commit each commit runs beside, pair by pair, so that the host's drift between "
    "tracks cancels [default: the one this machine's series runs beside, else RANGE's first].",
)
@plan_options(TrackPlan)
@click.option("--untracked-only", is_flag=True,
              help="Leave out the commits this machine has in the store already.")  # fmt: skip
@commit_controls
@build_timeout_option
def track_cmd(revisions: str, build_cmd: str, run_cmd: str, repo: str | None,
              store: str | None, reference: str | None, setups: int, repeat: int, seed: int,
              untracked_only: bool, **children: Any) -> None:  # fmt: skip
    """Measure each commit of RANGE (A..B, or one revision; default HEAD) into the history store.

    Exit status 1 when a commit was left out (it does not build, or no run of it ended well),
    after the others are tracked.

    Each commit is exported from git and built in perflab's cache (as bisect builds it), then
    run in random layouts (environment size, heap offset, ASLR), the same ones for every
    commit of a --seed; its runs are added to the store, one file per commit and machine, and
    read by `perflab history`. Each run of the commit is paired with a run of one reference
    commit, the same for the machine's whole series, so that history reads each commit
    relative to it and a host that drifts between tracks does not read as a change. Tracking
    a commit again adds runs.

    \b
    perflab track HEAD --build make --run './bench --quick'
    perflab track v1.0..HEAD --build "sh -c 'cc -O2 -o b *.c'" --run ./b --untracked-only
    """
    import shlex
    import sys

    from perflab.lab import history

    written, left_out = history.track(
        revisions, shlex.split(build_cmd), shlex.split(run_cmd), repo=repo, store=store,
        reference=reference, setups=setups, repeat=repeat, seed=seed,
        untracked_only=untracked_only, controls=children,
        say=lambda line: echo(line, err=True),
    )  # fmt: skip
    echo(f"tracked {len(written)} commit{'' if len(written) == 1 else 's'}"
         + (f", left {len(left_out)} out" if left_out else ""))  # fmt: skip
    if left_out:
        sys.exit(1)
