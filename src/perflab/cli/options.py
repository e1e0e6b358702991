"""The options measuring verbs share: -o/--json/--plot, --program-output, --cluster,
--resume, --build-timeout, and the options a plan's fields declare.

Imported by every verb's module, so it imports nothing heavy itself: `perflab VERB --help`
builds the options from the plans (plan/, each experiment package's) and never loads numpy,
pandas or matplotlib.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Collection, Sequence
from typing import Any, TypeVar

import click

from perflab.cli.params import (
    SECONDS,
    WORDS,
    Count,
    FileToWrite,
    Needs,
    Number,
    ProgramOutput,
    cpu_list,
    cpu_values,
)
from perflab.errors import PerflabError
from perflab.plan import controls
from perflab.plan.base import bounds

F = TypeVar("F", bound=Callable[..., Any])


OUTPUTS = ("output", "as_json", "plot_path")  # -o, --json and --plot, by parameter name


def output_options(func: F, only: Collection[str] = OUTPUTS) -> F:
    """-o FILE, --json and --plot FILE (those `only` names), with the paths checked before
    anything is measured."""
    if "plot_path" in only:
        func = click.option(
            "--plot",
            "plot_path",
            type=FileToWrite(),
            help="Draw the figure to FILE (.png, .svg, .pdf).",
        )(func)
    if "as_json" in only:
        func = click.option(
            "--json",
            "as_json",
            is_flag=True,
            help="Print a machine-readable summary on stdout instead of tables.",
        )(func)
    if "output" in only:
        func = click.option(
            "-o",
            "--output",
            type=FileToWrite(),
            help="Save the tidy data to FILE (.parquet, or .csv with a JSON sidecar).",
        )(func)
    return func


def check_paths(output: str | None, plot_path: str | None) -> None:
    """Refuse unwritable or unknown-format paths up front, so no measurement is lost."""
    from perflab.analysis import plot
    from perflab.store import results

    if output:
        results.check_output(output)
    if plot_path:
        plot.check_plot_path(plot_path)


def program_output_option(default: str, why: str, *aliases: str, **kwargs: Any) -> Callable[[F], F]:
    """--program-output WHERE: where the measured program's stdout and stderr go, the same
    choice in every verb that runs a program (as hyperfine's --output)."""
    return click.option(
        "--program-output",
        *aliases,
        "program_output",
        type=ProgramOutput(writable=True),
        default=None,
        help=program_output_help(default, why),
        **kwargs,
    )


def program_output_help(default: str, why: str) -> str:
    """--program-output's help, its default said with why (the same words in every verb)."""
    return ("Where the program's stdout and stderr go: null (discarded), inherit (perflab's "
            f"own), or FILE (both streams, every run's). [default: {default}: {why}]")  # fmt: skip


# What the sweeps say of --program-output's default: they print on stdout, and run thousands.
SWEEP_OUTPUT = ("null", "perflab prints its report on stdout, and a sweep runs the program "
                "thousands of times")  # fmt: skip


def program_where(given: str | None, as_json: bool) -> str:
    """Where a profiled or counted program's streams go: as given, else perflab's own (its
    report goes to stderr), or null when --json prints on stdout; inherit beside --json is
    refused, since the program's bytes would break the JSON."""
    from perflab.running import program_output

    if given == program_output.INHERIT and as_json:
        raise click.UsageError(
            "--program-output inherit would mix the program's stdout into --json's: "
            "give null or a FILE"
        )
    return given or (program_output.NULL if as_json else program_output.INHERIT)


def cluster_options(func: F) -> F:
    """--cluster ADDRESS and --host LABEL: run the measurement on a Dask fleet instead of here."""
    func = click.option(
        "--host",
        "hosts",
        multiple=True,
        cls=Needs,
        needs="cluster",
        help="With --cluster: only these hosts (repeatable).",
    )(func)
    func = click.option(
        "--cluster",
        metavar="ADDRESS",
        is_eager=True,  # --cpu is then checked on each host, not here
        help="Dask scheduler (tcp://host:8786): measure on every worker host, "
        "one point at a time per host (pip install perflab[cluster]).",
    )(func)
    return func


def discard_bad_option(func: F) -> F:
    """--discard-bad: a resume drops damaged journal chunks instead of refusing them."""
    return click.option(
        "--discard-bad",
        is_flag=True,
        cls=Needs,
        needs="resume",
        help="With --resume: drop journal chunks that fail their checks (their runs are "
        "measured again) instead of refusing to resume.",
    )(func)


def resume_option(func: F) -> F:
    """--resume FILE: complete an interrupted, journaled run."""
    return click.option(
        "--resume",
        type=FileToWrite(),
        help="Complete an interrupted run recorded in FILE (same parameters required).",
    )(func)


BUILD_TIMEOUT_S = 600.0  # system/supervisor.py's default, not imported: it loads the C core


def commit_options(func: F) -> F:
    """--build CMD, --run CMD and --repo DIR: how the verbs over a git history (bisect, track)
    build each commit and run its benchmark, and where the history is."""
    func = click.option(
        "--repo",
        type=click.Path(file_okay=False),
        default=None,
        help="The git repository [default: the one around the current directory].",
    )(func)
    func = click.option(
        "--run",
        "run_cmd",
        required=True,
        type=WORDS,
        help="The benchmark's command line; a program named with a slash (./bench) is the "
        "commit's, and {tree} in an argument is its tree.",
    )(func)
    return click.option(
        "--build",
        "build_cmd",
        required=True,
        type=WORDS,
        help="The command that builds a commit, run in its tree (no shell; write sh -c '...' "
        "for one). A commit it fails on is skipped, and said.",
    )(func)


def build_timeout_option(func: F) -> F:
    """--build-timeout: the verb's build and link commands run within it (a build or link
    command that never returns is killed, with what it started, and said in one line)."""

    @functools.wraps(func)
    def bounded(*args: Any, build_timeout: float, **kwargs: Any) -> Any:
        from perflab.system import supervisor

        with supervisor.build_timeout(build_timeout):
            return func(*args, **kwargs)

    return click.option(
        "--build-timeout",
        type=SECONDS,
        default=BUILD_TIMEOUT_S,
        show_default=True,
        help="Seconds each build or link command may take before it is killed.",
    )(bounded)  # type: ignore[return-value]


def journal_options(func: F) -> F:
    """--resume FILE and --discard-bad."""
    return resume_option(discard_bad_option(func))


def _option(f: dataclasses.Field[Any]) -> Callable[[F], F]:
    """The click option of one plan field, from the metadata the field carries."""
    m = f.metadata["cli"]
    kw: dict = {"help": m["help"], "default": m.get("default", f.default),
                "show_default": m.get("shown", True)}  # fmt: skip
    if "needs" in m:
        kw.update(cls=Needs, needs=m["needs"], shown=m.get("needs_shown"))
    if "choices" in m:
        kw["type"] = click.Choice(list(m["choices"]))
    elif m.get("kind") == "cpus":
        kw.update(default=None, show_default=False, callback=cpu_list)
    elif m.get("kind") == "seconds":
        kw["type"] = SECONDS
    elif m.get("kind") == "cpu_values":  # repeatable --cpu N, one role each
        kw.update(type=int, show_default=False, callback=cpu_values(m["cpus"]))
    elif m.get("kind") == "directory":
        kw["type"] = click.Path(file_okay=False)
    elif m.get("kind") == "file":  # a file the verb writes (its own -o)
        kw["type"] = FileToWrite()
    elif m.get("kind") == "program_output":  # the help says the default (`said`) and why (help)
        kw.update(type=ProgramOutput(writable=True), help=program_output_help(m["said"], m["help"]))
    elif "parse" in m and m.get("usage"):  # a text refused as a usage mistake of its option
        kw.update(type=str, callback=lambda ctx, param, value: _parsed(m["parse"], value))
    elif "parse" in m:
        kw.update(type=str, callback=lambda ctx, param, value: None if value is None
                  else m["parse"](value))  # fmt: skip
    elif isinstance(f.default, bool):
        kw["show_default"] = "/" in m["flag"]  # --x/--no-x says its default; a flag is off
        if "/" not in m["flag"]:
            kw["is_flag"] = True
            if f.default:  # a flag that turns its field off: --no-mlock sets lock=False
                kw["flag_value"] = False
    elif "within" in m:  # between two values: an int's IntRange (said in --help), a float's
        low, high = m["within"]
        kw["type"] = click.IntRange(low, high) if isinstance(low + high, int) else Number(low, high)
    elif "least" in m:
        limits = bounds(m)
        assert limits is not None
        most = limits["most"] or controls.counter_bound()
        kw["type"] = Count(limits["least"], limits["each_bytes"], limits["each_s"],
                           limits["what"], lambda: most)  # fmt: skip
    elif "min" in m:
        kw["type"] = Count(m["min"])
    elif "type" in m:
        kw.update(type=m["type"], show_default=f.default is not None)
    if "metavar" in m:
        kw["metavar"] = m["metavar"]
    if m.get("multiple"):  # repeatable: --call a --call b
        kw["multiple"] = True
    if m.get("argument"):  # a positional word; any number of them when its default is a tuple
        many = isinstance(f.default, tuple)
        typed = {"type": kw["type"]} if "type" in kw else {}
        if m.get("command"):  # a program and its arguments, after --: their words untouched
            typed = {"type": click.UNPROCESSED}
        if many:  # click 8.2.0 takes no default for nargs=-1: none given is the field's
            return click.argument(
                f.name, nargs=-1, required=False, callback=lambda c, p, v: v or f.default, **typed
            )
        return click.argument(f.name, default=f.default, required=False, **typed)
    # a short flag before the long one (-e, --event), other spellings after it
    flags = [*filter(None, [m.get("short")]), m["flag"], *m.get("aliases", ())]
    return click.option(*flags, f.name, **kw)


def _parsed(parse: Callable[[Any], Any], value: Any) -> Any:
    """parse(value), its refusal said as click says a bad value of the option."""
    try:
        return parse(value)
    except PerflabError as exc:
        raise click.BadParameter(str(exc)) from None


def plan_options(plan: type, names: Sequence[str] | None = None) -> Callable[[F], F]:
    """Click options for these fields of a plan dataclass (None: every field with option
    metadata), in their order: the plan states its parameters once."""
    by_name = {f.name: f for f in dataclasses.fields(plan)}
    if names is None:
        names = [name for name, f in by_name.items() if "cli" in f.metadata]

    def decorate(func: F) -> F:
        for name in reversed(names):
            func = _option(by_name[name])(func)
        return func

    return decorate


def commit_controls(func: F) -> F:
    """The run controls bisect, track and history give their comparisons' children."""
    return plan_options(controls.Controls, controls.COMMIT_CONTROLS)(func)


def run_controls(func: F) -> F:
    """The run controls every child-run verb shares (controls.Controls), as click options."""
    names = [f.name for f in dataclasses.fields(controls.Controls)
             if f.name != "mlock" and "cli" in f.metadata]  # fmt: skip
    return plan_options(controls.Controls, names)(func)
