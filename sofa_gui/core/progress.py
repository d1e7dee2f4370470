"""Progress reporting and cooperative cancellation for long core functions.

Core code never talks to Qt: it calls ``progress.update(fraction, message)`` and
``progress.check_cancelled()``; the GUI worker passes an implementation backed by
signals, the CLI passes :class:`NullProgress`.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import Protocol

_idle: ContextVar[list | None] = ContextVar("sofa_gui_idle_work", default=None)


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


@contextlib.contextmanager
def while_idle(*work: Callable[[], None]) -> Iterator[None]:
    """Within this block, core code that would sit waiting for other processes (the
    parallel decode's workers) runs ``work`` meanwhile, once: e.g. the imports the next
    stage needs anyway, taken off the path to the result."""
    token = _idle.set(list(work))
    try:
        yield
    finally:
        _idle.reset(token)


def run_idle_work() -> None:
    """Run what :func:`while_idle` registered (each once). Optional work: a failure is
    logged, never raised into the caller (its stage does the work again and reports)."""
    work = _idle.get()
    while work:
        fn = work.pop(0)
        try:
            fn()
        except Exception:  # optional work: see the docstring
            logging.getLogger(__name__).debug("idle work %r failed", fn, exc_info=True)
