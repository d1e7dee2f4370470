"""Worker semantics: partial results, newest request wins, cancel, errors."""

from __future__ import annotations

import threading

import pytest

from sofa_gui.core.errors import TraceFormatError
from sofa_gui.core.progress import Cancelled
from sofa_gui.qt.worker import Worker


@pytest.fixture
def worker(qtbot):
    w = Worker()
    yield w
    w.shutdown()


def _record(worker):
    got = []
    worker.result.connect(lambda payload: got.append(("result", payload)))
    worker.finished.connect(lambda: got.append(("finished", None)))
    worker.failed.connect(lambda p, r: got.append(("failed", (p, r))))
    worker.crashed.connect(lambda m: got.append(("crashed", m)))
    worker.cancelled.connect(lambda: got.append(("cancelled", None)))
    return got


def test_partial_results_then_finished(worker, qtbot):
    got = _record(worker)

    def job(state):
        state.update(0.5, "half")
        state.partial(1)
        state.partial(2)

    with qtbot.waitSignal(worker.finished, timeout=5000):
        worker.start(job)
    assert got == [("result", 1), ("result", 2), ("finished", None)]
    assert not worker.busy


def test_stale_results_of_a_replaced_job_are_dropped(worker, qtbot):
    got = _record(worker)
    release = threading.Event()

    def slow(state):
        release.wait(5)
        state._emit(state.gen, "result", "old")  # bypasses the cancel check on purpose

    def fast(state):
        state.partial("new")

    worker.start(slow)
    with qtbot.waitSignal(worker.finished, timeout=5000):
        worker.start(fast)
    release.set()
    assert worker.wait_idle(5)
    qtbot.wait(50)  # let any queued emission of the old job arrive
    assert ("result", "old") not in got
    assert got == [("result", "new"), ("finished", None)]


def test_cancel_stops_a_cooperative_job_and_runs_hooks(worker, qtbot):
    got = _record(worker)
    started, hooked = threading.Event(), threading.Event()
    seen = {}

    def job(state):
        state.on_cancel(hooked.set)
        started.set()
        while True:
            try:
                state.check_cancelled()
            except Cancelled:
                seen["cancelled"] = True
                raise
            threading.Event().wait(0.01)

    worker.start(job)
    assert started.wait(5)
    with qtbot.waitSignal(worker.cancelled, timeout=5000):
        worker.cancel()
    assert hooked.is_set()
    assert worker.wait_idle(5)
    assert seen == {"cancelled": True}
    assert got == [("cancelled", None)]
    assert not worker.busy


def test_bad_input_and_bugs_are_reported_separately(worker, qtbot):
    got = _record(worker)

    def bad(state):
        raise TraceFormatError("/x.json", "not JSON")

    def bug(state):
        raise ZeroDivisionError("oops")

    with qtbot.waitSignal(worker.failed, timeout=5000):
        worker.start(bad)
    with qtbot.waitSignal(worker.crashed, timeout=5000):
        worker.start(bug)
    assert got == [("failed", ("/x.json", "not JSON")), ("crashed", "ZeroDivisionError: oops")]


def test_progress_is_throttled(worker, qtbot):
    fractions = []
    worker.progress.connect(lambda f, m: fractions.append(f))

    def job(state):
        for k in range(10001):
            state.update(k / 10000, "working")

    with qtbot.waitSignal(worker.finished, timeout=10000):
        worker.start(job)
    assert 1 <= len(fractions) <= 220  # 10,001 reports, a few hundred signals at most
    assert fractions[-1] == 1.0
