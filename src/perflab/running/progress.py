"""Progress of long runs wherever they run: a bar in a terminal, lines in a log, Jupyter's line.

A sweep redirected to a file used to print nothing for ten minutes; a log now gets one line
every EVERY_S seconds or EVERY_FRACTION of the runs, so it shows life, rate and ETA. The
sweeps show it by default (see `shown`); progress=False silences them, and a caller that wants
its own display passes the callbacks:

    with Progress("env-size") as p:
        df = env_size.sweep(max_size=8192, on_start=p.on_start, progress=p.update)
"""

import contextlib
import math
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any, TextIO

EVERY_S = 10.0
EVERY_FRACTION = 0.05
NOTEBOOK_EVERY_S = 0.5  # a display update is a message to the front end: not one per run
MODES = ("auto", "bar", "lines", "notebook", "off")

OnStart = Callable[[int, int], Any]
# What a long API call takes as progress=: a callback per n runs done, False for silence, or
# None/True for the display that suits where it runs.
ProgressArg = Callable[[int], None] | bool | None


def in_notebook() -> bool:
    """True inside a Jupyter kernel, where stderr is a stream that no carriage return rewinds."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython and hasattr(ipython, "get_ipython") else None
    return getattr(shell, "kernel", None) is not None


def auto_mode(file: TextIO) -> str:
    """The display that suits where the output goes."""
    if in_notebook():
        return "notebook"
    isatty = getattr(file, "isatty", None)
    return "bar" if isatty and isatty() else "lines"


def duration(seconds: float) -> str:
    """1h02m, 3m05s or 12s: what a log reader wants to see of an ETA."""
    if not math.isfinite(seconds):
        return "?"
    s = round(seconds)
    if s >= 3600:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    if s >= 60:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s}s"


class Progress:
    """Counts work done out of a total and shows it as suits the output; never on stdout.

    on_start(todo, done) and update(n) are the callbacks the experiments take (on_start= and
    progress=; `callbacks` gives both). mode: auto (a click bar in a terminal, lines in a log,
    an updated line in Jupyter), bar, lines, notebook or off.
    """

    def __init__(
        self,
        label: str = "runs",
        total: int | None = None,
        *,
        file: TextIO | None = None,
        mode: str = "auto",
        every_s: float = EVERY_S,
        every_fraction: float = EVERY_FRACTION,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
        self.label, self.total = label, total
        self.file = file if file is not None else sys.stderr
        self.mode = auto_mode(self.file) if mode == "auto" else mode
        self.every_s, self.every_fraction, self.clock = every_s, every_fraction, clock
        self.done = self.resumed = 0
        self.started: float | None = None
        self._shown_at = -math.inf
        self._shown_step = 0
        self._bar: Any = None
        self._handle: Any = None

    @property
    def callbacks(self) -> dict[str, Callable[..., Any]]:
        """on_start= and progress= for an experiment's sweep: sweep(..., **p.callbacks)."""
        return {"on_start": self.on_start, "progress": self.update}

    def on_start(self, todo: int, done: int = 0) -> Callable[[int], None]:
        """The run begins with `todo` to measure (`done` recorded before, when resuming)."""
        self.total, self.resumed, self.done = int(todo), int(done), 0
        self.started = self.clock()
        if self.mode == "bar":
            import click

            self._bar = click.progressbar(
                length=self.total, label=self.label, file=self.file, show_eta=True
            )
            self._bar.__enter__()
        else:
            self._show(force=True)
        return self.update

    def update(self, n: int = 1) -> None:
        """n more done."""
        if self.started is None:
            self.on_start(self.total or 0)
        self.done += n
        if self._bar is not None:
            self._bar.update(n)
        else:
            self._show()

    def close(self) -> None:
        """End the display with the final count and rate."""
        if self.started is None:
            return
        if self._bar is not None:
            self._bar.__exit__(None, None, None)
            self._bar = None
        else:
            self._show(force=True, final=True)
        self.started = None

    def __enter__(self) -> "Progress":
        if self.total is not None:
            self.on_start(self.total)
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def line(self, final: bool = False) -> str:
        """One line: label, done/total (percent), rate, ETA (or the elapsed time at the end)."""
        elapsed = self.clock() - (self.started if self.started is not None else self.clock())
        rate = self.done / elapsed if elapsed > 0 else math.nan
        total = f"/{self.total:,}" if self.total else ""
        pct = f" ({100 * self.done / self.total:.0f}%)" if self.total else ""
        text = f"{self.label}: {self.done:,}{total}{pct}"
        if self.resumed:
            text += f" (+{self.resumed:,} before resuming)"
        if self.done and math.isfinite(rate):
            text += f", {rate:,.1f}/s"
        if final:
            return text + f", {duration(elapsed)}"
        if self.total and self.done and math.isfinite(rate) and rate > 0:
            text += f", ETA {duration((self.total - self.done) / rate)}"
        return text

    def _show(self, force: bool = False, final: bool = False) -> None:
        if self.mode == "off":
            return
        now = self.clock()
        step = int(self.done / self.total / self.every_fraction) if self.total else 0
        if self.mode == "notebook":
            if force or now - self._shown_at >= NOTEBOOK_EVERY_S:
                self._shown_at = now
                self._notebook(final)
            return
        if self.total and self.done >= self.total and not final:
            return  # close() says it, with the elapsed time: one 100 % line, not two
        if force or step > self._shown_step or now - self._shown_at >= self.every_s:
            self._shown_at, self._shown_step = now, step
            print(self.line(final), file=self.file, flush=True)

    def _notebook(self, final: bool) -> None:
        from html import escape

        from IPython.display import display

        text = self.line(final)
        value = f' value="{self.done}" max="{self.total}"' if self.total else ""
        bundle = {
            "text/plain": text,
            "text/html": f'<progress{value} style="width:16em"></progress> {escape(text)}',
        }
        if self._handle is None:
            self._handle = display(bundle, raw=True, display_id=True)
        else:
            self._handle.update(bundle, raw=True)


@contextlib.contextmanager
def shown(
    label: str, on_start: OnStart | None, progress: ProgressArg
) -> Iterator[tuple[OnStart | None, Callable[[int], None] | None]]:
    """The (on_start, progress) a long call uses: the caller's own, none when progress=False,
    else a Progress display on stderr (notebook, bar or log lines), closed when the call ends.

    A caller that passes only on_start keeps the old meaning (it handles progress itself).
    """
    if progress is False or callable(progress) or (progress is None and on_start is not None):
        yield on_start, progress if callable(progress) else None
        return
    display = Progress(label)

    def start(todo: int, done: int = 0) -> None:
        display.on_start(todo, done)
        if on_start is not None:
            on_start(todo, done)

    try:
        yield start, display.update
    finally:
        display.close()
