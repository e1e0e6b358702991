"""A measuring verb's run: where it records, its progress bars, stop and resume, and a
--cluster campaign; a stopped run says where its finished runs are."""

from __future__ import annotations

import signal
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from perflab.cli import QUIET
from perflab.errors import Lost, OtherExperiment, PerflabError
from perflab.lab import registry
from perflab.running.progress import Progress
from perflab.store import filelock

if TYPE_CHECKING:
    import pandas as pd

    from perflab.running import campaigns


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


def check_complete(df: pd.DataFrame, output: str) -> None:
    """A run that ended without every planned run exactly once is an error, not a result."""
    from perflab.store import results

    problem = results.metadata(df).get("incomplete")
    if problem:
        raise click.ClickException(
            f"{output}: {problem}; complete it with the same command plus --resume {output}"
        )


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

    from perflab.running import program_output as streams

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
    from perflab.running import campaigns
    from perflab.system import provenance

    output, resuming = record
    bars = Bars()
    meta = {**provenance.metadata(), **(extra_meta or {}), "experiment": f"{experiment} campaign"}
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
