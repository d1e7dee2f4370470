"""Recently opened traces, kept in the settings (most recent first, existing paths only)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol


class Prefs(Protocol):
    """Where the list lives: the app's settings writer (saved off the GUI thread)."""

    def value(self, key: str, default: Any = None) -> Any: ...

    def set_value(self, key: str, value: Any) -> None: ...

    def remove(self, key: str) -> None: ...

KEY = "recent/paths"
MAX_RECENT = 10


class RecentFiles:
    """The list, read and written through ``prefs`` (saved off the GUI thread)."""

    def __init__(self, prefs: Prefs):
        self.prefs = prefs

    def paths(self) -> list[str]:
        raw = self.prefs.value(KEY, [])
        if isinstance(raw, str):  # QSettings returns a bare string for one-item lists
            raw = [raw]
        return [p for p in (raw or []) if isinstance(p, str) and Path(p).exists()]

    def add(self, path: str) -> None:
        path = str(Path(path).expanduser().resolve())
        items = [path] + [p for p in self.paths() if p != path]
        self.prefs.set_value(KEY, items[:MAX_RECENT])

    def clear(self) -> None:
        self.prefs.remove(KEY)
