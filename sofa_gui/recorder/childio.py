"""The child's stdout/stderr: pumped to ``output.log``, echoed, and handed to a callback.

Reading uses ``select`` with a short timeout so the pumps can be stopped even
when a grandchild that outlives the child still holds the pipes open.

The recorded command must never be hurt by the recorder: when the log cannot be
written (full disk) the pumps keep draining the pipes, and what could not be
written is counted (``dropped``, ``error``) instead of stopping the reader,
which would close the pipes and kill the child with a broken pipe.
"""

from __future__ import annotations

import os
import select
import threading
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO


class OutputPump:
    """Two reader threads (stdout, stderr) writing into one log in arrival order."""

    def __init__(self, log_path: Path, echo: dict[str, BinaryIO] | None = None,
                 on_output: Callable[[str, bytes], None] | None = None):
        self._log = open(log_path, "ab")
        self._lock = threading.Lock()
        self._echo = echo or {}
        self._on_output = on_output
        self._halt = threading.Event()
        self._threads: list[threading.Thread] = []
        self.bytes = 0
        self.dropped = 0  # bytes the log could not take
        self.error: str | None = None  # why (the first write failure)

    def start(self, stdout: BinaryIO | None, stderr: BinaryIO | None) -> None:
        for name, pipe in (("stdout", stdout), ("stderr", stderr)):
            if pipe is None:
                continue
            t = threading.Thread(target=self._pump, args=(name, pipe), daemon=True,
                                 name=f"sofa-{name}-pump")
            t.start()
            self._threads.append(t)

    def _pump(self, name: str, pipe: BinaryIO) -> None:
        fd = pipe.fileno()
        try:
            while True:
                ready, _, _ = select.select([fd], [], [], 0.2)
                if not ready:
                    if self._halt.is_set():
                        return
                    continue
                chunk = os.read(fd, 65536)
                if not chunk:
                    return
                self._deliver(name, chunk)
        except (OSError, ValueError):
            return
        finally:
            try:
                pipe.close()
            except OSError:
                pass

    def _deliver(self, name: str, chunk: bytes) -> None:
        with self._lock:
            self._write_log(chunk)
        out = self._echo.get(name)
        if out is not None:
            try:
                out.write(chunk)
                out.flush()
            except (OSError, ValueError):
                pass
        if self._on_output is not None:
            self._on_output(name, chunk)

    def _write_log(self, chunk: bytes) -> None:
        """Append to the log; after a failure drop (and count) the rest."""
        if self.error is None:
            try:
                self._log.write(chunk)
                self._log.flush()
                self.bytes += len(chunk)
                return
            except (OSError, ValueError) as exc:
                self.error = getattr(exc, "strerror", None) or str(exc)
        self.dropped += len(chunk)

    def close(self, timeout_s: float = 3.0) -> None:
        """Drain what the child wrote, then stop (even if a grandchild keeps the pipe)."""
        for t in self._threads:
            t.join(timeout_s)
        self._halt.set()
        for t in self._threads:
            t.join(1.0)
        with self._lock:
            try:
                self._log.close()
            except OSError as exc:  # the buffered tail could not be written
                self.error = self.error or exc.strerror or str(exc)
