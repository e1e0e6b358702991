"""The values a verb's options take, checked as click parses them: files to write, finite
numbers, counts this machine can hold, command words, CPU lists; each refused in one line."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import click

from perflab.core import files
from perflab.errors import PerflabError
from perflab.plan import controls
from perflab.system import limits


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
        from perflab.running import program_output
        from perflab.store import results

        if value in (program_output.NULL, program_output.INHERIT):
            return value
        path = super().convert(value, param, ctx)
        try:  # as -o's file is checked, whatever its suffix
            results.check_output(path, (Path(path).suffix,))
        except PerflabError as exc:
            self.fail(str(exc), param, ctx)
        return path


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


def fraction(text: str) -> float:
    """'2%' or '0.02' as 0.02: a change of interest, between 0 and 100 %."""
    try:
        value = float(text.removesuffix("%")) / (100 if text.endswith("%") else 1)
    except ValueError:
        raise click.BadParameter(f"{text!r}: a percentage (2%) or a fraction (0.02)") from None
    if not 0 < value < 1:
        raise click.BadParameter(f"{text!r}: a change between 0 and 100%")
    return value


CPU_LIST = re.compile(r"\d+(-\d+)?(,\d+(-\d+)?)*")  # what --cpu takes: 1, 0-3,6


def cpu_list(ctx: click.Context, param: click.Parameter, value: str | None) -> list[int] | None:
    """Click callback: '1' or '0-1,3' as a list of online CPUs, each once, else a one-line error."""
    from perflab.system import machine

    if value is None:
        return None
    try:
        if value.strip() and not CPU_LIST.fullmatch(value.strip()):  # sysfs' reader forgives
            raise ValueError(value)  # ',,' and '1-'; an empty list is said below
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
