"""Each commit built once per build command, in perflab's private cache: its tree exported,
the command run there without a shell (under a supervisor, bounded by --build-timeout), its
output kept in a log beside the tree. A second bisect over the same commits reuses the builds;
a build that failed stays failed (a skip, as git bisect's exit 125) until its log is removed."""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from perflab.core import files
from perflab.engine import filelock
from perflab.errors import PerflabError
from perflab.lab.bisect import commits
from perflab.system import compiler, supervisor

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

    def argv(self, run: Sequence[str]) -> tuple[str, ...]:
        """The run command in this tree: a program named with a slash is the tree's, and
        {tree} in an argument is the tree's path."""
        program = run[0]
        if "/" in program and not program.startswith("/"):
            program = str(self.tree / program)
        return (program, *(a.replace("{tree}", str(self.tree)) for a in run[1:]))


def root() -> Path:
    """Where builds live: a private directory of perflab's cache."""
    return files.private_dir(compiler.cache_dir() / "bisect", parents=True)


def key(sha: str, build: Sequence[str]) -> str:
    """A build's name: the commit and the command that built it."""
    return hashlib.sha256("\0".join([sha, *build]).encode()).hexdigest()[:24]


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
    commits.export(repo, sha, tree)
    try:
        done = supervisor.run_bounded(["env", "-C", str(tree), "--", *command])
        ok = done.returncode == 0
        text = f"$ {' '.join(command)}\n{done.stdout}{done.stderr}exit status {done.returncode}\n"
    except PerflabError as exc:  # past --build-timeout: killed, said in the log
        ok, text = False, f"$ {' '.join(command)}\n{exc}\n"
    except OSError as exc:
        raise PerflabError(f"--build {command[0]}: {exc.strerror}") from None
    files.write_bytes(log, text.encode(errors="replace"))
    files.write_bytes(status, b"ok" if ok else b"failed")
    return Build(sha, tree, ok, log, reused=False)
