"""Track management: device lanes first, drag a group to reorder, pin, resize the labels,
and the order comes back for the next trace of the same kind."""

from __future__ import annotations

from PySide6 import QtCore
from PySide6.QtWidgets import QApplication
from test_timeline_interaction import drag

from sofa_gui.core.samples import demo_trace_path


def _header_point(w, group: str) -> QtCore.QPoint:
    line = next(ln for ln in w.timeline.model.layout.lines if ln.group == group
                and ln.kind == "group")
    labels = w.timeline.label_column()
    scene = w.timeline.view_box().mapViewToScene(QtCore.QPointF(0, line.top + line.height / 2))
    x = labels.mapToScene(QtCore.QPointF(40, 0)).x()
    return w.timeline.graphics_view().mapFromScene(QtCore.QPointF(x, scene.y()))


def test_device_first_drag_pin_resize_and_remembered(qtbot, open_window):
    w = open_window(demo_trace_path(), (1280, 800))
    m = w.timeline.model
    groups = m.groups()
    assert groups[0] == "GPU 0"  # device lanes first by default
    host = next(g for g in groups if g.startswith("process python"))
    view = w.timeline.graphics_view().viewport()
    drag(view, _header_point(w, host), _header_point(w, "GPU 0"))  # host onto GPU: above it
    assert m.groups().index(host) < m.groups().index("GPU 0")
    labels = w.timeline.label_column()
    dict(labels.pin_actions("Traces"))["Pin to top"]()
    assert m.groups()[0] == "Traces" and m.pinned == ["Traces"]
    # a press within the double-click interval of the last release is a double click
    qtbot.wait(QApplication.doubleClickInterval() + 50)
    edge = labels.mapToScene(QtCore.QPointF(labels.width() - 2, 60))
    a = w.timeline.graphics_view().mapFromScene(edge)
    drag(view, a, a + QtCore.QPoint(90, 0))
    qtbot.wait(50)
    assert labels.maximumWidth() >= 290 and labels.width() >= 290
    state = w.timeline.track_state()
    # the next trace of the same kind opens with the same order, pins and width
    w.open_path(demo_trace_path())
    qtbot.waitUntil(lambda: w.session.analysis_done, timeout=120_000)
    assert w.timeline.track_state() == state
    assert w.timeline.model.groups()[:2] == ["Traces", host]
