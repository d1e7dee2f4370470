"""View boxes that turn mouse gestures into intents; the widget owns the range.

Left-drag draws a rubber band and zooms to it; Ctrl+drag selects a time range over
the lanes it crosses (area selection, aggregated in Statistics); middle-drag or Shift+drag pans
(time and lanes); the wheel zooms around the cursor (Shift+wheel scrolls the
lanes, a horizontal wheel pans); click selects, Shift+click places a measurement point,
right-click asks for the slice's context menu; hovering shows a tooltip.
"""

from __future__ import annotations

from typing import Protocol

import pyqtgraph as pg
from PySide6 import QtCore

_LEFT = QtCore.Qt.MouseButton.LeftButton
_MIDDLE = QtCore.Qt.MouseButton.MiddleButton
_SHIFT = QtCore.Qt.KeyboardModifier.ShiftModifier
_CTRL = QtCore.Qt.KeyboardModifier.ControlModifier
#: Zoom factor per wheel notch (120 units).
WHEEL_ZOOM = 0.8


class TimelineIntents(Protocol):
    def zoom_around(self, x: float, factor: float) -> None: ...
    def pan_by(self, dx: float, dy_units: float) -> None: ...
    def rubber_band(self, x_from: float, x_to: float, finished: bool) -> None: ...
    def area_drag(self, start, end, finished: bool) -> None: ...
    def click_at(self, x: float, y: float, double: bool) -> None: ...
    def context_at(self, x: float, y: float, screen_pos) -> None: ...
    def measure_at(self, x: float) -> None: ...
    def hover_at(self, x: float | None, y: float | None, screen_pos) -> None: ...
    def scroll_rows(self, units: float) -> None: ...


class TimelineViewBox(pg.ViewBox):
    """Main view box: x is ns from trace start, y row units (downwards)."""

    def __init__(self, owner: TimelineIntents):
        super().__init__(enableMenu=False, invertY=True, enableMouse=True)
        self.owner = owner
        self.setAcceptHoverEvents(True)
        self.disableAutoRange()
        self._drag_button = None

    def wheelEvent(self, ev, axis=None):  # noqa: N802
        ev.accept()
        notches = ev.delta() / 120.0
        if ev.orientation() == QtCore.Qt.Orientation.Horizontal:
            (x0, x1), _ = self.viewRange()
            self.owner.pan_by(-notches * 0.1 * (x1 - x0), 0.0)
        elif ev.modifiers() & _SHIFT:
            self.owner.scroll_rows(-notches * 3.0)
        else:
            x = self.mapSceneToView(ev.scenePos()).x()
            self.owner.zoom_around(x, WHEEL_ZOOM ** notches)

    def mouseDragEvent(self, ev, axis=None):  # noqa: N802
        if ev.isStart():
            shift = bool(ev.modifiers() & _SHIFT)
            if ev.button() == _MIDDLE or (ev.button() == _LEFT and shift):
                self._drag_button = "pan"
            elif ev.button() == _LEFT and ev.modifiers() & _CTRL:
                self._drag_button = "area"
            elif ev.button() == _LEFT:
                self._drag_button = "band"
            else:
                self._drag_button = None
        if self._drag_button is None:
            ev.ignore()
            return
        ev.accept()
        if self._drag_button == "pan":
            here = self.mapSceneToView(ev.scenePos())
            before = self.mapSceneToView(ev.lastScenePos())
            self.owner.pan_by(before.x() - here.x(), before.y() - here.y())
        elif self._drag_button == "area":
            a = self.mapSceneToView(ev.buttonDownScenePos(_LEFT))
            b = self.mapSceneToView(ev.scenePos())
            self.owner.area_drag((a.x(), a.y()), (b.x(), b.y()), ev.isFinish())
        else:
            x_from = self.mapSceneToView(ev.buttonDownScenePos(_LEFT)).x()
            x_to = self.mapSceneToView(ev.scenePos()).x()
            self.owner.rubber_band(x_from, x_to, ev.isFinish())
        if ev.isFinish():
            self._drag_button = None

    def mouseClickEvent(self, ev):  # noqa: N802
        pos = self.mapSceneToView(ev.scenePos())
        if ev.button() == QtCore.Qt.MouseButton.RightButton:
            ev.accept()
            self.owner.context_at(pos.x(), pos.y(), ev.screenPos())
            return
        if ev.button() != _LEFT:
            ev.ignore()
            return
        ev.accept()
        if ev.modifiers() & _SHIFT:
            self.owner.measure_at(pos.x())
        else:
            self.owner.click_at(pos.x(), pos.y(), ev.double())

    def hoverEvent(self, ev):  # noqa: N802
        if ev.isExit():
            self.owner.hover_at(None, None, None)
            return
        pos = self.mapSceneToView(ev.scenePos())
        self.owner.hover_at(pos.x(), pos.y(), ev.screenPos())


class StripViewBox(pg.ViewBox):
    """The iteration strip: x linked to the main box; a click picks an iteration."""

    def __init__(self, owner):
        super().__init__(enableMenu=False, enableMouse=False)
        self.owner = owner
        self.setAcceptHoverEvents(True)
        self.setMouseEnabled(False, False)
        self.disableAutoRange()
        self.setYRange(0, 1, padding=0)

    def mouseClickEvent(self, ev):  # noqa: N802
        if ev.button() != _LEFT:
            ev.ignore()
            return
        ev.accept()
        x = self.mapSceneToView(ev.scenePos()).x()
        self.owner.click_iteration_at(x, ev.double())

    def wheelEvent(self, ev, axis=None):  # noqa: N802
        ev.accept()
        x = self.mapSceneToView(ev.scenePos()).x()
        self.owner.zoom_around(x, WHEEL_ZOOM ** (ev.delta() / 120.0))

    def hoverEvent(self, ev):  # noqa: N802
        if ev.isExit():
            self.owner.hover_iteration_at(None, None)
            return
        self.owner.hover_iteration_at(self.mapSceneToView(ev.scenePos()).x(), ev.screenPos())
