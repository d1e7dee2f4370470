"""A background thread that calls ``tick`` on a fixed steady-clock schedule.

Ticks are scheduled at ``start + k * interval`` (no drift); a tick that runs
late skips the missed slots instead of bursting to catch up. A failing tick is
counted and logged, never fatal: the recording must go on.
"""

from __future__ import annotations

import logging
import threading
import time

log = logging.getLogger(__name__)


class Periodic(threading.Thread):
    """Subclasses implement :meth:`tick` (and optionally :meth:`finish`)."""

    def __init__(self, name: str, interval_s: float):
        super().__init__(name=name, daemon=True)
        self.interval_ns = max(int(interval_s * 1e9), 1)
        self._halt = threading.Event()
        self.ticks = 0
        self.late_ticks = 0
        self.errors: dict[str, int] = {}

    def tick(self, mono_ns: int) -> None:
        raise NotImplementedError

    def finish(self) -> None:
        """Called once on the thread after the last tick."""

    def stop(self, timeout: float | None = 10.0) -> None:
        """Ask for one last tick, then wait for the thread to end."""
        self._halt.set()
        if self.is_alive():
            self.join(timeout)

    def run(self) -> None:
        nxt = time.monotonic_ns()
        while True:
            self._safe_tick()
            nxt += self.interval_ns
            now = time.monotonic_ns()
            if now > nxt:
                missed = (now - nxt) // self.interval_ns + 1
                self.late_ticks += int(missed)
                nxt += missed * self.interval_ns
            if self._halt.wait((nxt - now) / 1e9):
                break
        self._safe_tick()
        try:
            self.finish()
        except Exception as exc:  # noqa: BLE001 - reported in the manifest
            self._count_error(exc)

    def _safe_tick(self) -> None:
        try:
            self.tick(time.monotonic_ns())
            self.ticks += 1
        except Exception as exc:  # noqa: BLE001 - one bad sample must not end the run
            self._count_error(exc)

    def _count_error(self, exc: Exception) -> None:
        key = f"{type(exc).__name__}: {exc}"[:200]
        if key not in self.errors:
            log.warning("%s: %s", self.name, key, exc_info=True)
        self.errors[key] = self.errors.get(key, 0) + 1
