"""Background jobs for the GUI: one job at a time, newest wins, cooperative cancel.

A job is a plain function ``fn(state, *args)`` run on a Python thread. It reports
progress and partial results through ``state`` (a :class:`JobState`); the
:class:`Worker` re-emits them on the GUI thread only while the job's generation is
the current one, so results of a job that a newer request replaced are dropped.
Cancelling sets the job's :class:`~sofa_gui.core.progress.CancelToken` (core code
raises :class:`~sofa_gui.core.progress.Cancelled` at its next check) and runs the
job's cancel hooks (e.g. killing a loader child process).
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
import traceback

from PySide6.QtCore import QObject, Signal, Slot

from ..app.background_load import BACKGROUND_NICE
from ..core.errors import TraceFormatError
from ..core.progress import Cancelled, CancelToken

log = logging.getLogger(__name__)

#: Minimum change in fraction, or seconds, between two progress signals (no floods).
_PROGRESS_STEP = 0.005
_PROGRESS_INTERVAL = 0.05


class JobState:
    """What a running job sees: progress (a core ``Progress``), partial results, cancel."""

    def __init__(self, gen: int, emit):
        self.gen = gen
        self._emit = emit
        self._hooks: list = []
        self._lock = threading.Lock()
        self._last = (-1.0, "", 0.0)
        self.token = CancelToken(self._on_progress)

    # -- core Progress protocol ---------------------------------------------------
    def update(self, fraction: float, message: str = "") -> None:
        self.token.update(fraction, message)

    def check_cancelled(self) -> None:
        self.token.check_cancelled()

    def _on_progress(self, fraction: float, message: str) -> None:
        last_f, last_m, last_t = self._last
        now = time.monotonic()
        if message == last_m and fraction - last_f < _PROGRESS_STEP and fraction < 1.0:
            return
        if message == last_m and now - last_t < _PROGRESS_INTERVAL and fraction < 1.0:
            return
        self._last = (fraction, message, now)
        self._emit(self.gen, "progress", (float(fraction), message))

    # -- results and cancellation -------------------------------------------------
    def partial(self, payload) -> None:
        """Hand a partial result to the GUI thread; raises if cancelled."""
        self.check_cancelled()
        self._emit(self.gen, "result", payload)

    def on_cancel(self, hook) -> None:
        """Call ``hook()`` (from the GUI thread) when this job is cancelled."""
        with self._lock:
            self._hooks.append(hook)
            run_now = self.token.cancelled
        if run_now:
            hook()

    def cancel(self) -> None:
        self.token.cancel()
        with self._lock:
            hooks, self._hooks = list(self._hooks), []
        for hook in hooks:
            try:
                hook()
            except Exception:  # a hook failing must not stop cancellation
                log.exception("cancel hook failed")

    @property
    def cancelled(self) -> bool:
        return self.token.cancelled


def _lower_thread_priority() -> None:
    """Make this (job) thread yield the CPU to the GUI thread (Linux: per-thread nice)."""
    if sys.platform.startswith("linux") and hasattr(os, "setpriority"):
        try:
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), BACKGROUND_NICE)
        except OSError:
            pass


class Worker(QObject):
    """Runs one job at a time off the GUI thread; a new job cancels the previous one.

    Signals (GUI thread, current generation only): ``progress(fraction, message)``,
    ``result(payload)`` for each partial result, then exactly one of
    ``finished()``, ``failed(path, reason)`` (bad input), ``crashed(message)``
    (a bug), ``cancelled()``.
    """

    progress = Signal(float, str)
    result = Signal(object)
    finished = Signal()
    failed = Signal(str, str)
    crashed = Signal(str)
    cancelled = Signal()
    busy_changed = Signal(bool)

    _event = Signal(int, str, object)  # gen, kind, payload; emitted from job threads

    def __init__(self, parent: QObject | None = None):
        super().__init__(parent)
        self._gen = 0
        self._state: JobState | None = None
        self._threads: list[threading.Thread] = []
        self._event.connect(self._on_event)

    @property
    def generation(self) -> int:
        return self._gen

    @property
    def busy(self) -> bool:
        return self._state is not None

    def start(self, fn, *args) -> int:
        """Cancel the running job, start ``fn(state, *args)``; returns its generation."""
        self.cancel(notify=False)
        self._gen += 1
        state = JobState(self._gen, self._event.emit)
        self._state = state
        t = threading.Thread(target=self._run, args=(state, fn, args),
                             name=f"sofa-job-{self._gen}", daemon=True)
        self._threads = [x for x in self._threads if x.is_alive()] + [t]
        t.start()
        self.busy_changed.emit(True)
        return self._gen

    def cancel(self, notify: bool = True) -> None:
        """Cancel the running job (its results will be dropped)."""
        state, self._state = self._state, None
        if state is None:
            return
        state.cancel()
        self._gen += 1  # anything the old job still emits is now stale
        if notify:
            self.cancelled.emit()
            self.busy_changed.emit(False)

    def shutdown(self, timeout: float = 2.0) -> None:
        """Cancel and wait a little for job threads (they are daemons either way)."""
        self.cancel(notify=False)
        deadline = time.monotonic() + timeout
        for t in self._threads:
            t.join(max(0.0, deadline - time.monotonic()))

    def wait_idle(self, timeout: float = 30.0) -> bool:
        """Join the job threads (tests and the screenshot path use it)."""
        deadline = time.monotonic() + timeout
        for t in list(self._threads):
            t.join(max(0.0, deadline - time.monotonic()))
        return not any(t.is_alive() for t in self._threads)

    # -- job thread -----------------------------------------------------------------
    @staticmethod
    def _run(state: JobState, fn, args) -> None:
        emit = state._emit
        _lower_thread_priority()
        try:
            fn(state, *args)
        except Cancelled:
            emit(state.gen, "_cancelled", None)
        except TraceFormatError as exc:
            emit(state.gen, "_failed", (exc.path, exc.reason))
        except Exception as exc:
            log.error("background job failed:\n%s", traceback.format_exc())
            emit(state.gen, "_crashed", f"{type(exc).__name__}: {exc}")
        else:
            emit(state.gen, "_finished", None)

    # -- GUI thread -----------------------------------------------------------------
    @Slot(int, str, object)
    def _on_event(self, gen: int, kind: str, payload) -> None:
        if gen != self._gen or self._state is None:
            return  # stale: a newer job replaced it, or it was cancelled
        if kind == "progress":
            self.progress.emit(*payload)
        elif kind == "result":
            self.result.emit(payload)
        elif kind.startswith("_"):
            self._state = None
            if kind == "_finished":
                self.finished.emit()
            elif kind == "_failed":
                self.failed.emit(*payload)
            elif kind == "_crashed":
                self.crashed.emit(payload)
            else:
                self.cancelled.emit()
            self.busy_changed.emit(False)
