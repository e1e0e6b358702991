"""Ctrl-C and SIGTERM as a stop between runs, for every sweep: child runs, in-process chunks
and the shift engine's runs alike."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from types import FrameType, TracebackType
from typing import Any, TypeVar

from perflab.errors import Stopped
from perflab.running import spawn

R = TypeVar("R")


class Interrupt:
    """Ctrl-C and SIGTERM as a flag that also stops the C batch in flight between runs.

    The batch sees the stop at once: the helper gets a stop byte, and an in-process batch
    polls the pipe that Python's own C-level handler writes to (signal.set_wakeup_fd).
    Finished runs are kept; the run cut short is not recorded.
    """

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self) -> None:
        self.hit = False
        self.signum: int = signal.SIGINT
        self._old: dict[int, Any] = {}
        self._old_wakeup: int | None = None

    def __enter__(self) -> Interrupt:
        spawn.clear_stop()
        if threading.current_thread() is threading.main_thread():
            self._old = {s: signal.signal(s, self._handler) for s in self.SIGNALS}
            self._old_wakeup = signal.set_wakeup_fd(
                spawn.stop_wakeup_fd(), warn_on_full_buffer=False
            )
        return self

    def _handler(self, signum: int, frame: FrameType | None) -> None:
        self.hit = True
        self.signum = signum
        spawn.request_stop()

    def stopped(self) -> Stopped:
        """The exception that ends the sweep, naming the signal that stopped it."""
        return Stopped(self.signum)

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._old_wakeup is not None:
            signal.set_wakeup_fd(self._old_wakeup)
        for s, old in self._old.items():
            signal.signal(s, old)
        spawn.clear_stop()
        if self.hit and exc_type is not None and issubclass(exc_type, KeyboardInterrupt):
            raise self.stopped() from None


def interruptible(measure: Callable[..., R], *args: Any) -> R:
    """measure(*args) with Ctrl-C and SIGTERM stopping it alike (the preflight, before the
    sweep's own handlers): without this, SIGTERM there ended perflab by its default action."""
    with Interrupt() as stop:
        done = measure(*args)
    if stop.hit:
        raise stop.stopped()
    return done
