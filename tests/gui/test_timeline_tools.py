"""The timeline's hands: right-click, Shift-click measure, M and ruler-click markers."""

from __future__ import annotations

import numpy as np
from PySide6 import QtCore
from PySide6.QtTest import QTest
from timeline_fixtures import BASE, US, small_trace

from sofa_gui.core.trace import Kind
from sofa_gui.view.markers import MarkerSet, Measure

RIGHT = QtCore.Qt.MouseButton.RightButton
LEFT = QtCore.Qt.MouseButton.LeftButton
SHIFT = QtCore.Qt.KeyboardModifier.ShiftModifier
NONE = QtCore.Qt.KeyboardModifier.NoModifier


def _kernel(w, trace):
    k = int(np.flatnonzero(trace.slices.kind == int(Kind.KERNEL))[0])
    top, _h = w.model.row_span(w.model.slice_row(k))
    return k, top + 0.5


def test_right_click_on_a_slice_selects_it_and_asks_for_its_menu(make_timeline, qtbot):
    trace = small_trace()
    w = make_timeline(trace)
    k, y = _kernel(w, trace)
    with qtbot.waitSignal(w.context_requested, timeout=2000) as sig:
        QTest.mouseClick(w.graphics_view().viewport(), RIGHT, NONE,
                         w.view_point(BASE + 500 * US, y))
    assert sig.args[0] == k and w.view.selected_slice == k
    assert isinstance(sig.args[1], QtCore.QPoint)


def test_shift_click_twice_measures_and_the_delta_stays(make_timeline, qtbot):
    trace = small_trace()
    w = make_timeline(trace)
    viewport = w.graphics_view().viewport()
    QTest.mouseClick(viewport, LEFT, SHIFT, w.view_point(BASE + 200 * US, 0.5))
    assert w.marks.measure.a is not None and not w.marks.measure.done
    QTest.mouseClick(viewport, LEFT, SHIFT, w.view_point(BASE + 500 * US, 0.5))
    m = w.marks.measure
    assert m.done and abs(abs(m.b - m.a) - 300 * US) < 5 * US  # a pixel or two
    assert w.marks.measure_text().startswith("Δ ") and "µs" in w.marks.measure_text()
    assert w.view.selected_slice == -1  # a measuring click selects nothing
    w.zoom_to(BASE, BASE + 900 * US)  # still drawn after a zoom
    assert w.marks.measure.done
    w.marks.clear_measure()
    assert w.marks.measure.a is None


def test_m_marks_the_selected_slice_and_a_ruler_click_marks_a_time(make_timeline, qtbot):
    trace = small_trace()
    w = make_timeline(trace)
    k, _y = _kernel(w, trace)
    w.view.select_slice(k)
    QTest.keyClick(w.graphics_view(), QtCore.Qt.Key.Key_M)
    marker = w.marks.markers.items[0]
    assert marker.at_ns == float(trace.slices.start[k] - w.model.t0)
    assert "gemm_kernel" in marker.name
    axis = w.time_axis
    scene = axis.mapToScene(QtCore.QPointF(axis.boundingRect().width() / 2, 5))
    QTest.mouseClick(w.graphics_view().viewport(), LEFT, NONE,
                     w.graphics_view().mapFromScene(scene))
    assert len(w.marks.markers) == 2
    assert w.marks.markers.items[1].name == "M2"


def test_markers_round_trip_and_ignore_bad_saved_text():
    ms = MarkerSet()
    ms.add(5.0, "start")
    ms.add(1.0)
    again = MarkerSet.from_json(ms.to_json())
    assert [(m.name, m.at_ns) for m in again.items] == [("M2", 1.0), ("start", 5.0)]
    assert len(MarkerSet.from_json("not json")) == 0
    assert len(MarkerSet.from_json('[{"at_ns": "x"}, 3, {"name": "ok", "at_ns": 2}]')) == 1
    m = Measure()
    m.click(10.0)
    m.click(2_000_010.0)
    assert m.text() == "Δ 2.00 ms" or m.text().startswith("Δ 2")
    m.click(1.0)  # a third click starts anew
    assert not m.done
