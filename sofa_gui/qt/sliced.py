"""Long GUI updates cut into slices, a few steps per event-loop turn.

Building a panel for a big result (a card per finding, say) can take longer than
the 100 ms a GUI may stall. A :class:`SlicedWork` runs such a build as a generator:
at most ``per_turn`` steps (one ``next()`` each) per turn of the event loop, so
input, paints and the heartbeat get in between. Starting it again replaces the
build still running. Tests and screenshots call :func:`drain` to finish every
pending build at once.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Callable, Iterator

from PySide6.QtCore import QObject, QTimer, Signal

log = logging.getLogger(__name__)

_pending: weakref.WeakSet = weakref.WeakSet()


class SlicedWork(QObject):
    """Runs a generator ``per_turn`` steps per event-loop turn; ``finished`` when done."""

    finished = Signal()

    def __init__(self, parent: QObject | None = None, per_turn: int = 1):
        super().__init__(parent)
        self.per_turn = per_turn
        self.turns = 0  # turns taken by the current build (tests)
        self._steps: Iterator | None = None
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(0)
        self._timer.timeout.connect(self._turn)

    @property
    def pending(self) -> bool:
        return self._steps is not None

    def start(self, make_steps: Callable[[], Iterator]) -> None:
        """Replace any running build with ``make_steps()``, first slice on the next turn."""
        self._steps = iter(make_steps())
        self.turns = 0
        _pending.add(self)
        self._timer.start()

    def cancel(self) -> None:
        self._steps = None
        self._timer.stop()
        _pending.discard(self)

    def finish_now(self) -> None:
        """Run what is left at once (screenshots, tests, a caller that needs it all)."""
        while self._steps is not None:
            self._run(None)

    def _turn(self) -> None:
        """One event-loop turn's slice: ``per_turn`` steps."""
        self._run(self.per_turn)

    def _run(self, limit: int | None) -> None:
        """Up to ``limit`` steps (None: to the end), then the next turn if any are left."""
        steps = self._steps
        if steps is None:
            return
        self.turns += 1
        try:
            k = 0
            while limit is None or k < limit:
                next(steps)
                k += 1
        except StopIteration:
            self.cancel()
            self.finished.emit()
            return
        except Exception:  # a bug in one panel must not stop the event loop
            log.exception("sliced GUI update failed")
            self.cancel()
            return
        if self._steps is steps:  # not restarted or cancelled by a step
            self._timer.start()


def pending() -> bool:
    """Whether any sliced build is still running."""
    return any(w.pending for w in list(_pending))


def drain() -> None:
    """Finish every pending sliced build now."""
    for w in list(_pending):
        w.finish_now()
