"""What every measuring verb shares: -o/--json/--plot, tables, JSON on stdout.

Imported by every verb's module, so it imports nothing heavy itself: `perflab VERB --help`
builds the options from the plans (engine/controls.py, lab/plans/) and never loads numpy,
pandas or matplotlib.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import signal
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from perflab.cli import QUIET, echo
from perflab.core import files
from perflab.engine import controls, filelock
from perflab.engine.progress import Progress
from perflab.errors import Lost, OtherExperiment, PerflabError
from perflab.lab import registry
from perflab.lab.plans import threads as plan
from perflab.system import limits

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

    from perflab.engine import campaigns
    from perflab.lab import threads
    from perflab.reports import report

F = TypeVar("F", bound=Callable[..., Any])


def output_options(func: F) -> F:
    """-o FILE, --json and --plot FILE, with the paths checked before anything is measured."""
    func = click.option(
        "--plot",
        "plot_path",
        type=FileToWrite(),
        help="Draw the figure to FILE (.png, .svg, .pdf).",
    )(func)
    func = click.option(
        "--json",
        "as_json",
        is_flag=True,
        help="Print a machine-readable summary on stdout instead of tables.",
    )(func)
    func = click.option(
        "-o",
        "--output",
        type=FileToWrite(),
        help="Save the tidy data to FILE (.parquet, or .csv with a JSON sidecar).",
    )(func)
    return func


class FileToWrite(click.Path):
    """A file perflab writes: an empty name, or one ending in '/' (which pathlib would quietly
    strip, writing `x.parquet` for `x.parquet/`), is refused in one line; so is a FIFO, a device
    or a directory already there (the write would block on the FIFO, or go to the device)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(dir_okay=False, **kwargs)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str) and (not value or value.endswith("/")):
            why = "an empty name" if not value else "a directory's name (it ends with /)"
            self.fail(f"{value!r} is {why}: give a file's name", param, ctx)
        value = super().convert(value, param, ctx)
        if value != "-":
            try:
                files.check_target(value)
            except PerflabError as exc:
                self.fail(str(exc), param, ctx)
        return value


class ProgramOutput(FileToWrite):
    """null, inherit, or a file to write (checked as -o's files are: a directory's name, an
    unwritable file or a missing directory is refused before anything runs)."""

    name = "null|inherit|FILE"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        from perflab.engine import program_output, results

        if value in (program_output.NULL, program_output.INHERIT):
            return value
        path = super().convert(value, param, ctx)
        try:  # as -o's file is checked, whatever its suffix
            results.check_output(path, (Path(path).suffix,))
        except PerflabError as exc:
            self.fail(str(exc), param, ctx)
        return path


def program_output_option(default: str, why: str, *aliases: str, **kwargs: Any) -> Callable[[F], F]:
    """--program-output WHERE: where the measured program's stdout and stderr go, the same
    choice in every verb that runs a program (as hyperfine's --output)."""
    return click.option(
        "--program-output",
        *aliases,
        "program_output",
        type=ProgramOutput(writable=True),
        default=None,
        help="Where the program's stdout and stderr go: null (discarded), inherit (perflab's "
        f"own), or FILE (both streams, every run's). [default: {default}: {why}]",
        **kwargs,
    )


# What the sweeps say of --program-output's default: they print on stdout, and run thousands.
SWEEP_OUTPUT = ("null", "perflab prints its report on stdout, and a sweep runs the program "
                "thousands of times")  # fmt: skip


def program_where(given: str | None, as_json: bool) -> str:
    """Where a profiled or counted program's streams go: as given, else perflab's own (its
    report goes to stderr), or null when --json prints on stdout; inherit beside --json is
    refused, since the program's bytes would break the JSON."""
    from perflab.engine import program_output

    if given == program_output.INHERIT and as_json:
        raise click.UsageError(
            "--program-output inherit would mix the program's stdout into --json's: "
            "give null or a FILE"
        )
    return given or (program_output.NULL if as_json else program_output.INHERIT)


class Needs(click.Option):
    """An option that means something only beside another (`needs`, a parameter's name, shown
    as `shown` or its flag): given without it, it is refused in one line, not ignored."""

    def __init__(self, *args: Any, needs: str, shown: str | None = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.needs, self.shown = needs, shown

    def handle_parse_result(
        self, ctx: click.Context, opts: Mapping[str, Any], args: list[str]
    ) -> tuple[Any, list[str]]:
        parsed = super().handle_parse_result(ctx, opts, args)  # a bad value is said first
        if self.name in opts:
            other = next(p for p in ctx.command.params if p.name == self.needs)
            value = opts.get(self.needs)
            if isinstance(other, click.Argument):
                given = isinstance(value, (tuple, list, str)) and len(value) > 0
                what = f"-- {other.human_readable_name}"
            else:
                given, what = self.needs in opts, other.opts[0]
            if not given:
                raise click.UsageError(f"{self.opts[0]} needs {self.shown or what}", ctx)
        return parsed


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


class Number(click.ParamType):
    """A finite float within bounds: click's FloatRange lets nan through and inf overflow later."""

    name = "number"

    def __init__(self, low: float | None = None, high: float | None = None, open_low: bool = False):
        self.low, self.high, self.open_low = low, high, open_low

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> float:
        try:
            x = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number", param, ctx)
        if not math.isfinite(x):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        if self.low is not None and (x < self.low or (self.open_low and x == self.low)):
            self.fail(f"{value} must be {'>' if self.open_low else '>='} {self.low:g}", param, ctx)
        if self.high is not None and x > self.high:
            self.fail(f"{value} must be <= {self.high:g}", param, ctx)
        return x


SECONDS = Number(*controls.TIMEOUT_S)


class Count(click.ParamType):
    """A whole number of at least `least`, refused at once when its units would need more than
    this machine's memory or a week (controls.check_count): a typo never reaches the C core."""

    name = "integer"

    def __init__(
        self,
        least: int = 1,
        each_bytes: float = 0,
        each_s: float = 0,
        what: str = "its rows",
        most: Callable[[], tuple[int, str]] = controls.counter_bound,
    ):
        self.least, self.each_bytes, self.each_s, self.what, self.most = (
            least, each_bytes, each_s, what, most
        )  # fmt: skip

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        try:
            n = value if isinstance(value, int) else int(str(value).strip())
        except ValueError:
            self.fail(f"{value!r} is not a whole number", param, ctx)
        flag = param.human_readable_name if param else ""
        if isinstance(param, click.Option):
            flag = param.opts[0]
        try:
            return controls.check_count(
                flag, n, self.least, self.each_bytes, self.each_s, self.what, self.most()
            )
        except limits.LimitTooSmall:  # no count would do: the limit's line, not --help's
            raise
        except PerflabError as exc:
            raise click.UsageError(str(exc), ctx) from None


class Words(click.ParamType):
    """A command line (or flags) split as a shell would, though none runs it: an unbalanced
    quote is one line, and a {placeholder} not among `placeholders` is refused."""

    name = "text"

    def __init__(self, placeholders: Sequence[str] | None = None):
        self.placeholders = placeholders

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        try:
            split = controls.words(value, "")
            if self.placeholders is not None:
                controls.check_placeholders(split, self.placeholders, "")
        except PerflabError as exc:
            self.fail(str(exc), param, ctx)
        return str(value)


WORDS = Words()


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
        kw.update(cls=Needs, needs=m["needs"])
    if "choices" in m:
        kw["type"] = click.Choice(list(m["choices"]))
    elif m.get("kind") == "cpus":
        kw.update(default=None, show_default=False, callback=cpu_list)
    elif m.get("kind") == "seconds":
        kw["type"] = SECONDS
    elif "parse" in m:
        kw.update(type=str, callback=lambda ctx, param, value: m["parse"](value))
    elif isinstance(f.default, bool):
        kw["show_default"] = "/" in m["flag"]  # --x/--no-x says its default; a flag is off
        if "/" not in m["flag"]:
            kw["is_flag"] = True
    elif "min" in m:
        kw["type"] = Count(m["min"])
    elif "type" in m:
        kw.update(type=m["type"], show_default=f.default is not None)
    return click.option(m["flag"], f.name, **kw)


def plan_options(plan: type, names: Sequence[str]) -> Callable[[F], F]:
    """Click options for these fields of a plan dataclass: the plan states its parameters once."""
    by_name = {f.name: f for f in dataclasses.fields(plan)}

    def decorate(func: F) -> F:
        for name in reversed(names):
            func = _option(by_name[name])(func)
        return func

    return decorate


def run_controls(func: F) -> F:
    """The run controls every child-run verb shares (controls.Controls), as click options."""
    names = [f.name for f in dataclasses.fields(controls.Controls)
             if f.name != "mlock" and "cli" in f.metadata]  # fmt: skip
    return plan_options(controls.Controls, names)(func)


def check_complete(df: pd.DataFrame, output: str) -> None:
    """A run that ended without every planned run exactly once is an error, not a result."""
    from perflab.engine import results

    problem = results.metadata(df).get("incomplete")
    if problem:
        raise click.ClickException(
            f"{output}: {problem}; complete it with the same command plus --resume {output}"
        )


def fraction(text: str) -> float:
    """'2%' or '0.02' as 0.02: a change of interest, between 0 and 100 %."""
    try:
        value = float(text.removesuffix("%")) / (100 if text.endswith("%") else 1)
    except ValueError:
        raise click.BadParameter(f"{text!r}: a percentage (2%) or a fraction (0.02)") from None
    if not 0 < value < 1:
        raise click.BadParameter(f"{text!r}: a change between 0 and 100%")
    return value


def cpu_list(ctx: click.Context, param: click.Parameter, value: str | None) -> list[int] | None:
    """Click callback: '1' or '0-1,3' as a list of online CPUs, each once, else a one-line error."""
    from perflab.system import machine

    if value is None:
        return None
    try:
        cpus = machine.parse_cpu_list(value)
    except ValueError:
        raise click.BadParameter(f"{value!r} is not a CPU list such as 1 or 0-3,6") from None
    try:
        controls.check_cpu_list(param.opts[0], cpus)
    except PerflabError as exc:
        raise click.UsageError(str(exc), ctx) from None
    return cpus if ctx.params.get("cluster") else machine.check_cpus(cpus)


def cpu_values(
    most: int, distinct: bool = True
) -> Callable[[click.Context, click.Parameter, Sequence[int]], list[int]]:
    """Click callback of a repeatable CPU option: up to `most` usable CPUs (each once when
    `distinct`); one more would be dropped, a repeated one would pin two roles to one CPU."""

    def check(ctx: click.Context, param: click.Parameter, values: Sequence[int]) -> list[int]:
        from perflab.system import machine

        flag = param.opts[0]
        if len(values) > most:
            raise click.UsageError(f"{flag} names {len(values)} CPUs; it takes {most} at most", ctx)
        try:
            if distinct:
                controls.check_cpu_list(flag, values, allow_empty=True)
            return machine.check_cpus(values)
        except PerflabError as exc:
            raise click.UsageError(str(exc), ctx) from None

    return check


def record_path(output: str | None, resume: str | None, stem: str) -> tuple[str, bool]:
    """Where to record: --resume FILE, else -o, else a fresh timestamped name."""
    if resume:
        if output and Path(output).resolve() != Path(resume).resolve():
            raise PerflabError(f"-o {output} and --resume {resume} name different files")
        if not Path(resume).exists() and not Path(resume + ".parts").exists():
            filelock.check_free(resume)  # a sweep holds its file's lock before its journal opens
            raise PerflabError(f"{resume}: nothing to resume (no results or journal there)")
        return resume, True
    if output:
        return output, False
    return time.strftime(f"{stem}-%Y%m%d-%H%M%S.parquet"), False


def optional_record(output: str | None, resume: str | None) -> tuple[str | None, bool]:
    """Where an in-process verb records: --resume FILE or -o FILE, else nowhere (in memory)."""
    return record_path(output, resume, "") if output or resume else (None, False)


def progressbar(length: int, label: str) -> Progress:
    """Progress on stderr, so --json on stdout stays parseable: a bar with ETA in a terminal,
    a line every 10 s or 5 % in a log; none with perflab --quiet."""
    ctx = click.get_current_context(silent=True)
    quiet = bool(ctx and ctx.meta.get(QUIET))
    return Progress(label, length, file=sys.stderr, mode="off" if quiet else "auto")


class Bars:
    """Progress displays on stderr, one per phase (link, run), created when sizes are known."""

    def __init__(self) -> None:
        self.bar: Progress | None = None

    def open(self, label: str, length: int, done: int = 0) -> Callable[[int], None]:
        self.close()
        if done:
            click.echo(f"resuming: {done} runs done, {length} to go", err=True)
            if not length:  # that line says it all: no bar counting 0 of 0 twice
                return self.update
        self.bar = progressbar(length, label)
        self.bar.__enter__()
        return self.bar.update

    def update(self, n: int) -> None:
        if self.bar is not None:
            self.bar.update(n)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


def journaled_run(
    run: Callable[..., pd.DataFrame],
    output: str | None,
    named: bool,
    label: str,
    bars: Bars | None = None,
    program_output: str | None = None,
) -> pd.DataFrame:
    """A journaled run with progress bars: where it records, how to resume, complete or error.
    Its child runs' stdout and stderr go to program_output (--program-output; /dev/null).

    run(on_start=, progress=) measures; on_start(todo, done) opens the bar once the input has
    proved valid, and says where the rows go when no -o named the file. Without an output
    the rows stay in memory, and a stop says that nothing was kept. A resume of another
    experiment's file names both by their verbs.
    """
    bars = bars or Bars()
    said: list[str] = []

    def start(todo: int, done: int) -> Callable[[int], None]:
        if not named and not said:  # once: compare --precision starts a bar each round
            # kept in the current directory, where a stopped run is resumed from, and named
            # whole: one stderr line is all that says a file appeared there
            where = Path(output or "").resolve()
            said.append(f"recording to {where} (no -o FILE given: the current directory)")
            click.echo(said[0], err=True)
        return bars.open(label, todo, done)

    from perflab.engine import program_output as streams

    try:
        with streams.directed(program_output or streams.NULL):
            df = run(on_start=start, progress=bars.update)
    except KeyboardInterrupt as exc:
        bars.close()
        raise interrupted(output, exc) from None
    except Lost as exc:
        raise PerflabError(f"{exc}; {kept(output)}") from None
    except OtherExperiment as exc:
        raise PerflabError(exc.said(registry.describe)) from None
    finally:
        bars.close()
    if output:
        check_complete(df, output)
    return df


def campaign_verb(
    measure: Callable[..., pd.DataFrame],
    points: list[dict[str, Any]],
    cluster: str,
    hosts: Sequence[str],
    record: tuple[str | None, bool],
    params: dict[str, Any],
    experiment: str,
    unique: Sequence[str] = (),
    check: Callable[[], object] | None = None,
    extra_meta: Mapping[str, Any] | None = None,
) -> tuple[pd.DataFrame, campaigns.Outcome]:
    """A --cluster run of any verb: journaled by (host, point), resumable, refusals said once."""
    from perflab.engine import campaigns
    from perflab.system import machine

    output, resuming = record
    bars = Bars()
    meta = {**machine.metadata(), **(extra_meta or {}), "experiment": f"{experiment} campaign"}
    try:
        df, out = campaigns.run_journaled(
            measure, points, cluster, hosts, output, {**params, "cluster": cluster,
            "hosts": sorted(hosts)}, meta, resuming, unique,
            on_point=lambda: bars.update(1),
            on_start=lambda todo: bars.open(f"{experiment} points", todo), check=check,
        )  # fmt: skip
    except KeyboardInterrupt as exc:
        raise interrupted(output, exc) from None
    except OtherExperiment as exc:
        raise PerflabError(exc.said(registry.describe)) from None
    finally:
        bars.close()
    for line in out.refused:
        click.echo(f"refused {line}", err=True)
    return df, out


def interrupted(output: str | None, exc: BaseException | None = None) -> click.ClickException:
    """Ctrl-C or SIGTERM in a journaled run: where the finished runs are, how to complete them.

    The exit status is 128 + the signal (130 for Ctrl-C, 143 for SIGTERM), as a shell reports.
    """
    if output is None:
        error = click.ClickException("interrupted: a run without -o FILE keeps nothing")
    elif not Path(output).exists() and not Path(output + ".parts").exists():
        error = click.ClickException("interrupted before any run was recorded")
    else:
        error = click.ClickException(f"interrupted: {kept(output)}")
    # Newer click declares exit_code a class variable (8.2 does not, hence unused-ignore);
    # this one error carries the signal's status.
    error.exit_code = 128 + getattr(exc, "signum", signal.SIGINT)  # type: ignore[misc,unused-ignore]
    return error


def kept(output: str | None) -> str:
    """Where a sweep cut short left its finished runs, and how to complete them."""
    if output is None:
        return "a run without -o FILE keeps nothing"
    if not Path(output).exists() and not Path(output + ".parts").exists():
        return "no run was recorded"
    return (f"finished runs are in {output}; complete them with the same command plus "
            f"--resume {output}")  # fmt: skip


def check_paths(output: str | None, plot_path: str | None) -> None:
    """Refuse unwritable or unknown-format paths up front, so no measurement is lost."""
    from perflab.analysis import plot
    from perflab.engine import results

    if output:
        results.check_output(output)
    if plot_path:
        plot.check_plot_path(plot_path)


def emit_json(obj: Any) -> None:
    """Print one JSON document on stdout (NaN as null)."""
    from perflab.reports import exporters

    click.echo(exporters.json_text(obj))


def table(df: pd.DataFrame, floatfmt: str = "{:,.2f}", title: str | None = None) -> None:
    """Print a text table as reports render it."""
    from perflab.reports import exporters

    echo(exporters.text_table(df, floatfmt, title))


def print_result(
    df: pd.DataFrame,
    as_json: bool,
    output: str | None = None,
    plot_path: str | None = None,
    draw: Callable[[report.Report], Figure] | None = None,
    err: bool = False,
) -> report.Report:
    """Print what a verb just measured as `perflab report` prints the file it saved: the
    summary's text after where the data and figure went, or the report's JSON document. The
    figure is the summary's, or draw(report)'s when the verb has its own view of it.
    err: the text on stderr, where a verb leaves stdout to the program it ran."""
    from perflab.reports import exporters
    from perflab.reports import report as reports

    shown = reports.of_frame(df, output)
    if plot_path:
        shown.plot(plot_path, None if draw is None else draw(shown))
    if as_json:
        click.echo(exporters.JSON.report(shown))
        return shown
    if output:
        echo(f"data: {output}", err=err)
    if plot_path:
        echo(f"plot: {plot_path}", err=err)
    echo(exporters.TEXT.summary(shown.summary), err=err)
    return shown


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
    from perflab.lab import threads

    return threads.Priority(nice=nice, rt=rt, rt_limit=rt_limit)


def export_path(path: str | None, suffix: str) -> str | None:
    """An export path ('-' for stdout) checked before any work as an output is: its suffix,
    its directory, that it can be written."""
    from perflab.engine import results

    if path is None or path == "-":
        return path
    results.check_output(path, (suffix,))
    return path


def write_export(path: str | None, render: Callable[[], str]) -> None:
    """Render only when asked: a page draws its figure."""
    if path == "-":
        sys.stdout.write(render())
    elif path:
        files.write_bytes(path, render().encode("utf-8"))  # renamed into place: never via a link


def _markdown_path(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """--md takes the next word as its file: a result's name there means it came first."""
    if value not in (None, "-") and not value.endswith(".md"):
        raise click.BadParameter(
            f"{value!r} is not a FILE.md; --md alone writes to stdout, so put it after the "
            "result files (perflab report FILE --md)",
            ctx,
            param,
        )
    return value


def export_options(func: F) -> F:
    """--md [FILE] and --html FILE ('-', or --md alone: stdout), checked before the files are
    read."""
    func = click.option(
        "--html",
        "html_path",
        metavar="FILE",
        type=FileToWrite(allow_dash=True),
        help="Write one self-contained page (figure embedded) to FILE.html; opens offline.",
    )(func)
    return click.option(
        "--md",
        "md_path",
        metavar="[FILE]",
        is_flag=False,
        flag_value="-",
        type=FileToWrite(allow_dash=True),
        callback=_markdown_path,
        help="Write GitHub Markdown tables to FILE.md, or to stdout without FILE (or with '-'), "
        "to paste into a PR.",
    )(func)


def busy_hint(wall_over_cpu: float, rt: bool) -> None:
    """Say when other tasks shared the CPUs alone, and which flag keeps them off: utilisation
    below the share the disturbance rule every verb shares allows (analysis/disturbance.py)."""
    from perflab.analysis import disturbance

    if wall_over_cpu * (1 - disturbance.DROP) > 1 and not rt:
        click.echo(
            f"note: alone, elapsed time was {wall_over_cpu:.1f}x the CPU time: other tasks shared "
            "these CPUs; --rt (or --nice -20) keeps them off, as the post's high priority did",
            err=True,
        )
