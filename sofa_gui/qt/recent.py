"""Recently opened traces, kept in QSettings (most recent first, existing paths only)."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QSettings

KEY = "recent/paths"
MAX_RECENT = 10


class RecentFiles:
    def __init__(self, settings: QSettings):
        self.settings = settings

    def paths(self) -> list[str]:
        raw = self.settings.value(KEY, [])
        if isinstance(raw, str):  # QSettings returns a bare string for one-item lists
            raw = [raw]
        return [p for p in (raw or []) if isinstance(p, str) and Path(p).exists()]

    def add(self, path: str) -> None:
        path = str(Path(path).expanduser().resolve())
        items = [path] + [p for p in self.paths() if p != path]
        self.settings.setValue(KEY, items[:MAX_RECENT])

    def clear(self) -> None:
        self.settings.remove(KEY)
