"""Markers and the measurement: named times on the timeline and one drawn time delta.

A marker is a name at a time (ns from the trace start); the markers of a trace are kept
in start order and saved with it (:meth:`MarkerSet.to_json` / :meth:`MarkerSet.from_json`
read and write a list of ``{"name", "at_ns"}``; anything else in the saved text is
ignored). A :class:`Measure` is two points placed by Shift-clicks; its delta stays drawn
until it is cleared or a new one starts.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from ..core.units import fmt_ns

#: Most markers kept per trace (older ones are dropped first).
MAX_MARKERS = 200


@dataclass
class Marker:
    name: str
    at_ns: float  # ns from the trace start


class MarkerSet:
    """The markers of one trace, in time order."""

    def __init__(self):
        self.items: list[Marker] = []
        self._made = 0

    def __len__(self) -> int:
        return len(self.items)

    def add(self, at_ns: float, name: str = "") -> Marker:
        """A marker at ``at_ns``; without a name it is called M1, M2, ..."""
        self._made += 1
        marker = Marker(name.strip() or f"M{self._made}", float(at_ns))
        self.items.append(marker)
        self.items.sort(key=lambda m: m.at_ns)
        del self.items[:-MAX_MARKERS]
        return marker

    def rename(self, k: int, name: str) -> None:
        if name.strip():
            self.items[k].name = name.strip()

    def remove(self, k: int) -> None:
        del self.items[k]

    def clear(self) -> None:
        self.items.clear()

    def to_json(self) -> str:
        return json.dumps([{"name": m.name, "at_ns": m.at_ns} for m in self.items])

    @classmethod
    def from_json(cls, text) -> MarkerSet:
        """The markers saved in ``text``; an empty set for anything unreadable."""
        out = cls()
        try:
            rows = json.loads(text) if isinstance(text, str) else []
        except ValueError:
            rows = []
        for row in rows if isinstance(rows, list) else []:
            if isinstance(row, dict) and isinstance(row.get("at_ns"), (int, float)):
                out.add(float(row["at_ns"]), str(row.get("name", ""))[:200])
        out._made = len(out.items)
        return out


@dataclass
class Measure:
    """Two points placed with Shift-click; ``b`` is None while the second is awaited."""

    a: float | None = None
    b: float | None = None

    def click(self, x: float) -> None:
        """The next point: the first, the second, or (after two) a new first."""
        if self.a is None or self.b is not None:
            self.a, self.b = float(x), None
        else:
            self.b = float(x)

    def clear(self) -> None:
        self.a = self.b = None

    @property
    def done(self) -> bool:
        return self.a is not None and self.b is not None

    def text(self) -> str:
        """``Δ 12.3 ms`` once both points are placed, else ''."""
        if not self.done:
            return ""
        return f"Δ {fmt_ns(abs(self.b - self.a))}"
