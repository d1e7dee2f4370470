"""GUI test fixtures: skip the whole folder without PySide6/pyqtgraph."""

from __future__ import annotations

import gc

import pytest

pytest.importorskip("PySide6")
pytest.importorskip("pyqtgraph")


@pytest.fixture(autouse=True)
def collected_on_the_gui_thread():
    """Python's collector frees Qt wrappers on whichever thread allocates when it runs;
    PySide6 then defers their C++ deletion to the GUI thread, which can run it inside a
    layout pass and block on the object's own mutex (a hang in ``QObject::~QObject`` under
    ``WrapLabel.sizeHint``). Collecting after every GUI test frees the test's widgets on
    the GUI thread instead."""
    yield
    gc.collect()


@pytest.fixture
def make_timeline(qtbot):
    """``make_timeline(trace, size=(1000, 600))`` -> a shown TimelineWidget."""
    from sofa_gui.qt.timeline import TimelineWidget

    def make(trace=None, size=(1000, 600)):
        w = TimelineWidget()
        qtbot.addWidget(w)
        w.resize(*size)
        w.show()
        qtbot.waitExposed(w)
        if trace is not None:
            w.set_trace(trace)
        return w

    return make


@pytest.fixture
def open_window(qtbot, tmp_path):
    """``open_window(path, size=(1400, 900))`` -> a shown MainWindow (own settings file)
    with ``path`` opened and analyzed; shut down after the test."""
    from PySide6.QtCore import QSettings
    from test_app_window import open_and_wait

    from sofa_gui.qt.main_window import MainWindow

    made = []

    def make(path, size=(1400, 900)):
        w = MainWindow(QSettings(str(tmp_path / f"s{len(made)}.ini"),
                                 QSettings.Format.IniFormat), restore_state=False)
        qtbot.addWidget(w)
        made.append(w)
        w.resize(*size)
        w.show()
        qtbot.waitExposed(w)
        if path is not None:
            open_and_wait(qtbot, w, path)
        return w

    yield make
    for w in made:
        w.session.shutdown()


@pytest.fixture
def docked(open_window):
    """``docked(key)`` -> a window on the bundled sample with dock ``key`` raised."""
    from sofa_gui.core.samples import demo_trace_path

    def make(key: str):
        w = open_window(demo_trace_path())
        w.docks[key].raise_()
        return w

    return make
