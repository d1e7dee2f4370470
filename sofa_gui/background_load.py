"""Decode a trace in a child process so the GUI's Python thread never waits on the GIL.

Decoding a big JSON trace is one long C call (msgspec / orjson) that holds the GIL,
so a worker *thread* would freeze the GUI for as long. Instead a spawned child runs
:func:`~sofa_gui.core.importers.load_trace`, which writes the Arrow cache, and the
parent then memory-maps that cache (:func:`~sofa_gui.core.store.load_cached`), which
costs milliseconds. Progress and the outcome travel over a pipe; cancelling sets an
event the child's ``check_cancelled`` sees and, if it is stuck in a C call, kills it.

It lives outside ``sofa_gui.qt`` on purpose: the spawned child imports the
module that holds its entry point, and importing anything under ``sofa_gui.qt``
loads PySide6 and pyqtgraph (~0.6 s and tens of MB the child does not need).
Qt-free; used by :mod:`sofa_gui.qt.jobs`.

Like any ``multiprocessing`` spawn user, a script that starts the app must
guard its entry (``if __name__ == "__main__":``); the ``sofa-gui`` commands do,
and a frozen build must call ``multiprocessing.freeze_support()`` first.
"""

from __future__ import annotations

import gzip
import logging
import multiprocessing as mp
import os
import time
import traceback
import zlib
from pathlib import Path

from .core.errors import TraceFormatError
from .core.progress import Cancelled

log = logging.getLogger(__name__)

#: Seconds the child gets to stop by itself after a cancel before it is killed.
_GRACE_S = 0.3
_POLL_S = 0.05
_SEND_INTERVAL_S = 0.05
#: Niceness added to background work (child process, job threads) so the GUI
#: thread wins the CPU when cores are scarce.
BACKGROUND_NICE = 10


class _PipeProgress:
    """Core ``Progress`` in the child: throttled reports up the pipe, cancel via an event."""

    def __init__(self, conn, cancel_event):
        self._conn, self._cancel = conn, cancel_event
        self._last = 0.0

    def update(self, fraction: float, message: str = "") -> None:
        now = time.monotonic()
        if now - self._last >= _SEND_INTERVAL_S or fraction >= 1.0:
            self._last = now
            self._conn.send(("progress", float(fraction), message))
        self.check_cancelled()

    def check_cancelled(self) -> None:
        if self._cancel.is_set():
            raise Cancelled()


def _child_main(path: str, conn, cancel_event, options=None) -> None:
    """Child entry point: load (and cache) ``path``, send one outcome message; then, with
    analysis ``options``, analyze it into the analysis cache (the parent meanwhile
    indexes the timeline on the other core) and send ``("analysed",)``.

    When the cache cannot be written (read-only or full), the tables are handed
    over in a private temp folder instead, so the parent never decodes twice.
    """
    from .core import store
    from .core.importers import load_trace

    if hasattr(os, "nice"):
        os.nice(BACKGROUND_NICE)  # the GUI process gets the cores first
    progress = _PipeProgress(conn, cancel_event)
    try:
        trace = load_trace(path, progress, use_cache=True)
        cached = trace.cache_entry is not None  # load_trace read or wrote the cache
        handoff = None if cached else store.write_handoff(trace)
        conn.send(("done", cached, handoff and str(handoff)))
        if options is not None and cached:
            from .core.analysis.cache import analyze_cached

            analyze_cached(trace, options, progress=progress)
            conn.send(("analysed",))
    except Cancelled:
        conn.send(("cancelled",))
    except TraceFormatError as exc:
        conn.send(("error", exc.path, exc.reason))
    except BaseException as exc:  # report, never hang the parent
        conn.send(("crash", f"{type(exc).__name__}: {exc}", traceback.format_exc()))
    finally:
        conn.close()


def decoded_bytes(path: Path, enough: int) -> int:
    """Bytes the importers would read from ``path`` (a file or every file in a folder),
    gzip files counted *decompressed*, counted only up to ``enough``.

    A 200 KB gzip can hold 1 GB; guessing its size from the compressed one let such a
    file decode inside the app's process (issue 15 item 5). Counting costs at most
    ``enough`` bytes of decompression, in 64 KiB reads.
    """
    total = 0
    try:
        files = [path] if not path.is_dir() else (f for f in path.rglob("*") if f.is_file())
        for f in files:
            try:
                total += _decoded_size(f, enough - total)
            except OSError:
                continue  # unreadable: the importer says so; the others still count
            if total >= enough:
                break
    except OSError:
        pass  # the folder cannot be listed (further): count what was seen
    return total


def _decoded_size(path: Path, budget: int) -> int:
    with open(path, "rb") as raw:
        if raw.read(2) != b"\x1f\x8b":
            return os.fstat(raw.fileno()).st_size
        raw.seek(0)
        n = 0
        try:
            with gzip.GzipFile(fileobj=raw, mode="rb") as z:
                while n < budget:
                    got = len(z.read(min(1 << 16, budget - n)))
                    if not got:
                        break
                    n += got
        except (OSError, EOFError, zlib.error):
            pass  # corrupt: the importer says so, wherever it runs
        return n


class ChildLoad:
    """A child decoding ``path`` into the cache and, with ``options``, analyzing it after.

    :meth:`wait_trace` returns once the trace cache is written; the child then
    goes on with the analysis while the caller maps the trace, and
    :meth:`wait_analysis` waits for its results to be in the analysis cache.
    Always call :meth:`stop`.
    """

    def __init__(self, path: Path, state, options=None):
        ctx = mp.get_context("spawn")
        self._recv, send = ctx.Pipe(duplex=False)
        self._cancel = ctx.Event()
        self._state = state
        self._proc = ctx.Process(target=_child_main, args=(str(path), send, self._cancel, options),
                                 name="sofa-gui-loader", daemon=True)
        self._proc.start()
        send.close()
        state.on_cancel(self._cancel.set)

    def wait_trace(self, progress=None):
        """Wait for the decode; the child's progress goes to ``progress`` (default: the
        job's state). Returns True when the cache entry was written (the caller then
        reads it), the Trace itself when the cache was not writable and the child
        handed the tables over in a temp folder, False when neither worked. Raises
        TraceFormatError for bad input, Cancelled when cancelled, RuntimeError when
        the child died."""
        msg = _pump(self._proc, self._recv, self._state, progress or self._state, "done")
        return bool(msg[1]) or _take_handoff(msg[2])

    def wait_analysis(self, progress=None) -> bool:
        """True when the child stored the analysis; False if it died or failed doing so."""
        try:
            _pump(self._proc, self._recv, self._state, progress or self._state, "analysed")
        except (RuntimeError, TraceFormatError):
            log.warning("background analysis failed; analysing in-process", exc_info=True)
            return False
        return True

    def stop(self) -> None:
        _stop(self._proc, self._cancel)
        self._recv.close()


def _pump(proc, recv, state, progress, until: str) -> tuple:
    """Forward the child's progress until its ``until`` message, which is returned."""
    while True:
        if state.cancelled:
            raise Cancelled()
        if not recv.poll(_POLL_S):
            if not proc.is_alive() and not recv.poll(0):
                raise RuntimeError(f"trace loader process died (exit code {proc.exitcode})")
            continue
        try:
            msg = recv.recv()
        except EOFError:
            raise RuntimeError(
                f"trace loader process died (exit code {proc.exitcode})") from None
        tag = msg[0]
        if tag == "progress":
            progress.update(msg[1], msg[2])
        elif tag == until:
            return msg
        elif tag == "cancelled":
            raise Cancelled()
        elif tag == "error":
            raise TraceFormatError(msg[1], msg[2])
        else:
            raise RuntimeError(f"trace loader failed: {msg[1]}\n{msg[2]}")


def _take_handoff(folder: str | None):
    """The trace in the child's handoff folder (then removed; the maps keep it), or False."""
    from .core import store

    if folder is None:
        return False
    try:
        return store.read_handoff(Path(folder))
    except Exception as exc:  # damaged or vanished: the caller decodes in-process
        log.warning("could not read the loader's handoff (%s)", exc)
        return False


def _stop(proc, cancel_event) -> None:
    """Let the child exit; kill it if a cancel left it stuck in a long C call."""
    if proc.is_alive():
        cancel_event.set()
        proc.join(_GRACE_S)
    if proc.is_alive():
        proc.kill()
        proc.join(1.0)
    if hasattr(proc, "close") and not proc.is_alive():
        proc.close()


def child_available() -> bool:
    """False where spawning would not work (set SOFA_GUI_LOAD_IN_THREAD=1 to force)."""
    return os.environ.get("SOFA_GUI_LOAD_IN_THREAD", "") not in ("1", "true", "yes")
