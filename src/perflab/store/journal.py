"""Journals that survive a kill and check themselves: one writer, every chunk validated on resume.

Rows go to disk in chunks as they are measured, under PATH.parts/; finish() merges them into
PATH. Chunk names carry a per-run token, so no two runs can write the same name; a resume
reads every chunk back and refuses (or, asked to, drops) one that is unreadable, has other
columns, repeats a key, holds a key outside the plan or a value out of range (rowchecks.py);
and complete=True is written only once the merged rows hold every planned key exactly once.

Every journal and the result it becomes records an identity (identity.py), so a resume that
would measure something else is refused with what changed.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import stat
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from perflab import __version__, errors
from perflab.core import files
from perflab.core.lazy import pd, pq
from perflab.errors import OtherExperiment, PerflabError
from perflab.store import filelock, results
from perflab.store.identity import Executes, identity, identity_changes
from perflab.store.rowchecks import Expect, PlannedKeys, rows_problem


def _refuse_unfinished(path: Path) -> None:
    """A fresh journal refuses to replace what an interrupted run left, its parts or its file
    of finished runs: a resume completes them."""
    parts = path.with_name(path.name + ".parts")
    if parts.exists():
        raise PerflabError(
            f"{path}: an interrupted run left {parts}; "
            f"add --resume {path} to complete it, or delete {parts}"
        )
    found = results.stored(path) if path.exists() else None
    if found is not None and found[0].get("complete") is False:
        runs = "" if found[1] is None else f" ({found[1]} rows)"
        raise PerflabError(
            f"{path}: holds an interrupted run{runs}; "
            f"add --resume {path} to complete it, or delete it to start again"
        )


def recorded_meta(path: str | os.PathLike) -> dict:
    """The metadata (its parameters under "params") that an interrupted journal at path, or
    the finished result there, recorded; empty where there is none to read. What a resume must
    rebuild before it opens the journal (the layout env-size chose), the journal checks."""
    path = Path(path)
    with contextlib.suppress(OSError, ValueError, UnicodeDecodeError, PerflabError):
        parts = path.with_name(path.name + ".parts")
        if parts.is_dir():
            journal = json.loads(files.read(parts / "params.json"))
            meta = journal.get("meta") if isinstance(journal, dict) else None
            if isinstance(meta, dict):
                return {**meta, "params": journal.get("params")}
        elif path.exists():
            return dict(results.metadata(results.load(path)))
    return {}


@contextlib.contextmanager
def claimed(path: str | os.PathLike) -> Iterator[None]:
    """PATH held for a fresh journal and free of an interrupted run's parts, checked as the
    journal does but without loading pandas: a sweep queues its first runs, then opens it."""
    checked = results.check_output(path)
    filelock.acquire(checked)
    try:
        _refuse_unfinished(checked)
        yield
    finally:
        filelock.release(checked)


class Journal:
    """Rows flushed to disk in chunks as they are measured; finish() merges them into one file.

    An interrupted run leaves `PATH.parts/` (after a kill) or PATH marked incomplete (after
    Ctrl-C); a Journal opened with resume=True on the same PATH and identity (experiment,
    parameters, the programs executes names, byte for byte, their environment, the plan, the
    core) knows which keys are done, so the caller measures only the rest and nothing is
    measured twice. The journal holds PATH's lock from creation to finish(): a second writer is
    refused.
    """

    def __init__(
        self,
        path: str | os.PathLike,
        params: Mapping[str, Any],
        meta: Mapping[str, Any],
        key: Iterable[str],
        resume: bool = False,
        chunk_rows: int = 2000,
        expect: Expect | None = None,
        discard_bad: bool = False,
        warn: Callable[[str], None] = errors.warn,
        executes: Executes | None = None,
    ):
        self.path = results.check_output(path)
        self.parts = self.path.with_name(self.path.name + ".parts")
        self.params = json.loads(json.dumps(dict(params), default=str))
        self.meta = dict(meta)
        self.key = list(key)
        self.chunk_rows = chunk_rows
        self.expect = expect or Expect(unique=())
        self.identity = identity(self.meta.get("experiment"), self.params, self.expect, executes)
        self.discard_bad, self.warn = discard_bad, warn
        self._rows: list[dict[str, Any]] = []
        self._columns: list[str] | None = None
        self._keys = PlannedKeys(self.expect)
        self._merged: list[str] = []
        self._written: dict[str, pd.DataFrame] = {}  # this run's chunks: merged without a re-read
        self._unsaved: list[pd.DataFrame] = []  # chunks the disk refused: finish() saves them
        self._failure: str | None = None  # why the first of them could not be written
        self._token = uuid.uuid4().hex[:12]
        self._seq = 0
        self.journal_id = uuid.uuid4().hex
        filelock.acquire(self.path)
        try:
            self._previous = self._open(resume)
        except BaseException:
            filelock.release(self.path)
            raise

    def _open(self, resume: bool) -> pd.DataFrame | None:
        """Check a resume against the stored parameters and every row; start fresh otherwise."""
        if not resume:
            _refuse_unfinished(self.path)
            self.parts.mkdir()
            try:
                self._write_params("nothing was recorded: free space, then run it again")
            except PerflabError:
                shutil.rmtree(self.parts, ignore_errors=True)
                raise
            return None
        frames, stored, done, done_meta = [], None, None, {}
        recorded: object = None
        if self.path.exists():
            done = results.load(self.path)
            done_meta = results.metadata(done)
            self._check_origin(done_meta, done_meta.get("identity"))
            stored, recorded = done_meta.get("params"), done_meta.get("identity")
            if not isinstance(stored, dict):
                raise PerflabError(
                    f"{self.path}: not a journaled perflab result (no parameters recorded); "
                    "cannot resume from it"
                )
        merged: set[str] | int = set()
        if self.parts.is_dir():
            journal = self._read_params()
            self._check_origin(journal.get("meta"), journal.get("identity"))
            stored, self.journal_id = journal["params"], journal.get("journal", self.journal_id)
            recorded = journal.get("identity")
            if done_meta.get("journal") == self.journal_id:
                # Killed between finish()'s save and its cleanup: those chunks are in PATH.
                m = done_meta.get("merged_chunks", [])
                merged = m if isinstance(m, int) else set(m)
        if stored is None:
            raise PerflabError(f"{self.path}: nothing to resume (no results or journal there)")
        if stored != self.params:
            diff = sorted(
                k for k in set(stored) | set(self.params) if stored.get(k) != self.params.get(k)
            )
            changed = ", ".join(
                f"{k}: recorded {stored.get(k)!r}, asked {self.params.get(k)!r}" for k in diff
            )
            raise PerflabError(
                f"{self.path}: refusing to resume with different parameters ({changed})"
            )
        if not isinstance(recorded, dict):
            raise PerflabError(
                f"{self.path}: records no identity of what its runs executed (an older "
                "perflab wrote it), so a resume cannot be checked against it: start a new file"
            )
        changes = identity_changes(recorded, self.identity)
        if changes:
            raise PerflabError(f"{self.path}: refusing to resume: {'; '.join(changes)}")
        if done is not None:  # its rows are checked against the plan of the same parameters
            frames.append(self._accept_previous(done))
        if self.parts.exists() and not self.parts.is_dir():
            raise PerflabError(
                f"{self.parts}: not a directory, where the journal keeps its chunks: move it "
                f"away, then run the same command with --resume {self.path}"
            )
        self.parts.mkdir(exist_ok=True)
        chunks = self._chunks()
        if isinstance(merged, int):  # a journal of perflab < 0.2 counted its merged chunks
            self._merged, chunks = [c.name for c in chunks[:merged]], chunks[merged:]
        else:
            self._merged = [c.name for c in chunks if c.name in merged]
            chunks = [c for c in chunks if c.name not in merged]
        frames.extend(f for f in (self._accept_chunk(c) for c in chunks) if f is not None)
        self._seq = len(self._chunks())
        self._write_params()
        frames = [f for f in frames if not f.empty]
        return pd.concat(frames, ignore_index=True) if frames else None

    def _check_origin(self, meta: object, recorded: object) -> None:
        """Refuse to resume another experiment's file, or one a newer perflab started."""
        meta = meta if isinstance(meta, dict) else {}
        recorded = recorded if isinstance(recorded, dict) else {}
        theirs = recorded.get("experiment") or meta.get("experiment")
        mine = self.identity["experiment"]
        if isinstance(theirs, str) and isinstance(mine, str) and theirs != mine:
            raise OtherExperiment(self.path, theirs, mine)
        newer = results.newer_perflab(meta)
        if newer:
            raise PerflabError(
                f"{self.path}: started by perflab {newer}, newer than this perflab "
                f"{__version__}; resume it with that version"
            )

    def _chunks(self) -> list[Path]:
        return sorted(self.parts.glob("chunk-*.parquet"))

    def _read_params(self) -> dict:
        where = self.parts / "params.json"
        try:
            journal = json.loads(files.read(where))
            if not isinstance(journal, dict) or not isinstance(journal.get("params"), dict):
                raise ValueError("no parameters in it")
        except FileNotFoundError:
            reason = "missing"
        except (ValueError, UnicodeDecodeError) as exc:
            reason = f"damaged: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
        else:
            return journal
        raise PerflabError(
            f"{where}: {reason}; which parameters its runs were measured with is unknown: "
            f"delete {self.parts} to start over"
        )

    def _accept_previous(self, df: pd.DataFrame) -> pd.DataFrame:
        """PATH from an earlier, interrupted finish: refused whole if anything in it is wrong."""
        problem = rows_problem(df, self.expect, None) or self._keys.problem(df)
        if problem:
            raise PerflabError(
                f"{self.path}: {problem}; cannot resume from it (move it away to start over)"
            )
        self._keys.add(df)
        self._columns = list(map(str, df.columns))
        return df

    def _accept_chunk(self, chunk: Path) -> pd.DataFrame | None:
        """A chunk's rows, or None when it is bad and discard_bad says drop it."""
        problem: str | None
        try:
            with files.open_read(chunk) as f:  # a FIFO planted as a chunk: refused, not waited on
                df = pq.read_table(f).to_pandas()
        except Exception as exc:
            problem = f"unreadable ({type(exc).__name__}: {str(exc).splitlines()[0][:80]})"
        else:
            problem = rows_problem(df, self.expect, self._columns) or self._keys.problem(df)
        if problem is None:
            self._keys.add(df)
            if self._columns is None:
                self._columns = list(map(str, df.columns))
            return df
        if not self.discard_bad:
            raise PerflabError(
                f"{chunk}: {problem}; resume with --discard-bad to drop it "
                "(its runs are measured again)"
            )
        chunk.unlink()
        self.warn(errors.warning("chunk_dropped", chunk=chunk, problem=problem))
        return None

    def _write_params(self, hint: str | None = None) -> None:
        body = json.dumps(
            {"params": self.params, "meta": self.meta, "journal": self.journal_id,
             "identity": self.identity},
            default=str,
        )  # fmt: skip
        self._write(self.parts / "params.json", lambda t: t.write_text(body), hint=hint)

    def _write(
        self,
        target: Path,
        write: Callable[[Path], object],
        exclusive: bool = False,
        hint: str | None = None,
    ) -> None:
        """Write atomically; a full disk names the file and says how to complete the run."""
        try:
            files.atomic(target, write, exclusive)
        except OSError as exc:
            reason = why(exc)
            hint = hint or (
                "the runs recorded so far are kept: free space, then run the same command "
                f"with --resume {self.path}"
            )
            raise PerflabError(f"{target}: cannot write ({reason}); {hint}") from None

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
        """One more chunk on disk; one the disk refuses stays in memory, and so does every
        later one (the run stops: finish() saves them all elsewhere and says where)."""
        if self._failure is not None:
            self._unsaved.append(chunk)
            return
        target = self.parts / f"chunk-{self._seq:06d}-{self._token}.parquet"
        try:
            files.atomic(target, lambda t: chunk.to_parquet(t, index=False), exclusive=True)
        except OSError as exc:
            self._unsaved.append(chunk)
            self._failure = f"{target}: cannot write ({why(exc)})"
            raise ChunkUnwritten(
                f"{self._failure}; its runs are kept in memory and saved when the journal "
                f"finishes, where it says; complete them with --resume {self.path}"
            ) from None
        self._written[target.name] = chunk
        self._seq += 1

    def _verify(self, df: pd.DataFrame) -> str | None:
        """Why the merged rows are not every planned key exactly once (None: they are)."""
        keys = PlannedKeys(self.expect)
        problem = keys.problem(df)
        if problem is None and keys.planned is not None:
            keys.add(df)
            if keys.missing():
                problem = f"{keys.missing()} of {len(keys.count)} planned runs missing"
        return problem

    def abandon(self) -> bool:
        """Drop a journal that holds nothing (no earlier rows, no chunk, no row buffered): a
        run that never measured leaves no file at PATH. False, and nothing done, otherwise."""
        held = self._previous is not None or self._rows or self._written or self._unsaved
        if held or (self.parts.is_dir() and self._chunks()):
            return False
        shutil.rmtree(self.parts, ignore_errors=True)
        filelock.release(self.path)
        return True

    def finish(
        self,
        complete: bool = True,
        extra_meta: Mapping[str, Any] | None = None,
        annotate: Callable[[pd.DataFrame], Mapping[str, Any]] | None = None,
        arrange: Callable[[pd.DataFrame], pd.DataFrame] | None = None,
    ) -> pd.DataFrame:
        """Merge earlier results and every chunk into PATH, verified, and drop the journal.

        annotate(merged rows) adds metadata computed on every row, earlier sessions' too,
        before the one write of PATH; arrange(merged rows) gives the rows as saved, same
        columns (in plan order, with the columns that depend on neighbouring rows recomputed).
        """
        try:
            with contextlib.suppress(ChunkUnwritten):  # kept in memory, saved below
                self.flush()
            frames = [] if self._previous is None else [self._previous]
            # This run's rows from memory, its chunks on disk or not: a chunk a removed or
            # replaced directory took with it is saved all the same.
            frames.extend([*self._written.values(), *self._unsaved])
            mine = list(self._written)
            self._written, self._unsaved = {}, []
            frames = [f for f in frames if not f.empty]
            df = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=self.key)
            if arrange is not None and not df.empty:
                df = arrange(df)
            meta = {**self.meta, **(extra_meta or {}), "params": self.params,
                    "identity": self.identity}  # fmt: skip
            if complete:
                problem = self._verify(df)
                if problem:
                    complete, meta["incomplete"] = False, problem
            if annotate is not None:
                meta.update(annotate(df))
            meta.update(complete=complete, journal=self.journal_id,
                        merged_chunks=self._merged + mine)  # fmt: skip
            self._save(results.attach(df, meta), complete, on_disk=self._on_disk(mine))
            return df
        finally:
            filelock.release(self.path)

    def _on_disk(self, mine: list[str]) -> bool:
        """Whether every row of this run is in a chunk still on disk, where a resume finds it."""
        return self._failure is None and all((self.parts / name).is_file() for name in mine)

    def _save(self, df: pd.DataFrame, complete: bool, on_disk: bool) -> None:
        """Every row to PATH; else, unless every one is in a chunk on disk, to the user's
        cache: never dropped while a disk takes them. Raises with where they are when the run
        could not end as asked."""
        runs = f"{'all the runs' if complete else 'the runs measured'} ({len(df)})"
        try:
            results.save(df, self.path)
        except (OSError, PerflabError) as exc:
            failed = f"{self.path}: cannot write ({why(exc, self.path)})"
            if on_disk:
                raise PerflabError(
                    f"{failed}; the runs are kept in {self.parts}: free space, then run the "
                    f"same command with --resume {self.path}"
                ) from None
        else:
            shutil.rmtree(self.parts, ignore_errors=True)
            if self._failure is not None and not complete:
                raise PerflabError(
                    f"{self._failure}; {runs} are kept in {self.path} (incomplete): "
                    f"run the same command with --resume {self.path} to complete them"
                )
            return
        failed = failed if self._failure is None else f"{self._failure}, nor {failed}"
        try:
            spare = spare_path(self.path, self._token)
            results.save(df, spare)
        except (OSError, PerflabError) as exc:
            raise PerflabError(
                f"{failed}, nor in the cache ({why(exc)}): the runs not yet in {self.parts} "
                f"are lost; free space, then run the same command with --resume {self.path}"
            ) from None
        then = (
            f"copy it to {self.path}"
            if complete
            else f"complete them with the same command, --resume {spare} in place of -o"
        )
        raise PerflabError(f"{failed}; {runs} are kept in {spare}: {then}")


class ChunkUnwritten(PerflabError):
    """A chunk the disk refused: its rows stay with the journal, which saves them on finish()."""


def why(exc: BaseException, path: Path | None = None) -> str:
    """An OSError's reason (its strerror; pyarrow's 'Error writing bytes ... [errno 28]' as
    errno 28's), else the first line of the error less the path it starts with (the message
    names that path already)."""
    found = re.search(r"\[errno (\d+)\]", str(exc), re.I)
    if found:
        return os.strerror(int(found[1]))
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    first = (str(exc).splitlines() or [type(exc).__name__])[0]
    return first.removeprefix(f"{path}: ") if path is not None else first


def spare_path(path: Path, token: str) -> Path:
    """Where rows go when PATH's directory refuses them: the user's private cache, a name no
    other run takes (the journal's token), PATH's format."""
    from perflab.system import compiler

    spare = compiler.cache_dir() / "unsaved"
    with contextlib.suppress(FileExistsError):
        spare.mkdir(mode=0o700)
    st = os.lstat(spare)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o022:
        raise PerflabError(f"{spare}: not a directory of this user's alone")
    return spare / f"{path.stem}-{token}{path.suffix}"
