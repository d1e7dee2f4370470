"""Python's cyclic garbage collection on the GUI thread only, while the app runs.

The collector runs on whichever thread happens to allocate when a generation's count
passes its threshold. In the app that is often a job thread (loading, analysis), and a
collection there frees the Qt wrappers that sit in unreachable cycles: PySide6 then
defers their C++ deletion to the GUI thread, which can run it in the middle of a layout
pass and block on the very object's mutex (a hang in ``QObject::~QObject`` under a
widget's ``sizeHint``). So while the window lives, automatic collection is off and a
timer on the GUI thread collects instead, by the interpreter's own thresholds:

* every tick (:data:`TICK_MS`) it reads :func:`gc.get_count`; when generation 0 has
  passed its threshold it collects generation 0, or generation 1 when that one's count
  has passed its threshold too (a collection of 1 includes 0);
* a full collection (generation 2) walks every object not frozen at start-up, so it
  runs only when generation 2's threshold is passed *and* :data:`FULL_EVERY_S` have
  gone by since the last one (the interpreter similarly holds full collections back
  until the long-lived objects have grown by a quarter);
* a threshold of 0 for generation 0 means collection is switched off, and stays off;
* something that turns automatic collection back on (a library's own
  ``gc.disable()`` / ``gc.enable()`` pair) is turned off again at the next tick.

:func:`start` starts it; its ``stop()`` puts the previous state back (headless
commands never load Qt and never get here).
"""

from __future__ import annotations

import gc
import logging
import time
from collections.abc import Callable

log = logging.getLogger(__name__)

#: Milliseconds between two looks at the allocation counts: often enough that a young
#: generation filled by a job thread is collected in small pieces, not one long pause.
TICK_MS = 250
#: Least seconds between two full collections.
FULL_EVERY_S = 10.0


class GuiThreadCollector:
    """The timer and its policy (see the module doc); ``collected`` counts the
    collections per generation."""

    def __init__(self, parent=None, tick_ms: int | None = None,
                 full_every_s: float | None = None, clock: Callable[[], float] = time.monotonic):
        from PySide6.QtCore import QTimer

        self._was_enabled = gc.isenabled()
        self._full_every_s = FULL_EVERY_S if full_every_s is None else full_every_s
        self._clock = clock
        self._last_full = clock()
        self.collected = [0, 0, 0]
        self._timer = QTimer(parent)
        self._timer.setInterval(TICK_MS if tick_ms is None else tick_ms)
        self._timer.timeout.connect(self.tick)

    def start(self) -> None:
        gc.disable()
        self._timer.start()

    def stop(self) -> None:
        """Stop collecting here; automatic collection is on again if it was before."""
        self._timer.stop()
        if self._was_enabled:
            gc.enable()

    def tick(self) -> None:
        if gc.isenabled():
            log.debug("automatic garbage collection was turned back on; off again")
            gc.disable()
        gen = self.generation_due()
        if gen is None:
            return
        gc.collect(gen)
        self.collected[gen] += 1
        if gen == 2:
            self._last_full = self._clock()

    def generation_due(self) -> int | None:
        """The generation to collect now (None: none), by the interpreter's thresholds."""
        counts, limits = gc.get_count(), gc.get_threshold()
        if limits[0] <= 0 or counts[0] <= limits[0]:
            return None
        if counts[1] <= limits[1]:
            return 0
        if counts[2] <= limits[2] or self._clock() - self._last_full < self._full_every_s:
            return 1
        return 2


def start(parent=None) -> GuiThreadCollector:
    """Collect on the GUI thread (the caller's: call it there) from now on; the
    collector's ``stop()`` turns automatic collection back on."""
    collector = GuiThreadCollector(parent)
    collector.start()
    return collector
