"""Tidy results with their metadata: save/load without loss, and journals that survive a kill."""

import json
import os
import shutil
import tempfile
import uuid
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from perflab.errors import PerflabError

META_KEY = "perflab"
FORMATS = (".parquet", ".csv")


def attach(df: pd.DataFrame, meta: Mapping[str, Any]) -> pd.DataFrame:
    """Attach metadata to a frame (it travels in attrs, then in the file)."""
    df.attrs[META_KEY] = json.loads(json.dumps(dict(meta), default=str))
    return df


def metadata(df: pd.DataFrame) -> dict[str, Any]:
    """The metadata a frame carries (empty when it has none)."""
    return dict(df.attrs.get(META_KEY, {}))


def check_output(path: str | os.PathLike, formats: tuple[str, ...] = FORMATS) -> Path:
    """Refuse, before anything is measured, a path that cannot be written or has no known format."""
    p = Path(path)
    if p.suffix not in formats:
        raise PerflabError(
            f"{p}: unknown output format {p.suffix!r}; use one of {', '.join(formats)}"
        )
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise PerflabError(f"{p}: directory {parent} does not exist")
    if p.is_dir():
        raise PerflabError(f"{p}: is a directory")
    if p.exists() and not os.access(p, os.W_OK):
        raise PerflabError(f"{p}: not writable")
    _probe_write(parent, p)
    return p


def _probe_write(parent: Path, p: Path) -> None:
    """Create and delete a file beside the output: os.access says yes to root even on /proc."""
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", dir=parent)
    except OSError as exc:
        raise PerflabError(f"{p}: not writable ({exc.strerror})") from None
    os.close(fd)
    os.unlink(tmp)


def _atomic(path: Path, write) -> None:
    """Write through a temporary file in the same directory, then rename: never a torn file."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent or ".")
    os.close(fd)
    try:
        write(Path(tmp))
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp's 0600 would outlive the rename
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _sidecar(path: Path) -> Path:
    return path.with_name(path.name + ".json")


def save(df: pd.DataFrame, path: str | os.PathLike) -> Path:
    """Save a frame and its metadata: Parquet schema metadata, or CSV plus a JSON sidecar."""
    p = check_output(path)
    meta = metadata(df)
    if p.suffix == ".parquet":
        table = pa.Table.from_pandas(df, preserve_index=False)
        schema_meta = dict(table.schema.metadata or {})
        schema_meta[META_KEY.encode()] = json.dumps(meta).encode()
        table = table.replace_schema_metadata(schema_meta)
        _atomic(p, lambda t: pq.write_table(table, t))
    else:
        dtypes = {c: str(t) for c, t in df.dtypes.items()}
        side = json.dumps({"metadata": meta, "dtypes": dtypes}, indent=1)
        _atomic(p, lambda t: df.to_csv(t, index=False))
        _atomic(_sidecar(p), lambda t: t.write_text(side))
    return p


def load(path: str | os.PathLike) -> pd.DataFrame:
    """Load a frame saved by save(), metadata back in attrs."""
    p = Path(path)
    if not p.exists():
        raise PerflabError(f"{p}: no such file")
    if p.suffix == ".parquet":
        table = pq.read_table(p)
        raw = (table.schema.metadata or {}).get(META_KEY.encode(), b"{}")
        df = table.to_pandas()
        return attach(df, json.loads(raw))
    if p.suffix == ".csv":
        side = json.loads(_sidecar(p).read_text()) if _sidecar(p).exists() else {}
        dtypes = side.get("dtypes", {})
        df = pd.read_csv(p, keep_default_na=False, na_values=[""])
        for col, dtype in dtypes.items():
            if col in df:
                df[col] = df[col].astype(dtype)
        return attach(df, side.get("metadata", {}))
    raise PerflabError(f"{p}: unknown format {p.suffix!r}; use one of {', '.join(FORMATS)}")


class Journal:
    """Rows flushed to disk in chunks as they are measured; finish() merges them into one file.

    An interrupted run leaves `PATH.parts/` (after a kill) or PATH marked incomplete (after
    Ctrl-C); a Journal opened with resume=True on the same PATH and parameters knows which
    keys are done, so the caller measures only the rest and nothing is measured twice.
    """

    def __init__(
        self,
        path: str | os.PathLike,
        params: Mapping[str, Any],
        meta: Mapping[str, Any],
        key: Iterable[str],
        resume: bool = False,
        chunk_rows: int = 2000,
    ):
        self.path = check_output(path)
        self.parts = self.path.with_name(self.path.name + ".parts")
        self.params = json.loads(json.dumps(dict(params), default=str))
        self.meta = dict(meta)
        self.key = list(key)
        self.chunk_rows = chunk_rows
        self._rows: list[dict[str, Any]] = []
        self.journal_id = uuid.uuid4().hex
        self._previous = self._open(resume)
        self._nchunks = len(list(self.parts.glob("chunk-*.parquet")))
        self._first_new = self._nchunks

    def _open(self, resume: bool) -> pd.DataFrame | None:
        """Check a resume against the stored parameters; start a fresh journal otherwise."""
        if not resume:
            if self.parts.exists():
                raise PerflabError(
                    f"{self.path}: an interrupted run left {self.parts}; "
                    f"add --resume {self.path} to complete it, or delete {self.parts}"
                )
            self.parts.mkdir()
            self._write_params()
            return None
        frames, stored, merged = [], None, 0
        if self.path.exists():
            done = load(self.path)
            stored = metadata(done).get("params")
            frames.append(done)
        if (self.parts / "params.json").exists():
            journal = json.loads((self.parts / "params.json").read_text())
            stored, self.journal_id = journal["params"], journal.get("journal", self.journal_id)
            if frames and metadata(frames[0]).get("journal") == self.journal_id:
                # Killed between finish()'s save and its cleanup: those chunks are in PATH.
                merged = metadata(frames[0]).get("merged_chunks", 0)
            chunks = sorted(self.parts.glob("chunk-*.parquet"))[merged:]
            frames.extend(pd.read_parquet(c) for c in chunks)
        if stored is None:
            raise PerflabError(f"{self.path}: nothing to resume (no results or journal there)")
        if stored != self.params:
            diff = sorted(
                k for k in set(stored) | set(self.params) if stored.get(k) != self.params.get(k)
            )
            raise PerflabError(
                f"{self.path}: refusing to resume with different parameters ({', '.join(diff)})"
            )
        self.parts.mkdir(exist_ok=True)
        self._write_params()
        return pd.concat(frames, ignore_index=True) if frames else None

    def _write_params(self) -> None:
        body = json.dumps(
            {"params": self.params, "meta": self.meta, "journal": self.journal_id}, default=str
        )
        _atomic(self.parts / "params.json", lambda t: t.write_text(body))

    def done_keys(self) -> set[tuple]:
        """Keys of the rows already measured by an earlier, interrupted run."""
        if self._previous is None or self._previous.empty:
            return set()
        return set(self._previous[self.key].itertuples(index=False, name=None))

    def append(self, row: Mapping[str, Any]) -> None:
        """Record one measured row; it reaches the disk within chunk_rows rows."""
        self._rows.append(dict(row))
        if len(self._rows) >= self.chunk_rows:
            self.flush()

    def extend(self, rows: Iterable[Mapping[str, Any]]) -> None:
        """Record many rows."""
        for row in rows:
            self.append(row)

    def extend_frame(self, frame: pd.DataFrame) -> None:
        """Record a whole frame as one chunk: no dict per row when runs come by the thousand."""
        self.flush()
        self._write_chunk(frame)

    def flush(self) -> None:
        """Write the buffered rows as one more chunk, atomically."""
        if not self._rows:
            return
        chunk = pd.DataFrame(self._rows)
        self._rows = []
        self._write_chunk(chunk)

    def _write_chunk(self, chunk: pd.DataFrame) -> None:
        target = self.parts / f"chunk-{self._nchunks:06d}.parquet"
        _atomic(target, lambda t: chunk.to_parquet(t, index=False))
        self._nchunks += 1

    def finish(
        self, complete: bool = True, extra_meta: Mapping[str, Any] | None = None
    ) -> pd.DataFrame:
        """Merge earlier results and every chunk into PATH, with metadata, and drop the journal."""
        self.flush()
        frames = [] if self._previous is None else [self._previous]
        new = sorted(self.parts.glob("chunk-*.parquet"))[self._first_new :]
        frames.extend(pd.read_parquet(c) for c in new)
        frames = [f for f in frames if not f.empty]
        df = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=self.key)
        meta = {
            **self.meta,
            **(extra_meta or {}),
            "params": self.params,
            "complete": complete,
            "journal": self.journal_id,
            "merged_chunks": self._nchunks,
        }
        save(attach(df, meta), self.path)
        shutil.rmtree(self.parts, ignore_errors=True)
        return df
