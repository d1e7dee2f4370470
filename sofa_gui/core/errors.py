"""Errors the core raises on purpose, so callers can tell bad input from bugs."""

from __future__ import annotations

from pathlib import Path


class TraceFormatError(Exception):
    """A trace file or folder cannot be read; carries the path and a one-line reason.

    The CLI prints ``error: PATH: REASON`` and exits 2; the GUI shows a dialog.
    """

    def __init__(self, path: str | Path, reason: str):
        self.path = str(path)
        self.reason = one_line(reason)
        super().__init__(f"{self.path}: {self.reason}")


def one_line(text: str, limit: int = 300) -> str:
    """``text`` on one line, at most ``limit`` characters: library messages (pyarrow's,
    sqlite's) span lines and may quote huge input, but the CLI promises one line."""
    flat = "; ".join(part.strip() for part in str(text).splitlines() if part.strip())
    flat = flat or "unreadable"
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
