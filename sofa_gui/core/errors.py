"""Errors the core raises on purpose, so callers can tell bad input from bugs."""

from __future__ import annotations

from pathlib import Path


class TraceFormatError(Exception):
    """A trace file or folder cannot be read; carries the path and a one-line reason.

    The CLI prints ``error: PATH: REASON`` and exits 2; the GUI shows a dialog.
    """

    def __init__(self, path: str | Path, reason: str):
        self.path = str(path)
        self.reason = reason
        super().__init__(f"{self.path}: {reason}")
