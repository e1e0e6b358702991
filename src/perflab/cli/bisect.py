"""`perflab bisect GOOD BAD --build CMD --run CMD`: the first commit that made a benchmark slower,
each step a layout-randomised comparison."""

from typing import Any

import click

from perflab.cli import cli, echo
from perflab.cli.options import (
    build_timeout_option,
    check_paths,
    commit_controls,
    commit_options,
    output_options,
    plan_options,
)
from perflab.cli.params import WORDS, Count
from perflab.cli.printing import print_result
from perflab.plan import controls, metrics
from perflab.plan.commits import CommitPlan


@cli.command("bisect")
@click.argument("good", type=WORDS)
@click.argument("bad", type=WORDS)
@commit_options
@click.option(
    "--confidence",
    default=0.95,
    show_default=True,
    type=click.FloatRange(0.5, 1, max_open=True),
    help="The chance that no comparison of the whole bisect errs.",
)
@plan_options(CommitPlan)
@click.option("--budget", default=None, type=Count(1, controls.ROW_BYTES), metavar="RUNS",
              help="The most runs one comparison may make: an unclear one draws layouts again "
              "(--setups x --repeat pairs a look) while the budget holds, then the search tries "
              "a neighbour [default: six looks].")  # fmt: skip
@click.option("--metric", default="time", show_default=True,
              help=f"What makes a commit worse: {metrics.listed('bisect')}.")  # fmt: skip
@click.option(
    "--resume",
    type=click.Path(dir_okay=False),
    default=None,
    help="Go on from the comparisons a stopped bisect saved in FILE.",
)
@commit_controls
@build_timeout_option
@output_options
def bisect_cmd(good: str, bad: str, build_cmd: str, run_cmd: str, repo: str | None,
               confidence: float, setups: int, repeat: int, seed: int, budget: int | None,
               metric: str, resume: str | None,
               output: str | None, as_json: bool, plot_path: str | None,
               **children: Any) -> None:  # fmt: skip
    """Find the first commit between GOOD and BAD whose benchmark is slower than its parent's.

    Each commit is exported from git (nothing in the repository is written) and built in
    perflab's cache, where a second bisect finds it built. Each step compares two commits
    over random layouts (environment size, heap offset, ASLR), so that a commit that only
    moves code or data is not taken for a slower one. Exit status 3: BAD is not shown slower;
    4: no single commit found (the commits left are unclear or do not build).
    With --metric, "slower" is reads more of that metric: a commit that does more instructions,
    or takes more memory.

    \b
    perflab bisect v1.0 HEAD --build make --run './bench --quick'
    perflab bisect HEAD~20 HEAD --build "sh -c 'cc -O2 -o b *.c'" --run ./b -o bisect.parquet
    """
    import shlex
    import sys

    from perflab.lab import bisect

    if resume and output and resume != output:
        raise click.BadParameter("give -o FILE or --resume FILE, not both")
    output = resume or output
    check_paths(output, plot_path)
    df = bisect.bisect(good, bad, shlex.split(build_cmd), shlex.split(run_cmd), repo=repo,
                       confidence=confidence, setups=setups, repeat=repeat, seed=seed,
                       metric=metric, budget=budget, output=output, resume=bool(resume),
                       controls=children, say=lambda line: echo(line, err=True))  # fmt: skip
    print_result(df, as_json, output, plot_path)
    meta = df.attrs["perflab"]
    if meta.get("not_slower"):
        sys.exit(bisect.NOT_SLOWER)
    if meta.get("complete") and not meta.get("first_slower"):
        sys.exit(bisect.UNRESOLVED)
