"""GUI test fixtures: skip the whole folder without PySide6/pyqtgraph."""

from __future__ import annotations

import pytest

pytest.importorskip("PySide6")
pytest.importorskip("pyqtgraph")


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
