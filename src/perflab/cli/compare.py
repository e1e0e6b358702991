"""`perflab compare`: is B faster than A, over random setups rather than one lucky one?"""

from __future__ import annotations

import functools
import glob
import shlex
from typing import Any

import click

from perflab.cli import cli
from perflab.cli.options import (
    SWEEP_OUTPUT,
    build_timeout_option,
    check_paths,
    journal_options,
    output_options,
    plan_options,
    program_output_option,
    run_controls,
)
from perflab.cli.params import WORDS, Needs
from perflab.cli.printing import print_result
from perflab.cli.running import journaled_run, record_path
from perflab.lab.compare.plan import ComparePlan
from perflab.plan import metrics as metric_table


def _paths(words: str) -> list[str]:
    """Object files as shell words, a word with a wildcard expanded as a shell would (sorted;
    one that matches nothing is kept, and refused as missing)."""
    return [p for w in shlex.split(words) for p in (sorted(glob.glob(w)) or [w])]


@cli.command("compare")
@click.option(
    "--build",
    "use_build",
    is_flag=True,
    help="Compare two builds of the built-in multi-object workload instead of two programs.",
)
@click.option(
    "--cflags-a",
    default="-O2",
    show_default=True,
    type=WORDS,
    cls=Needs,
    needs="use_build",
    help="With --build: A's flags.",
)
@click.option(
    "--cflags-b",
    default="-O3",
    show_default=True,
    type=WORDS,
    cls=Needs,
    needs="use_build",
    help="With --build: B's flags.",
)
@click.option(
    "--objects-a",
    type=WORDS,
    help="Compare two programs linked from object files, A's here (shell words), linked per "
    "setup by --cc with --ldflags.",
)
@click.option("--objects-b", type=WORDS, help="With --objects-a: B's object files.")
@click.option(
    "--build-cmd-a",
    type=WORDS,
    help="Compare what two build commands link: A's, run without a shell with perflab's "
    "compiler wrappers first on PATH (as ldrand does: cc, gcc, clang, c++, g++, clang++), run "
    "again per setup to relink --program-a.",
)
@click.option("--build-cmd-b", type=WORDS, help="With --build-cmd-a: B's build command.")
@click.option(
    "--program-a",
    type=click.Path(dir_okay=False),
    help="With --build-cmd-a: the program it links (removed before each of its runs).",
)
@click.option(
    "--program-b", type=click.Path(dir_okay=False), help="With --build-cmd-b: the program it links."
)
@click.option(
    "--cc", type=WORDS, help="Compiler/linker driver for --build and --objects-a/-b. [$CC, cc]"
)
@click.option(
    "--ldflags", default="", type=WORDS, help="With --objects-a/-b: link flags after the objects."
)
@click.option(
    "--args",
    "run_args",
    default="",
    type=WORDS,
    help="With --build, --objects-a/-b or --build-cmd-a/-b: the arguments both linked "
    "programs run with.",
)
@plan_options(ComparePlan, ("randomize",))
@click.option(
    "--metric",
    "metrics",
    multiple=True,
    metavar="METRIC",
    help="Also decide on METRIC, each with its own interval and verdict: "
    f"{metric_table.listed('compare')}; repeat it or give a comma list. `perflab machine` lists "
    "the ones this machine offers.",
)
@plan_options(ComparePlan, ("layout", "setups", "repeat", "per_placement", "iterations",
                            "precision", "budget", "env_max", "heap_max", "code_max"))  # fmt: skip
@run_controls
@journal_options
@program_output_option(*SWEEP_OUTPUT)
@build_timeout_option
@output_options
@click.argument("a", required=False, type=WORDS)
@click.argument("b", required=False, type=WORDS)
@click.pass_context
def compare_cmd(ctx: click.Context, use_build: bool, cflags_a: str, cflags_b: str,
                objects_a: str | None, objects_b: str | None, build_cmd_a: str | None,
                build_cmd_b: str | None, program_a: str | None, program_b: str | None,
                cc: str | None, ldflags: str, run_args: str,
                randomize: tuple[str, ...] | None, metrics: tuple[str, ...], layout: str | None,
                resume: str | None,
                discard_bad: bool, program_output: str | None, output: str | None,
                as_json: bool, plot_path: str | None,
                a: str | None, b: str | None, **params: Any) -> None:  # fmt: skip
    """Run A and B interleaved in random setups; report B/A per setup and over all of them.

    \b
    perflab compare ./old ./new --setups 20 --repeat 10
    perflab compare ./old ./new --precision 1% --budget 300
    perflab compare './prog --fast' './prog --careful' --randomize env-size,heap-offset,aslr
    perflab compare --build --cflags-a -O2 --cflags-b -O3 --plot ab.png
    perflab compare --objects-a 'o2/*.o' --objects-b 'o3/*.o' --randomize code-offset,link-order
    perflab compare --build-cmd-a 'make -C a' --program-a a/prog --build-cmd-b 'make -C b' \\
        --program-b b/prog --randomize code-offset
    perflab compare ./old ./new --layout ab.parquet:3
    """
    from perflab.lab import compare

    pairs = {"--objects-a and --objects-b": (objects_a, objects_b),
             "--build-cmd-a and --build-cmd-b": (build_cmd_a, build_cmd_b),
             "--program-a and --program-b": (program_a, program_b)}  # fmt: skip
    for flags, pair in pairs.items():
        if any(pair) and not all(pair):
            raise click.BadParameter(f"give both {flags}")
    if bool(build_cmd_a) != bool(program_a):
        raise click.BadParameter("--build-cmd-a/-b and --program-a/-b go together")
    ways = (bool(a or b), use_build, bool(objects_a), bool(build_cmd_a))
    if sum(ways) > 1:
        raise click.BadParameter(
            "give one of: two programs, --build, --objects-a/-b or --build-cmd-a/-b"
        )
    if not any(ways) or (ways[0] and not (a and b)):
        raise click.BadParameter("give two programs A B (or --build to compare two builds)")
    linked = use_build or bool(objects_a)
    if (ldflags and not objects_a) or (cc and not linked) or (run_args and ways[0]):
        raise click.BadParameter(
            "--cc goes with --build or --objects-a/-b, --ldflags with --objects-a/-b, --args with "
            "a program perflab links"
        )
    for name in ("setups", "repeat"):  # what was not given, the plan decides
        if ctx.get_parameter_source(name) == click.core.ParameterSource.DEFAULT:
            params.pop(name)
    # the rules, one line before anything is built
    asked = metric_table.check(",".join(metrics) or "time", "compare")
    compare.ComparePlan.given(asked, linked, layout=layout, randomize=randomize, **params)
    named = bool(output or resume)
    output, resuming = record_path(output, resume, "compare")
    check_paths(output, plot_path)
    args = shlex.split(run_args)
    if use_build:
        cc_argv = shlex.split(cc) if cc else None
        side_a = compare.build_side("A", shlex.split(cflags_a), cc_argv, args)
        side_b = compare.build_side("B", shlex.split(cflags_b), cc_argv, args)
    elif objects_a and objects_b:
        link_flags = shlex.split(ldflags)
        side_a = compare.objects_side("A", _paths(objects_a), cc, link_flags, args)
        side_b = compare.objects_side("B", _paths(objects_b), cc, link_flags, args)
    elif build_cmd_a and build_cmd_b and program_a and program_b:
        side_a = compare.build_command_side("A", build_cmd_a, program_a, args)
        side_b = compare.build_command_side("B", build_cmd_b, program_b, args)
    else:
        assert a and b  # refused above without both
        side_a, side_b = compare.program_side("A", a), compare.program_side("B", b)
    run = functools.partial(compare.compare, side_a, side_b, randomize=randomize, layout=layout,
                            output=output,
                            resume=resuming, discard_bad=discard_bad,
                            metrics=",".join(metrics) or "time", **params)  # fmt: skip
    df = journaled_run(run, output, named, "compare", program_output=program_output)
    ok = df[df["status"] == "ok"]
    if not (ok.groupby(["setup", "rep"])["side"].nunique() == 2).any():  # no A/B pair
        from perflab.running.childruns import status_counts

        raise click.ClickException(
            f"no setup has a pair of ok runs of both A and B (status: {status_counts(df)}): "
            f"nothing to compare; the {len(df)} runs are recorded in {output} (see its "
            "exit_code and signal columns)"
        )
    print_result(df, as_json, output, plot_path)
