"""--md and --html, the pages `perflab report` and `perflab diff` write, checked before the
files are read."""

from __future__ import annotations

import sys
from collections.abc import Callable

import click

from perflab.cli.options import F
from perflab.cli.params import FileToWrite
from perflab.core import files


def export_path(path: str | None, suffix: str) -> str | None:
    """An export path ('-' for stdout) checked before any work as an output is: its suffix,
    its directory, that it can be written."""
    from perflab.store import results

    if path is None or path == "-":
        return path
    results.check_output(path, (suffix,))
    return path


def one_stdout(as_json: bool, md_path: str | None, html_path: str | None) -> None:
    """Refuse two outputs for stdout (--json beside --md -, or --md - beside --html -): what a
    reader gets would be neither."""
    named = [flag for flag, on in (("--json", as_json), ("--md -", md_path == "-"),
                                   ("--html -", html_path == "-")) if on]  # fmt: skip
    if len(named) > 1:
        raise click.BadParameter(f"{' and '.join(named)} would both write to stdout: give the "
                                 "others a file")  # fmt: skip


def write_export(path: str | None, render: Callable[[], str]) -> None:
    """Render only when asked: a page draws its figure."""
    if path == "-":
        sys.stdout.write(render())
    elif path:
        files.write_bytes(path, render().encode("utf-8"))  # renamed into place: never via a link


def _markdown_path(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """--md takes the next word as its file: a result's name there means it came first."""
    if value is not None and value != "-" and not value.endswith(".md"):
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
