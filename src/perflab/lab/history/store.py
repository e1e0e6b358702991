"""The history store: per machine, one result per commit (every run `perflab track` made of it,
over random layouts) and one index of them, each replaced whole under the store's lock. Two
tracks at once wait for each other's write and keep both; a killed one leaves the files as
they were before its write.

    STORE/index.json                 every (machine, commit) entry: its commit, parents, date,
                                     subject, how it was built, run and seeded, the reference
                                     commit it ran beside, its runs
    STORE/MACHINE/SHA.parquet        the commit's runs on that machine, in pairs with the
                                     reference's (compare's columns, side B the commit, and
                                     `track`: which track made them), `perflab report` reads it
    STORE/MACHINE/confirm-A-B-*.parquet  a change point's comparison, made once, decided again
                                     at each history's level

The store is a private directory (0700) reached through no directory another user can change,
as perflab's cache is: root's track never writes where another user could plant a link.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import hashlib
import json
import os
import re
import secrets
import stat
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, NoReturn

from perflab.core import files
from perflab.core.lazy import pd
from perflab.errors import PerflabError, WrongType
from perflab.store import filelock, journal, results
from perflab.system import machine

INDEX = "index.json"
VERSION = 2
MACHINE_NAME = re.compile(r"[A-Za-z0-9._-]{1,64}")
SHA = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
LOCK_WAIT_S = 600.0  # another track writing the store: its write takes a second, not this
STORE_BUSY = "give this track another --store DIR"  # what to do after that wait
COUNT_MAX = 2**63 - 1  # a seed or count a frame's column holds (numpy's int64)


@dataclass(frozen=True)
class Entry:
    """One commit measured on one machine."""

    machine: str  # machine_key()
    sha: str
    parents: list[str]
    subject: str
    date: str  # author date, ISO 8601
    build: list[str]
    run: list[str]
    seed: int  # of the layouts: every track of the commit draws the same ones
    runs: int  # of the runs, the ok ones
    tracks: int  # how many tracks added runs
    host: dict[str, str] = field(default_factory=dict)  # hostname and CPU, for the reader
    # the commit run beside it, pair by pair (side A; the commit is side B), so that the
    # host's drift between tracks cancels in their ratio; "" where it ran beside itself
    reference: str = ""

    def check(self) -> Entry:
        """The entry as perflab writes it, else ValueError: its machine and sha name files."""
        if not MACHINE_NAME.fullmatch(self.machine) or self.machine in (".", ".."):
            raise ValueError(f"machine {self.machine!r}")
        if not all(SHA.fullmatch(x) for x in [self.sha, *self.parents]) or not (
            self.reference == "" or SHA.fullmatch(self.reference)
        ):
            raise ValueError(f"commit {self.sha!r} or its parents")
        texts = [self.subject, self.date, *self.host.values()]
        if (
            not all(isinstance(x, str) for x in texts)
            or not _words(self.build)
            or not _words(self.run)
        ):  # a text where a list is would be run as its letters; a mapping as its keys
            raise ValueError(f"commit {self.sha[:10]}: its texts")
        if not all(type(n) is int and 0 <= n <= COUNT_MAX
                   for n in (self.seed, self.runs, self.tracks)):  # fmt: skip
            raise ValueError(f"commit {self.sha[:10]}: its counts")
        return self

    @property
    def file(self) -> str:
        return f"{self.machine}/{self.sha}.parquet"


def _words(command: Any) -> bool:
    """Whether a recorded command is what track writes: a list of texts, not empty."""
    return isinstance(command, list) and bool(command) and all(isinstance(w, str) for w in command)


def refuse_other(kept: Entry, new: Entry) -> None:
    """One line when a new track of a kept commit would build, run, seed or pair it otherwise:
    its runs would not be the same layouts' runs."""
    for name in ("build", "run", "seed", "reference"):
        if getattr(kept, name) != getattr(new, name):
            raise PerflabError(f"{new.sha[:10]} was tracked here with --{name} "
                               f"{getattr(kept, name)!r}, not {getattr(new, name)!r}: give "
                               "those, or another --store")  # fmt: skip


def machine_key() -> str:
    """This machine as a directory name: its host name and a digest of its CPU down to the
    microcode (a guest moved to another host CPU is another machine)."""
    ident = {k: v for k, v in machine.identity().items() if k != "core_digest"}
    digest = hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:10]
    host = re.sub(r"[^A-Za-z0-9.-]", "_", ident.get("hostname", "host"))[:40] or "host"
    return f"{host}-{digest}"


def _save(runs: pd.DataFrame, path: Path, mine: pd.DataFrame, whose: str = "this track's",
          then: str = "track the commit again") -> None:  # fmt: skip
    """A store's file written whole; where the disk refuses it, the runs just made (`mine`)
    are kept in perflab's private unsaved directory and one line names both (the index is left
    as it was)."""
    try:
        results.save(runs, path)
    except (OSError, PerflabError) as exc:
        _aside(path, mine, exc, whose, then)


def _aside(path: Path, mine: pd.DataFrame, exc: BaseException, whose: str = "this track's",
           then: str = "track the commit again", fix: str = "",
           how: str = "cannot write") -> NoReturn:  # fmt: skip
    """The runs just made kept in perflab's unsaved directory when the store refused them
    (`exc`), and one line naming both and what to do (`fix`, else free space or make the
    store writable)."""
    first = journal.why(exc, path)
    full = first in (os.strerror(errno.ENOSPC), os.strerror(errno.EDQUOT))
    fix = fix or ("free space" if full else "make the store writable")
    try:
        spare = journal.spare_path(path, secrets.token_hex(4))
        results.save(mine, spare)
    except (OSError, PerflabError) as again:
        raise PerflabError(f"{path}: {how} ({first}), nor perflab's unsaved "
                           f"directory ({journal.why(again)}): {whose} runs are lost; {fix}, "
                           f"then {then}") from None  # fmt: skip
    raise PerflabError(f"{path}: {how} ({first}); {whose} {len(mine)} runs are kept "
                       f"in {spare} and the store is as it was: {fix}, then "
                       f"{then}") from None  # fmt: skip


DEFAULTED = {f.name for f in dataclasses.fields(Entry)
             if f.default is not dataclasses.MISSING
             or f.default_factory is not dataclasses.MISSING}  # fmt: skip


def _entry(i: int, fields: Any) -> Entry:
    """Entry i of an index, checked: an object of Entry's fields and nothing else."""
    names = {f.name for f in dataclasses.fields(Entry)}
    if not isinstance(fields, dict):
        raise ValueError(f"entry {i} is not an object of names and values")
    other = sorted(set(fields) - names)
    if other:
        raise ValueError(f"entry {i} holds {', '.join(map(str, other))}, which no entry has")
    missing = sorted(names - set(fields) - DEFAULTED)
    if missing:
        raise ValueError(f"entry {i} lacks {', '.join(missing)}")
    try:
        return Entry(**fields).check()
    except (TypeError, AttributeError):  # a list where a text is, a number for a mapping
        raise ValueError(f"entry {i} holds a field of the wrong kind") from None


class Store:
    """A history store at `root` (made when `create`)."""

    def __init__(self, root: str | os.PathLike[str], create: bool = False,
                 parents: bool = False) -> None:  # fmt: skip
        """The store at root; made when `create`, in a directory that exists, or (`parents`)
        with its missing parents, as the default store is."""
        if not isinstance(root, (str, os.PathLike)):
            raise WrongType(f"store: {root!r} is not a path")
        where = Path(root)
        with contextlib.suppress(FileNotFoundError, NotADirectoryError):
            mode = os.lstat(where / INDEX).st_mode
            if not stat.S_ISREG(mode):
                raise PerflabError(f"{where / INDEX}: is {files.kind(mode)}, not a perflab "
                                   "history index: move it away")  # fmt: skip
        if not (where / INDEX).is_file():
            if not create:
                raise PerflabError(f"{where}: no history store here (no {INDEX}); `perflab "
                                   "track` makes one")  # fmt: skip
            if where.is_dir() and any(where.iterdir()):
                raise PerflabError(f"{where}: a directory that holds other files and no {INDEX}"
                                   ": give --store a new or empty one")  # fmt: skip
            if not parents and not where.is_dir():
                raise PerflabError(f"{where}: no such directory (make it first: only the "
                                   "default store, .perflab/history, is made)")  # fmt: skip
        self.root = files.private_dir(where, parents=parents)

    def entries(self) -> list[Entry]:
        """Every entry of the index, as written last."""
        path = self.root / INDEX
        if not path.exists():
            return []
        try:
            doc = json.loads(files.read_private(path))
            if not isinstance(doc, dict):
                raise ValueError("not a JSON object")
            if doc.get("version") != VERSION:
                raise ValueError(f"version {doc.get('version')!r}, not {VERSION}")
            listed = doc.get("entries")
            if not isinstance(listed, list):
                raise ValueError("its entries are not a list")
            found = [_entry(i, e) for i, e in enumerate(listed)]
        except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:
            why = "nested too deep" if isinstance(exc, RecursionError) else exc
            raise PerflabError(f"{path}: not a perflab history index ({why})") from None
        keys = [(e.machine, e.sha) for e in found]
        if len(set(keys)) != len(keys):
            twice = next(k for k in keys if keys.count(k) > 1)
            raise PerflabError(f"{path}: commit {twice[1][:10]} of {twice[0]} is listed twice: "
                               "the index was edited; remove the extra entry")  # fmt: skip
        return found

    def kept(self, entry: Entry) -> pd.DataFrame:
        """The runs a track adds to, refused in one line where the file is gone or not what
        track wrote (track asks before it builds, and again under the lock)."""
        path = self.root / entry.file
        if not os.path.lexists(path):
            raise PerflabError(f"{path}: missing, though the index lists {entry.sha[:10]}'s "
                               f"{entry.tracks} tracks there: the store was edited; remove "
                               "the commit's entry from index.json, or put the file back, "
                               "then track it again")  # fmt: skip
        return self._vouched(path, entry)

    def runs(self, entry: Entry) -> pd.DataFrame:
        """The commit's runs on its machine, with their metadata, checked against its entry."""
        return self._vouched(self.root / entry.file, entry)

    def _vouched(self, path: Path, entry: Entry) -> pd.DataFrame:
        """A commit's file, refused in one line unless it is what track wrote for this entry:
        a compare of that commit (side B) beside its reference, on the entry's machine."""
        df = results.load(path)
        meta = results.metadata(df)
        wrong = (
            "names no commit" if not meta.get("commit")
            else f"holds commit {str(meta.get('commit'))[:10]}" if meta.get("commit") != entry.sha
            else f"holds a {meta.get('experiment')!r} result" if meta.get("experiment") != "compare"
            else "has no side column" if "side" not in df
            else ""
        )  # fmt: skip
        if path.parent.name != entry.machine:
            wrong = f"lies under {path.parent.name}, not {entry.machine}"
        if wrong:
            raise PerflabError(f"{path}: {wrong}, not the runs of {entry.sha[:10]} its index "
                               "names: the store was edited; remove that file and its entry, "
                               "or track the commit into another --store")  # fmt: skip
        return df

    def add(self, entry: Entry, runs: pd.DataFrame) -> Entry:
        """Add a track's runs of one commit: its file and the index rewritten whole, under the
        store's lock. A track of a commit kept before must build, run and seed it as that one
        did (its layouts are then the same ones, numbered alike: `track` tells the tracks
        apart); else one line, and nothing is written. A store whose lock cannot be taken
        (made read-only since the track began) keeps the runs aside, as a full disk does."""
        with contextlib.ExitStack() as held:
            try:
                held.enter_context(filelock.held(self.root / INDEX, LOCK_WAIT_S, STORE_BUSY))
            except OSError as exc:
                _aside(self.root / entry.machine / f"{entry.sha}.parquet", runs, exc)
            entries = self.entries()
            same = [e for e in entries if (e.machine, e.sha) == (entry.machine, entry.sha)]
            place = files.private_dir(self.root / entry.machine)
            path = place / f"{entry.sha}.parquet"
            try:  # another track added the commit otherwise while this one measured
                for e in same:
                    refuse_other(e, entry)
            except PerflabError as exc:
                _aside(path, runs, exc, how="not added", fix="give them another --store",
                       then="track it there")  # fmt: skip
            try:
                kept = self.kept(same[0]) if same else None
            except (OSError, PerflabError) as exc:  # gone bad while this track measured
                _aside(path, runs, exc, fix="put the file back")
            tracks = same[0].tracks + 1 if same else 1
            meta = results.metadata(kept if kept is not None else runs)
            runs = runs.assign(track=tracks - 1)
            meta = meta | {"tracks": tracks, "commit": entry.sha}
            mine = runs[runs["track"] == tracks - 1]
            if kept is not None:
                runs = pd.concat([kept, runs], ignore_index=True)
            _save(results.attach(runs, meta), path, results.attach(mine, meta))
            ok = int((runs["status"] == "ok").sum())
            done = Entry(**(asdict(entry) | {"runs": ok, "tracks": tracks}))
            others = [e for e in entries if (e.machine, e.sha) != (done.machine, done.sha)]
            self._write([*others, done])
        return done

    def check_writable(self) -> None:
        """One line before anything is built when this user cannot write the store (its lock,
        beside the index, cannot be made): measured runs would have nowhere to go."""
        with filelock.held(self.root / INDEX, LOCK_WAIT_S, STORE_BUSY):
            pass

    def confirmed(self, key: dict[str, Any]) -> pd.DataFrame | None:
        """The runs of a change point's comparison made before with this key (its commits,
        commands and design), or None (none, or a file that is not one)."""
        path = self._confirm_path(key)
        if not path.exists():
            return None
        try:
            df = results.load(path)
        except PerflabError:
            return None
        return df if results.metadata(df).get("key") == key else None

    def confirm(self, key: dict[str, Any], runs: pd.DataFrame) -> None:
        """Keep a change point's comparison, so that the next history does not run it again."""
        with filelock.held(self.root / INDEX, LOCK_WAIT_S, STORE_BUSY):
            files.private_dir(self.root / key["machine"])
            meta = results.metadata(runs) | {"key": key}
            done = results.attach(runs, meta)
            _save(done, self._confirm_path(key), done, "the confirming comparison's",
                  "run history again")  # fmt: skip

    def _confirm_path(self, key: dict[str, Any]) -> Path:
        digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:10]
        name = f"confirm-{key['a'][:10]}-{key['b'][:10]}-{digest}.parquet"
        return self.root / key["machine"] / name

    def _write(self, entries: list[Entry]) -> None:
        doc = {"version": VERSION, "entries": [asdict(e) for e in entries]}
        files.write_bytes(self.root / INDEX, json.dumps(doc, indent=1).encode())
