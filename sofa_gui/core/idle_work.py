"""Optional work a caller hands to core code that would otherwise sit waiting.

The parallel decode waits for its worker processes; meanwhile the CLI's next stage can
import what it needs (:func:`while_idle` registers it, the waiting code calls
:func:`run_idle_work`). Kept apart from :mod:`.progress`, which only reports progress.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator
from contextvars import ContextVar

_idle: ContextVar[list | None] = ContextVar("sofa_gui_idle_work", default=None)


@contextlib.contextmanager
def while_idle(*work: Callable[[], None]) -> Iterator[None]:
    """Within this block, core code that would sit waiting for other processes (the
    parallel decode's workers) runs ``work`` meanwhile, once: e.g. the imports the next
    stage needs anyway, taken off the path to the result."""
    token = _idle.set(list(work))
    try:
        yield
    finally:
        _idle.reset(token)


def idle_work_pending() -> bool:
    """Whether :func:`run_idle_work` has work to run (the caller may plan around it)."""
    return bool(_idle.get())


def run_idle_work() -> None:
    """Run what :func:`while_idle` registered (each once). Optional work: a failure is
    logged, never raised into the caller (its stage does the work again and reports)."""
    work = _idle.get()
    while work:
        fn = work.pop(0)
        try:
            fn()
        except Exception:  # optional work: see the docstring
            logging.getLogger(__name__).debug("idle work %r failed", fn, exc_info=True)
