"""The user's git history, read only: commits resolved and listed between two, each one's
subject and date, and its tree exported with `git archive` into perflab's cache. Nothing is
written to the repository: not its work tree, index, HEAD, refs or stash, nor .git/worktrees."""

from __future__ import annotations

import os
import shutil
import tarfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from perflab.errors import PerflabError
from perflab.system import supervisor

GIT_TIMEOUT_S = 300.0  # a git command on a large repository, killed past it


@dataclass(frozen=True)
class Commit:
    """One commit: its full sha, subject and author date (ISO 8601)."""

    sha: str
    subject: str
    date: str

    @property
    def short(self) -> str:
        return self.sha[:10]


def git(repo: str | os.PathLike[str], *args: str, text: bool = True) -> str:
    """`git -C repo ARGS`, no shell, bounded; its stdout, or one line with git's last words."""
    if shutil.which("git") is None:
        raise PerflabError("git is not installed (apt install git)")
    with supervisor.build_timeout(GIT_TIMEOUT_S):
        done = supervisor.run_bounded(["git", "-C", str(repo), *args])
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines() or [f"exit status {done.returncode}"]
        fatal = [x for x in lines if x.startswith(("fatal:", "error:"))]  # not its hints
        last = (fatal or lines)[-1].replace("\t", " ")
        said = "".join(c if c.isprintable() else "?" for c in last)[:200]
        raise PerflabError(f"git {' '.join(args[:2])}: {said}")
    return done.stdout


def toplevel(path: str | os.PathLike[str] | None) -> Path:
    """The repository around path (default: the current directory)."""
    where = Path(path or ".")
    if not where.is_dir():
        raise PerflabError(f"--repo {where}: not a directory")
    try:
        return Path(git(where, "rev-parse", "--show-toplevel").strip())
    except PerflabError as exc:
        said = str(exc).partition(": ")[2]
        if "dubious ownership" in said:  # git's own guard; its hint is a global setting
            top = where.resolve()
            raise PerflabError(f"--repo {top}: another user's repository, which git refuses to "
                               "read for this one (git config --global --add safe.directory "
                               f"{top} trusts it)") from None  # fmt: skip
        raise PerflabError(f"--repo {where.resolve()}: not a git repository ({said})") from None


def resolve(repo: Path, rev: str) -> str:
    """A revision as its commit's full sha; one line when it names none."""
    if not rev or rev.startswith("-") or any(not c.isprintable() for c in rev):
        raise PerflabError(f"{rev!r} is not a revision")
    try:
        return git(repo, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}").strip()
    except PerflabError:
        raise PerflabError(f"{rev!r} names no commit in {repo}") from None


def between(repo: Path, good: str, bad: str) -> list[Commit]:
    """GOOD, then every commit on an ancestry path from GOOD to BAD, oldest first, BAD last;
    one line when GOOD is not an ancestor of BAD."""
    if good == bad:
        raise PerflabError("GOOD and BAD are the same commit: nothing to bisect")
    try:
        git(repo, "merge-base", "--is-ancestor", good, bad)
    except PerflabError:
        raise PerflabError(
            f"{good[:10]} is not an ancestor of {bad[:10]}: give GOOD first"
        ) from None
    shas = git(repo, "rev-list", "--reverse", "--ancestry-path", f"{good}..{bad}").split()
    return [describe(repo, sha) for sha in [good, *shas]]


def listed(repo: Path, revisions: str, most: int) -> list[Commit]:
    """The commits of a range, oldest first: 'A..B' as git reads it (B's history less A's),
    or one revision alone; one line past `most` commits or for a range that holds none."""
    older, dots, newer = revisions.partition("..")
    if not dots:
        return [describe(repo, resolve(repo, revisions))]
    if newer.startswith("."):
        raise PerflabError(f"{revisions!r}: give A..B (A...B is not a range of history)")
    a, b = resolve(repo, older or "HEAD"), resolve(repo, newer or "HEAD")
    shas = git(repo, "rev-list", "--reverse", "--topo-order", f"{a}..{b}").split()
    if not shas:
        raise PerflabError(f"{revisions!r} holds no commit ({newer or 'HEAD'} is in "
                           f"{older or 'HEAD'}'s history)")  # fmt: skip
    if len(shas) > most:
        raise PerflabError(f"{revisions!r} holds {len(shas)} commits, more than {most}: give a "
                           "shorter range")  # fmt: skip
    return [describe(repo, sha) for sha in shas]


def graph_order(repo: Path, shas: Sequence[str]) -> tuple[list[str], list[str]]:
    """The repository's commits from the oldest common ancestor of `shas` to their tips in its
    topological order, oldest first (a merge after the commits it merges), gaps included; and
    the shas the repository does not have."""
    have, lacks = [], []
    for sha in dict.fromkeys(shas):
        try:
            git(repo, "cat-file", "-e", f"{sha}^{{commit}}")
            have.append(sha)
        except PerflabError:
            lacks.append(sha)
    if not have:
        return [], lacks
    try:
        base = git(repo, "merge-base", "--octopus", *have).strip() if len(have) > 1 else have[0]
    except PerflabError:  # unrelated histories: each from its root
        return git(repo, "rev-list", "--topo-order", "--reverse", *have).split(), lacks
    before = parents(repo, base)
    listed = git(repo, "rev-list", "--topo-order", "--reverse", *have,
                 *(["--not", *before] if before else [])).split()  # fmt: skip
    return listed, lacks


def parents(repo: Path, sha: str) -> list[str]:
    """The commit's parents' full shas (none for a root commit)."""
    return git(repo, "rev-parse", f"{sha}^@").split()


def describe(repo: Path, sha: str) -> Commit:
    """The commit's subject and author date."""
    out = git(repo, "show", "-s", "--no-show-signature", "--format=%H%x00%s%x00%aI", sha)
    out = out.rstrip("\n")
    full, subject, date = out.split("\0")
    return Commit(full, subject, date)


def export(repo: Path, sha: str, into: Path) -> None:
    """The commit's tree, as `git archive` writes it beside `into` (in perflab's private
    cache), extracted into `into` (which must not exist): tarfile's data filter where Python has
    it (3.11.4), else the same rule by hand (_inside): no path or link out of it, no devices,
    no setuid bits."""
    archive = into.with_name(into.name + ".tar")
    git(repo, "archive", "--format=tar", "-o", str(archive), sha)
    try:
        into.mkdir(mode=0o700)
        with tarfile.open(archive, mode="r:") as tar:
            if hasattr(tarfile, "data_filter"):
                try:
                    tar.extractall(into, filter="data")
                except tarfile.FilterError as exc:  # an absolute link, say: git archive keeps it
                    raise PerflabError(f"commit {sha[:10]}: {exc}: perflab extracts nothing "
                                       "that leads out of the tree") from None  # fmt: skip
            else:  # pragma: no cover - Python 3.11.0-3.11.3 (Debian 12's 3.11.2)
                tar.extractall(into, members=_inside(tar.getmembers(), into))
    finally:
        archive.unlink(missing_ok=True)


def _inside(members: list[tarfile.TarInfo], into: Path) -> list[tarfile.TarInfo]:
    """The members that stay inside `into`: files, directories and links whose paths and
    targets resolve within it, their modes without setuid, setgid or others' write; one line
    for any other (git archive writes none)."""
    root = os.path.realpath(into)
    kept = []
    for m in members:
        where = os.path.realpath(os.path.join(root, m.name))
        target = os.path.realpath(os.path.join(os.path.dirname(where), m.linkname))
        inside = where.startswith(root + os.sep) and not os.path.isabs(m.name)
        if m.issym() and not target.startswith(root + os.sep):
            inside = False
        if not inside or not (m.isfile() or m.isdir() or m.issym()):
            raise PerflabError(f"git archive wrote {m.name!r}, which would land outside the tree")
        m.mode &= 0o755
        kept.append(m)
    return kept
