"""What every measuring verb shares: -o/--json/--plot, tables, JSON on stdout."""

import json
import math
import sys
import time
from pathlib import Path

import click
import pandas as pd

from perflab import machine, plot, results
from perflab.errors import PerflabError


def output_options(func):
    """-o FILE, --json and --plot FILE, with the paths checked before anything is measured."""
    func = click.option(
        "--plot",
        "plot_path",
        type=click.Path(dir_okay=False),
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
        type=click.Path(dir_okay=False),
        help="Save the tidy data to FILE (.parquet, or .csv with a JSON sidecar).",
    )(func)
    return func


def cluster_options(func):
    """--cluster ADDRESS and --host LABEL: run the measurement on a Dask fleet instead of here."""
    func = click.option(
        "--host", "hosts", multiple=True, help="With --cluster: only these hosts (repeatable)."
    )(func)
    func = click.option(
        "--cluster",
        metavar="ADDRESS",
        help="Dask scheduler (tcp://host:8786): measure on every worker host, "
        "one point at a time per host (pip install perflab[cluster]).",
    )(func)
    return func


def cpu_list(ctx, param, value):
    """Click callback: '1' or '0-1,3' as a list of online CPUs, else a one-line error."""
    if value is None:
        return None
    try:
        cpus = machine.parse_cpu_list(value)
    except ValueError:
        raise click.BadParameter(f"{value!r} is not a CPU list such as 1 or 0-3,6") from None
    return machine.check_cpus(cpus)


def record_path(output: str | None, resume: str | None, stem: str) -> tuple[str, bool]:
    """Where to record: --resume FILE, else -o, else a fresh timestamped name."""
    if resume:
        if output and Path(output).resolve() != Path(resume).resolve():
            raise PerflabError(f"-o {output} and --resume {resume} name different files")
        if not Path(resume).exists() and not Path(resume + ".parts").exists():
            raise PerflabError(f"{resume}: nothing to resume (no results or journal there)")
        return resume, True
    if output:
        return output, False
    return time.strftime(f"{stem}-%Y%m%d-%H%M%S.parquet"), False


def progressbar(length: int, label: str):
    """A progress bar with ETA on stderr, so --json on stdout stays parseable."""
    return click.progressbar(length=length, label=label, file=sys.stderr, show_eta=True)


class Bars:
    """Click progress bars on stderr, one per phase (link, run), created when sizes are known."""

    def __init__(self):
        self.bar = None

    def open(self, label: str, length: int, done: int = 0):
        self.close()
        if done:
            click.echo(f"resuming: {done} runs done, {length} to go", err=True)
        self.bar = progressbar(length, label)
        self.bar.__enter__()
        return self.bar.update

    def update(self, n: int) -> None:
        self.bar.update(n)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.__exit__(None, None, None)
            self.bar = None
            if not sys.stderr.isatty():
                click.echo(err=True)  # click ends a non-tty bar without a newline


def interrupted(output: str) -> click.ClickException:
    """Ctrl-C in a journaled run: where the finished runs are and how to complete them."""
    if not Path(output).exists() and not Path(output + ".parts").exists():
        return click.ClickException("interrupted before any run was recorded")
    return click.ClickException(
        f"interrupted: finished runs are in {output}; complete them with the same "
        f"command plus --resume {output}"
    )


def check_paths(output: str | None, plot_path: str | None) -> None:
    """Refuse unwritable or unknown-format paths up front, so no measurement is lost."""
    if output:
        results.check_output(output)
    if plot_path:
        plot.check_plot_path(plot_path)


def _clean(obj):
    """JSON-safe values: NaN/inf become null, numpy scalars become Python numbers."""
    if isinstance(obj, dict):
        return {str(k): _clean(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_clean(v) for v in obj]
    if hasattr(obj, "item"):
        obj = obj.item()
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def emit_json(obj) -> None:
    """Print one JSON document on stdout."""
    click.echo(json.dumps(_clean(obj), indent=1, default=str))


def records(df: pd.DataFrame) -> list[dict]:
    """A frame as JSON-ready records."""
    return _clean(df.to_dict(orient="records"))


def table(df: pd.DataFrame, floatfmt: str = "{:,.2f}", title: str | None = None) -> str:
    """A right-aligned text table in the style of the articles' listings."""
    if title:
        click.echo(title)
    cols = list(df.columns)
    cells = [[_fmt(v, floatfmt) for v in row] for row in df.itertuples(index=False)]
    widths = [max([len(str(c))] + [len(r[i]) for r in cells]) for i, c in enumerate(cols)]
    lines = ["  ".join(str(c).rjust(w) for c, w in zip(cols, widths, strict=True))]
    lines += ["  ".join(v.rjust(w) for v, w in zip(r, widths, strict=True)) for r in cells]
    text = "\n".join(lines)
    click.echo(text)
    return text


def _fmt(value, floatfmt: str) -> str:
    if isinstance(value, bool) or value is None:
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return "nan" if math.isnan(value) else floatfmt.format(value)
    return str(value)
