"""The history store: per machine, one result per commit (every run `perflab track` made of it,
over random layouts) and one index of them, each replaced whole under the store's lock. Two
tracks at once wait for each other's write and keep both; a killed one leaves the files as
they were before its write.

    STORE/index.json                 every (machine, commit) entry: its commit, parents, date,
                                     subject, how it was built and run, its runs and file
    STORE/MACHINE/SHA.parquet        the commit's runs on that machine (compare's columns)
    STORE/MACHINE/confirm-A-B.json   a change point's comparison, made once

The store is a private directory (0700) reached through no directory another user can change,
as perflab's cache is: root's track never writes where another user could plant a link.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from perflab.core import files
from perflab.core.lazy import pd
from perflab.engine import filelock, results
from perflab.errors import PerflabError
from perflab.system import machine

INDEX = "index.json"
VERSION = 1
LOCK_WAIT_S = 600.0  # another track writing the store: its write takes a second, not this


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
    runs: int  # of the runs, the ok ones
    tracks: int  # how many tracks added runs
    host: dict[str, str] = field(default_factory=dict)  # hostname and CPU, for the reader

    @property
    def file(self) -> str:
        return f"{self.machine}/{self.sha}.parquet"


def machine_key() -> str:
    """This machine as a directory name: its host name and a digest of its CPU down to the
    microcode (a guest moved to another host CPU is another machine)."""
    ident = {k: v for k, v in machine.identity().items() if k != "core_digest"}
    digest = hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:10]
    host = re.sub(r"[^A-Za-z0-9.-]", "_", ident.get("hostname", "host"))[:40] or "host"
    return f"{host}-{digest}"


class Store:
    """A history store at `root` (made when `create`)."""

    def __init__(self, root: str | os.PathLike[str], create: bool = False) -> None:
        where = Path(root)
        if not create and not (where / INDEX).is_file():
            raise PerflabError(f"{where}: no history store here (no {INDEX}); `perflab track` "
                               "makes one")  # fmt: skip
        self.root = files.private_dir(where, parents=create)

    def entries(self) -> list[Entry]:
        """Every entry of the index, as written last."""
        path = self.root / INDEX
        if not path.exists():
            return []
        try:
            doc = json.loads(files.read_private(path))
            if doc.get("version") != VERSION:
                raise ValueError(f"version {doc.get('version')!r}, not {VERSION}")
            return [Entry(**e) for e in doc["entries"]]
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise PerflabError(f"{path}: not a perflab history index ({exc})") from None

    def runs(self, entry: Entry) -> pd.DataFrame:
        """The commit's runs on its machine, with their metadata."""
        return results.load(self.root / entry.file)

    def add(self, entry: Entry, runs: pd.DataFrame) -> Entry:
        """Add a track's runs of one commit: its file and the index rewritten whole, under the
        store's lock; setups numbered after those kept, so that no two tracks share one."""
        with filelock.held(self.root / INDEX, wait_s=LOCK_WAIT_S):
            place = files.private_dir(self.root / entry.machine)
            path = place / f"{entry.sha}.parquet"
            kept = results.load(path) if path.exists() else None
            tracks = 1
            if kept is not None:
                runs = runs.assign(setup=runs["setup"] + int(kept["setup"].max()) + 1)
                tracks = int(results.metadata(kept).get("tracks", 1)) + 1
                runs = pd.concat([kept, runs], ignore_index=True)
            meta = results.metadata(runs) | {"tracks": tracks, "commit": entry.sha}
            results.save(results.attach(runs, meta), path)
            ok = int((runs["status"] == "ok").sum())
            done = Entry(**(asdict(entry) | {"runs": ok, "tracks": tracks}))
            others = [e for e in self.entries() if (e.machine, e.sha) != (done.machine, done.sha)]
            self._write([*others, done])
        return done

    def confirmed(self, key: dict[str, Any]) -> dict[str, Any] | None:
        """A change point's comparison made before with this key (its commits, commands and
        design), or None."""
        path = self._confirm_path(key)
        if not path.exists():
            return None
        doc = json.loads(files.read_private(path))
        return doc if doc.get("key") == key else None

    def confirm(self, key: dict[str, Any], found: dict[str, Any]) -> None:
        """Keep a change point's comparison, so that the next history does not run it again."""
        with filelock.held(self.root / INDEX, wait_s=LOCK_WAIT_S):
            files.private_dir(self.root / key["machine"])
            doc = {"key": key, **found}
            files.write_bytes(self._confirm_path(key), json.dumps(doc, indent=1).encode())

    def _confirm_path(self, key: dict[str, Any]) -> Path:
        digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:10]
        name = f"confirm-{key['a'][:10]}-{key['b'][:10]}-{digest}.json"
        return self.root / key["machine"] / name

    def _write(self, entries: list[Entry]) -> None:
        doc = {"version": VERSION, "entries": [asdict(e) for e in entries]}
        files.write_bytes(self.root / INDEX, json.dumps(doc, indent=1).encode())
