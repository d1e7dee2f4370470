"""Side work of an analysis step, run in a forked child while the next steps go on.

In the auto iteration mode the annotated steps are checked against the pattern
detector: about a third of the analysis time, for the one ``agreement`` entry of
the result. When nobody watches the parts as they come (``on_result`` is None: the
CLI, the app's loader child) and the process runs one thread, :func:`analyze`
lets that check run in a ``fork`` child, which sees the trace copy-on-write, and
takes its result after the last step. Anything that goes wrong in the child means
the work is done in-process after all: the result is the same either way. Results
travel as the analysis cache's data-only msgpack codec (:mod:`.codec`), never pickle.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextvars import ContextVar

from .codec import Unsupported, dumps, loads

_pending: ContextVar[list | None] = ContextVar("sofa_gui_aside", default=None)


def _can_fork() -> bool:
    """One Python thread and no Qt (whose native threads a fork would not carry)."""
    return hasattr(os, "fork") and threading.active_count() == 1 and "PySide6" not in sys.modules


@contextlib.contextmanager
def allowed(enabled: bool = True) -> Iterator[None]:
    """Within this block :func:`aside` may fork; its results are handed over on leaving."""
    if not enabled or not _can_fork() or _pending.get() is not None:
        yield
        return
    jobs: list = []
    token = _pending.set(jobs)
    try:
        yield
        while jobs:
            jobs.pop(0).finish()
    finally:
        _pending.reset(token)
        for job in jobs:
            job.kill()


def aside(fn: Callable, args: tuple, then: Callable) -> bool:
    """Start ``fn(*args)`` in a forked child; ``then(result)`` runs when the enclosing
    :func:`allowed` block ends. False (nothing started) outside such a block."""
    jobs = _pending.get()
    if jobs is None or not _can_fork():
        return False
    try:
        jobs.append(_Job(fn, args, then))
    except OSError:
        return False
    return True


def start(fn: Callable, args: tuple) -> _Job | None:
    """Start ``fn(*args)`` in a forked child now, for a caller that takes it back with
    ``job.result()`` before going on (one step split over two cores). None (nothing
    started: compute in-process) where :func:`aside` would not fork."""
    jobs = _pending.get()
    if jobs is None or not _can_fork():
        return None
    try:
        job = _Job(fn, args, None)
    except OSError:
        return None
    jobs.append(job)  # killed with the others if the block is left by an exception
    return job


class _Job:
    def __init__(self, fn: Callable, args: tuple, then: Callable | None):
        self._fn, self._args, self._then = fn, args, then
        self._done, self._value = False, None
        r, w = os.pipe()
        self._pid = os.fork()
        if self._pid == 0:  # the child: compute, send, leave without cleanup handlers
            os.close(r)
            _child(w, fn, args)
        os.close(w)
        self._r = r

    def result(self):
        """The child's result (waited for once); computed here if the child failed."""
        if self._done:
            return self._value
        with os.fdopen(self._r, "rb") as f:
            data = f.read()
        self._r = -1
        _, status = os.waitpid(self._pid, 0)
        self._pid = 0
        ok, value = False, None
        if status == 0 and data:
            try:
                ok, value = loads(data)
            except (Unsupported, ValueError, TypeError):
                ok = False  # a child killed mid-write: do the work here
        self._value = value if ok else self._fn(*self._args)
        self._done = True
        return self._value

    def finish(self) -> None:
        value = self.result()
        if self._then is not None:
            self._then(value)

    def kill(self) -> None:
        if self._pid:
            with contextlib.suppress(OSError):
                os.kill(self._pid, signal.SIGKILL)
                os.waitpid(self._pid, 0)
        if self._r >= 0:
            with contextlib.suppress(OSError):
                os.close(self._r)


def _child(w: int, fn: Callable, args: tuple) -> None:
    code = 1
    try:
        try:
            data = dumps((True, fn(*args)))
        except BaseException:
            data = dumps((False, None))
        with os.fdopen(w, "wb") as f:
            f.write(data)
        code = 0
    finally:
        os._exit(code)
