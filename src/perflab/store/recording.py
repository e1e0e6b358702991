"""Where a sweep's rows go and how they get there: a journal at the output (resumed if asked)
or memory, written a chunk at a time; shared by the child-run, in-process and shift engines."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from perflab.core.lazy import pd
from perflab.errors import PerflabError
from perflab.store import journal, results
from perflab.store.identity import Executes, identity
from perflab.store.rowchecks import Expect

FLUSH_S = 1.0  # rows reach the disk at least this often: a kill -9 loses about a second
Warn = Callable[[str], None]


@dataclass(frozen=True)
class Recording:
    """Where a sweep's rows go (a journal at `output`, resumed if asked, else memory) and who
    hears of them: every experiment's run takes this one object, not five keywords.

    on_start(todo, done) is called once the input has proved valid (a verb opens its bar then);
    progress(n) after each n rows, or True for perflab's own display (running/progress.py)."""

    output: str | os.PathLike | None = None
    resume: bool = False
    discard_bad: bool = False
    on_start: Callable[[int, int], Any] | None = None
    progress: Callable[[int], None] | bool | None = None

    def check(self) -> None:
        """Refuse an output that cannot be written, and a resume of a file that no journal
        wrote, before a sweep builds anything (link-order links first, then opens its journal)."""
        if self.output is None:
            if self.resume:
                raise PerflabError("resume needs the output file of the interrupted sweep")
            return
        results.check_output(self.output)
        if not self.resume or not os.path.exists(self.output):
            return
        if not isinstance(results.metadata(results.load(self.output)).get("params"), dict):
            raise PerflabError(
                f"{self.output}: not a journaled perflab result (no parameters recorded); "
                "cannot resume from it"
            )

    def check_whole(self, experiment: str) -> None:
        """check(), for a run measured whole and saved at its end (no journal): a resume is
        refused, since nothing would be there to complete."""
        if self.resume:
            raise PerflabError(f"a {experiment} run is saved whole, not journaled: no resume")
        self.check()

    def keep(self, frame: pd.DataFrame) -> pd.DataFrame:
        """A run measured whole, saved at the output (if any) once it is done."""
        if self.output is not None:
            results.save(frame, self.output)
        return frame


class Recorder:
    """Buffers rows and writes them as one chunk per flush_s (to a journal, or memory).

    key: the columns naming a row; expect: what each row must be (its columns too); arrange:
    the merged rows as returned and saved (journal.Journal.finish).
    """

    def __init__(self, recording: Recording, key: Iterable[str], expect: Expect, params: dict,
                 meta: dict, warn: Warn, flush_s: float = FLUSH_S,
                 arrange: Callable[[pd.DataFrame], pd.DataFrame] | None = None,
                 executes: Executes | None = None):  # fmt: skip
        self.meta, self.params, self.flush_s, self.arrange = meta, params, flush_s, arrange
        self.columns = list(expect.columns)
        self.journal = (
            journal.Journal(recording.output, params, meta, key, recording.resume,
                            expect=expect, discard_bad=recording.discard_bad, warn=warn,
                            executes=executes)
            if recording.output is not None
            else None
        )  # fmt: skip
        self.identity = (
            self.journal.identity
            if self.journal
            else identity(meta.get("experiment"), params, expect, executes)
        )
        self.frames: list[pd.DataFrame] = []
        self.buffer: list[pd.DataFrame] = []
        self.flushed = time.monotonic()

    def done_keys(self) -> set[tuple]:
        return self.journal.done_keys() if self.journal else set()

    def add(self, rows: pd.DataFrame) -> None:
        self.buffer.append(rows)
        if time.monotonic() - self.flushed >= self.flush_s:
            self.flush()

    def flush(self) -> None:
        self.flushed = time.monotonic()
        if not self.buffer:
            return
        frame = pd.concat(self.buffer, ignore_index=True)
        self.buffer = []
        if self.journal:
            self.journal.extend_frame(frame)
        else:
            self.frames.append(frame)

    def finish(
        self,
        complete: bool,
        extra: dict,
        annotate: Callable[[pd.DataFrame], dict] | None = None,
    ) -> pd.DataFrame:
        """Every row, with the metadata: complete only when the journal verified it, and what
        annotate(every row) adds, in the file's one final write."""
        added: dict = {}

        def note(rows: pd.DataFrame) -> dict:
            added.update(annotate(rows) if annotate is not None else {})
            return added

        if self.journal:
            try:
                # A chunk the disk refuses stays with the journal, which saves it below.
                with contextlib.suppress(journal.ChunkUnwritten):
                    self.flush()
            finally:
                df = self.journal.finish(complete=complete, extra_meta=extra, annotate=note,
                                         arrange=self.arrange)  # fmt: skip
            stored = results.metadata(df)  # what finish() verified, not what was assumed
            complete = stored.get("complete", False)
            checked = {k: v for k, v in stored.items() if k == "incomplete"}
        else:
            self.flush()
            df = pd.concat(self.frames, ignore_index=True) if self.frames else None
            checked = {}
            if df is not None:
                df = self.arrange(df) if self.arrange is not None else df
                note(df)
        if df is None or df.empty:
            df = pd.DataFrame({c: pd.Series(dtype=object) for c in self.columns})
        final = {**self.meta, **extra, **added, "params": self.params, "complete": complete,
                 "identity": self.identity, **checked}  # fmt: skip
        return results.attach(df, final)
