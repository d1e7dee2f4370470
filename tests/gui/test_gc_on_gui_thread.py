"""While the app runs, Python's cyclic garbage collector runs on the GUI thread only (a
collection on a job thread frees Qt wrappers whose deletion PySide6 then runs inside a
layout pass): driven through the real start-up (``run_from_args``) on a corpus capture."""

from __future__ import annotations

import argparse
import gc
import shutil
import threading
import weakref
from pathlib import Path

import pytest

from sofa_gui.qt import collector

CAPTURE = (Path(__file__).resolve().parents[1] / "data" / "corpus" / "pt_train_compute_cnn"
           / "capture-1.json.gz")
OPEN_TIMEOUT_MS = 120_000


class Node:
    """One end of a reference cycle (weak-referenceable, so its death can be seen)."""

    def __init__(self):
        self.other = None


def _cycles_on_a_job_thread(n: int) -> weakref.ref:
    """Make ``n`` unreachable two-node cycles on another thread (far more allocations than
    generation 0's threshold); a weak reference to one of them."""
    probe: list[weakref.ref] = []

    def job():
        for _ in range(n):
            a, b = Node(), Node()
            a.other, b.other = b, a
        probe.append(weakref.ref(a))

    t = threading.Thread(target=job)
    t.start()
    t.join()
    return probe[0]


def _open(qtbot, win, path: Path):
    win.open_path(str(path))
    qtbot.waitUntil(lambda: win.session.analysis_done and not win.session.busy,
                    timeout=OPEN_TIMEOUT_MS)
    return win.session.trace


def _full_collection(qtbot, gc_timer) -> None:
    """Allocate (as a busy app does: collections follow allocations) until the timer has
    run one more full collection."""
    done = gc_timer.collected[2]

    def allocated_and_collected() -> bool:
        for _ in range(1_000):  # cycles outlive their statement: past generation 0's
            loop: list = []     # threshold at every tick
            loop.append(loop)
        return gc_timer.collected[2] > done

    qtbot.waitUntil(allocated_and_collected, timeout=30_000)


@pytest.mark.skipif(not CAPTURE.is_file(), reason="no diagnosis corpus")
def test_the_app_collects_garbage_on_the_gui_thread_only(qtbot, qapp, tmp_path, monkeypatch):
    from sofa_gui.app.background_load import stop_spares
    from sofa_gui.qt import app as app_mod
    from sofa_gui.qt.main_window import MainWindow

    monkeypatch.setenv("SOFA_GUI_SETTINGS", str(tmp_path / "s.ini"))
    monkeypatch.setattr(collector, "TICK_MS", 20)
    monkeypatch.setattr(collector, "FULL_EVERY_S", 0.2)
    started = []
    real_start = collector.start
    monkeypatch.setattr(collector, "start", lambda parent=None: started.append(
        real_start(parent)) or started[-1])
    trace = tmp_path / "run.json.gz"
    shutil.copy(CAPTURE, trace)
    gui = threading.get_ident()
    threads: list[int] = []

    def on_gc(phase, _info):
        if phase == "stop":
            threads.append(threading.get_ident())

    seen = {}

    def fake_exec(*_a):
        win = next(w for w in qapp.topLevelWidgets()
                   if isinstance(w, MainWindow) and w.isVisible())
        seen["enabled"] = gc.isenabled()
        gc.callbacks.append(on_gc)
        try:
            if not seen["enabled"]:
                probe = _cycles_on_a_job_thread(20_000)
                qtbot.waitUntil(lambda: probe() is None, timeout=10_000)
                seen["counts"] = _reopened_counts(qtbot, win, trace, started[0])
                seen["after_jobs"] = gc.isenabled()
        finally:
            gc.callbacks.remove(on_gc)
            win.close()
            win.deleteLater()
        return 0

    monkeypatch.setattr(type(qapp), "exec", fake_exec)
    args = argparse.Namespace(command="view", path=None, screenshot=None, iteration=None,
                              size="780x560", iterations="auto")
    was, limits = gc.isenabled(), gc.get_threshold()
    gc.set_threshold(limits[0], 1, 1)  # full collections after a few young ones
    try:
        assert app_mod.run_from_args(args) == 0
    finally:
        stop_spares()  # run_window started a spare loader for the next open
        gc.set_threshold(*limits)
        if not was:
            gc.disable()
    assert seen["enabled"] is False, "automatic collection on while the window lives"
    assert seen["after_jobs"] is False
    assert threads and set(threads) == {gui}, "a collection ran off the GUI thread"
    assert gc.isenabled() is was  # put back on exit
    first, *later = seen["counts"]
    assert max(later) - min(later) < 0.02 * first, seen["counts"]  # no growth per open


def _reopened_counts(qtbot, win, path: Path, gc_timer) -> list[int]:
    """Open ``path`` four times; the objects the collector tracks after each open (and a
    full collection by the timer); each open frees the trace before."""
    counts, before = [], None
    for _ in range(4):
        t = _open(qtbot, win, path)
        if before is not None:
            _full_collection(qtbot, gc_timer)
            assert before() is None, "the trace opened before is still alive"
        before = weakref.ref(t)
        del t
        _full_collection(qtbot, gc_timer)
        counts.append(len(gc.get_objects()))
    return counts


def test_the_policy_follows_the_thresholds_and_holds_full_collections_back(qapp, monkeypatch):
    now = [100.0]
    c = collector.GuiThreadCollector(tick_ms=1000, full_every_s=10, clock=lambda: now[0])
    monkeypatch.setattr(gc, "get_threshold", lambda: (700, 10, 10))
    for counts, due in (((10, 20, 20), None), ((701, 3, 0), 0), ((701, 11, 3), 1),
                        ((701, 11, 11), 1)):
        monkeypatch.setattr(gc, "get_count", lambda counts=counts: counts)
        assert c.generation_due() == due, counts
    now[0] += 10  # the last full collection is old enough
    assert c.generation_due() == 2
    monkeypatch.setattr(gc, "get_threshold", lambda: (0, 10, 10))  # collection switched off
    assert c.generation_due() is None


def test_automatic_collection_turned_back_on_is_turned_off_again(qapp):
    was = gc.isenabled()
    c = collector.start()
    try:
        assert not gc.isenabled()
        gc.enable()  # a library's own disable/enable pair
        c.tick()
        assert not gc.isenabled()
    finally:
        c.stop()
    assert gc.isenabled() is was
