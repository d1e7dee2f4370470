"""Progress reporting and cooperative cancellation for long core functions.

Core code never talks to Qt: it calls ``progress.update(fraction, message)`` and
``progress.check_cancelled()``; the GUI worker passes an implementation backed by
signals, the CLI passes :class:`NullProgress`.
"""

from __future__ import annotations

import threading
from typing import Protocol


class Cancelled(Exception):
    """Raised inside a core function when its caller asked it to stop."""


class Progress(Protocol):
    def update(self, fraction: float, message: str = "") -> None: ...

    def check_cancelled(self) -> None: ...


class NullProgress:
    """Progress that goes nowhere and never cancels."""

    def update(self, fraction: float, message: str = "") -> None:
        pass

    def check_cancelled(self) -> None:
        pass


class CancelToken:
    """Progress that records the last report and cancels when :meth:`cancel` is called.

    Thread-safe: a GUI thread may cancel while a worker thread reports.
    """

    def __init__(self, callback=None):
        self._event = threading.Event()
        self._callback = callback
        self.fraction = 0.0
        self.message = ""

    def cancel(self) -> None:
        self._event.set()

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()

    def update(self, fraction: float, message: str = "") -> None:
        self.fraction, self.message = fraction, message
        if self._callback is not None:
            self._callback(fraction, message)
        self.check_cancelled()

    def check_cancelled(self) -> None:
        if self._event.is_set():
            raise Cancelled()


class SubProgress:
    """Maps a child's 0..1 progress onto ``[lo, hi]`` of a parent's."""

    def __init__(self, parent: Progress, lo: float, hi: float):
        self._parent, self._lo, self._hi = parent, lo, hi

    def update(self, fraction: float, message: str = "") -> None:
        f = min(max(fraction, 0.0), 1.0)
        self._parent.update(self._lo + (self._hi - self._lo) * f, message)

    def check_cancelled(self) -> None:
        self._parent.check_cancelled()


def subrange(parent: Progress | None, lo: float, hi: float) -> Progress:
    """A child progress covering ``[lo, hi]`` of ``parent`` (NullProgress if None)."""
    return SubProgress(parent or NullProgress(), lo, hi)
