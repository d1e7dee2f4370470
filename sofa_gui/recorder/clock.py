"""One clock for everything recorded: a steady clock mapped once to Unix epoch ns.

Samples are timed with ``time.monotonic_ns()`` (never jumps when NTP adjusts
the wall clock) and converted with a single offset measured at start, so all
counters share the epoch timeline that Kineto and py-spy are mapped onto.
"""

from __future__ import annotations

import time


class EpochClock:
    """Maps ``time.monotonic_ns()`` readings to Unix epoch ns with one fixed offset."""

    def __init__(self, tries: int = 7):
        best = None
        for _ in range(tries):
            m0 = time.monotonic_ns()
            wall = time.time_ns()
            m1 = time.monotonic_ns()
            if best is None or m1 - m0 < best[0]:
                best = (m1 - m0, (m0 + m1) // 2, wall)
        self.uncertainty_ns, self.monotonic_ref_ns, self.epoch_ref_ns = best
        self.offset_ns = self.epoch_ref_ns - self.monotonic_ref_ns

    def now(self) -> int:
        """Epoch ns, steady between calls."""
        return time.monotonic_ns() + self.offset_ns

    def to_epoch(self, monotonic_ns: int) -> int:
        return monotonic_ns + self.offset_ns

    def describe(self) -> dict:
        return {
            "timeline": "unix_epoch_ns",
            "steady_clock": "CLOCK_MONOTONIC (time.monotonic_ns)",
            "monotonic_ref_ns": self.monotonic_ref_ns,
            "epoch_ref_ns": self.epoch_ref_ns,
            "mapping_uncertainty_ns": self.uncertainty_ns,
        }
