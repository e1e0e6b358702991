"""Each commit built once per build command, in perflab's private cache: its tree exported,
the command run there without a shell (under a supervisor, bounded by --build-timeout, its
compiles given -ffunction-sections by perflab's compiler wrappers so that a link can move each
function), its output kept in a log beside the tree. A second bisect over the same commits
reuses the builds; a build that failed stays failed (a skip, as git bisect's exit 125) until its
log is removed; a build the timeout killed is not kept as failed: the next run with a longer
one builds again."""

from __future__ import annotations

import contextlib
import hashlib
import os
import shlex
import shutil
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from perflab.core import files, terminal
from perflab.errors import PerflabError, TimedOut
from perflab.lab.bisect import commits
from perflab.plan.controls import Controls
from perflab.store import filelock
from perflab.system import compiler, sections, supervisor

RUN_TIMEOUT_S = Controls.timeout  # the runs' --timeout unless given
WAIT_S = 3600.0  # another perflab's build of the same commit: waited for this long at most
BUILDING = "run this once that build has ended"  # what to do after that wait


@dataclass(frozen=True)
class Build:
    """A commit built: the tree it was built in, whether the command succeeded, its log."""

    sha: str
    tree: Path
    ok: bool
    log: Path
    reused: bool
    timed_out: bool = False  # killed past --build-timeout: not kept as failed

    def argv(self, run: Sequence[str]) -> tuple[str, ...]:
        """The run command in this tree: a program named with a slash is the tree's, and
        {tree} in the program or an argument is the tree's path."""
        program = run[0].replace("{tree}", str(self.tree))
        if "/" in program and not program.startswith("/"):
            program = str(self.tree / program)
        return (program, *(a.replace("{tree}", str(self.tree)) for a in run[1:]))

    def owns(self, program: str) -> bool:
        """Whether the program lies inside this commit's tree (what a relink may replace)."""
        tree = os.path.realpath(self.tree)
        return os.path.commonpath([tree, os.path.realpath(program)]) == tree


def root() -> Path:
    """Where builds live: a private directory of perflab's cache."""
    return files.private_dir(compiler.cache_dir() / "bisect", parents=True)


def key(sha: str, build: Sequence[str]) -> str:
    """A build's name: the commit, the command that built it, the flags perflab's wrappers
    gave its compiles."""
    words = [sha, *build, "\1", *sections.COMPILE_FLAGS]
    return hashlib.sha256("\0".join(words).encode()).hexdigest()[:24]


def build(repo: Path, sha: str, command: Sequence[str]) -> Build:
    """The commit built by command (reused when built before); never raises for a build that
    fails, which is a skip: its log says why. Another perflab building the same commit with
    the same command (two tracks, a track and a history) is waited for, then reused."""
    place = files.private_dir(root() / key(sha, command))
    with filelock.held(place / "build", WAIT_S, BUILDING):
        return _build(repo, sha, command, place)


def _build(repo: Path, sha: str, command: Sequence[str], place: Path) -> Build:
    tree, log, status = place / "tree", place / "build.log", place / "status"
    if status.exists():
        ok = files.read_private(status).decode() == "ok"
        return Build(sha, tree, ok, log, reused=True)
    if tree.exists():  # a build cut short: start afresh
        shutil.rmtree(tree)
    try:
        commits.export(repo, sha, tree)
    except PerflabError as exc:  # a tree perflab will not extract: the commit is skipped
        files.write_bytes(log, f"{exc}\n".encode(errors="replace"))
        files.write_bytes(status, b"failed")
        return Build(sha, tree, False, log, reused=False)
    try:
        env = compiler.wrapped_env(sections.COMPILE_FLAGS)
        done = supervisor.run_bounded(["env", "-C", str(tree), "--", *command], env)
        ok = done.returncode == 0
        text = f"$ {' '.join(command)}\n{done.stdout}{done.stderr}exit status {done.returncode}\n"
    except PerflabError as exc:  # past --build-timeout: killed, said in the log, not kept
        files.write_bytes(log, f"$ {' '.join(command)}\n{exc}\n".encode(errors="replace"))
        return Build(sha, tree, False, log, reused=False, timed_out=True)
    except OSError as exc:
        raise PerflabError(f"--build {command[0]}: {exc.strerror}") from None
    files.write_bytes(log, text.encode(errors="replace"))
    files.write_bytes(status, b"ok" if ok else b"failed")
    return Build(sha, tree, ok, log, reused=False)


# What bisect, track and history draw per layout: the environment's layouts always; the code's
# (a padding object linked first, the objects' order, the functions' order within them) where
# perflab can relink the commit.
RANDOMIZE = ("env-size", "heap-offset", "aslr")
PLACED = ("code-offset", "link-order", "function-order")
SHARED = 2  # setups per code placement, their environments drawn apart


@dataclass(frozen=True)
class Placed:
    """Two commits as compare's sides, what each layout draws, and how their code is placed."""

    a: Any
    b: Any
    randomize: tuple[str, ...]
    placement: str  # one line: what was drawn, or why the code placement stays fixed
    relink_s: float  # the relinks that found each side's objects, seconds each (0: none)

    @property
    def fixed(self) -> bool:
        """Whether the code's placement was left as the build made it."""
        return PLACED[0] not in self.randomize

    def per_placement(self, setups: int) -> int:
        """Setups that share one code placement (compare's --per-placement): SHARED where the
        code is placed and the setups make two placements or more, so that each verdict tells
        the code placement's variance from the environment's; else each setup its own."""
        return SHARED if not self.fixed and setups >= 2 * SHARED else 1


@contextlib.contextmanager
def relinking(*made: Build) -> Iterator[None]:
    """Hold these commits' trees while their programs are relinked and run: another perflab's
    relink of the same tree (two tracks beside one reference) waits, as a build does."""
    with contextlib.ExitStack() as stack:
        for place in sorted({m.tree.parent for m in made}):
            stack.enter_context(filelock.held(place / "relink", WAIT_S, BUILDING))
        yield


def placed(older: Build, newer: Build, command: Sequence[str], run: Sequence[str]) -> Placed:
    """A (older) and B (newer) relinked per layout with their code placed at random, through
    the build command's own link step (run again in each tree with perflab's compiler wrappers
    first on PATH, the program removed: a make relinks, it does not rebuild); where either
    cannot be relinked so, both run as built, said in one line. Why a commit cannot be is
    kept beside its build, so that it is tried once, not at every comparison."""
    from perflab.lab import compare

    argv = [older.argv(run), newer.argv(run)]
    for m, x in zip((older, newer), argv, strict=True):
        if m.owns(x[0]):  # a relink killed before it put the program back (kill -9)
            compiler.restore_kept(Path(x[0]))
    plain = (replace(compare.program_side("A", list(argv[0])), cwd=str(older.tree)),
             replace(compare.program_side("B", list(argv[1])), cwd=str(newer.tree)))  # fmt: skip
    for m, x in zip((older, newer), argv, strict=True):
        if not m.owns(x[0]):
            why = f"{run[0]} is not a program of the commit's tree: perflab relinks only those"
            return Placed(*plain, RANDOMIZE, f"code placement fixed: {why}", 0.0)
        with contextlib.suppress(OSError, PerflabError):
            why = files.read_private(_note(m, x[0], command)).decode()
            return Placed(*plain, RANDOMIZE, f"code placement fixed: {why}", 0.0)
    started = time.monotonic()
    sides = []
    for (name, x), m in zip((("A", argv[0]), ("B", argv[1])), (older, newer), strict=True):
        try:
            side = compare.build_command_side(name, _in(m, command), x[0], x[1:])
            sides.append(replace(side, cwd=str(m.tree)))
        except TimedOut as exc:  # no verdict on the build: tried again next time
            return Placed(*plain, RANDOMIZE, f"code placement fixed: {_said(exc, m, command)}",
                          0.0)  # fmt: skip
        except PerflabError as exc:
            why = _said(exc, m, command)
            files.write_bytes(_note(m, x[0], command), why.encode())
            return Placed(*plain, RANDOMIZE, f"code placement fixed: {why}", 0.0)
    each = (time.monotonic() - started) / 2
    a, b = sides
    how = f"relinked by {shlex.join(command)} in each commit's tree"  # its cost: relink_s
    drawn, said, kept = compare.code_placement(a, b)
    text = "; ".join([f"code placed at random per layout: {said} ({how})", *kept])
    return Placed(a, b, (*RANDOMIZE, *drawn), text, each)


def _note(made: Build, program: str, command: Sequence[str]) -> Path:
    """Where why this commit's program cannot be relinked by this command is kept, beside its
    build: a note per program of the tree and command (another --run's has its own)."""
    name = os.path.relpath(os.path.realpath(program), os.path.realpath(made.tree))
    digest = hashlib.sha256("\0".join([name, *command]).encode()).hexdigest()[:12]
    return made.tree.parent / f"relink-{digest}"


def _said(exc: PerflabError, made: Build, command: Sequence[str]) -> str:
    """A relink's failure in the words of the user's command, not perflab's `env -C` of it."""
    return str(exc).replace(shlex.join(_in(made, command)), shlex.join(command))


def _in(made: Build, command: Sequence[str]) -> list[str]:
    """The build command run in a commit's tree, without a shell."""
    return ["env", "-C", str(made.tree), "--", *command]


def failed(df: Any, older: Build, newer: Build, run: Sequence[str],
           timeout: float = RUN_TIMEOUT_S) -> tuple[str, str] | None:  # fmt: skip
    """A side of a comparison none of whose runs ended well: its commit, and one line with the
    exit status or signal and the program's first line on stderr (run once more in its tree
    to read it, bounded by the runs' timeout, escaped; not for runs that timed out); None
    when both sides have runs that ended well."""
    for side, made in (("A", older), ("B", newer)):
        mine = df[df["side"] == side]
        if not len(mine) or (mine["status"] == "ok").any():
            continue
        row = mine.iloc[0]
        how = (
            "killed past --timeout" if row["status"] == "timeout"
            else f"killed by signal {int(row['signal'])}" if int(row["signal"] or 0)
            else f"exit status {int(row['exit_code'])}" if row["status"] == "exit"
            else str(row["status"]).replace("_", " ")
        )  # fmt: skip
        argv = made.argv(run)
        said = ""
        with contextlib.suppress(OSError, PerflabError):
            if row["status"] != "timeout":
                with supervisor.build_timeout(timeout):
                    done = supervisor.run_bounded(["env", "-C", str(made.tree), "--", *argv])
                said = next((x.strip() for x in done.stderr.splitlines() if x.strip()), "")
        return made.sha, (
            f"{made.sha[:10]}: every run of {shlex.join(run)} in its tree failed ({how})"
            + (f": {terminal.escape(said[:200])}" if said else "")
        )
    return None
