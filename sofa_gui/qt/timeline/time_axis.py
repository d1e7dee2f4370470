"""Time axis: tick labels in ns / µs / ms / s as offsets from the trace start.

Values on the axis are ns relative to the trace start.  Units follow the
magnitude of the visible times and decimals follow the tick spacing; deep
inside a long trace (where absolute labels would need ten digits) the first
tick shows the absolute offset and the others ``+N unit`` from it.
"""

from __future__ import annotations

import math

import pyqtgraph as pg
from PySide6 import QtCore, QtGui, QtWidgets

from ...core.units import decimals_for, format_time, unit_for


def tick_labels(values: list[float], spacing: float) -> list[str]:
    """Labels for ticks ``spacing`` ns apart (see the module docstring)."""
    if not values:
        return []
    vmax = max(abs(v) for v in values)
    if vmax < 1e4 * spacing:
        scale, name = unit_for(vmax)
        decimals = decimals_for(spacing / scale)
        return [f"{v / scale:.{decimals}f} {name}" if v else "0" for v in values]
    base = values[0]
    out = [format_time(base, spacing)]
    out += ["+" + format_time(v - base, spacing) for v in values[1:]]
    return out


def tick_steps(span: float, width_px: float, min_px: float = 110.0) -> tuple[float, float]:
    """(major, minor) tick spacing in ns: a 1-2-5 step giving labels >= ``min_px`` apart."""
    if span <= 0 or width_px <= 0:
        return 1.0, 1.0
    raw = span * min_px / width_px
    exp = 10.0 ** math.floor(math.log10(raw))
    for mult in (1, 2, 5, 10):
        if mult * exp >= raw:
            major = max(mult * exp, 1.0)
            break
    minor = major / (2 if str(major)[0] == "2" else 5)
    return major, max(minor, 1.0)


class TimeAxisItem(pg.GraphicsWidget):
    """Top axis of the timeline, following a view box whose x is ns from the trace start.

    Drawn directly (about 10 labels) rather than with ``pg.AxisItem``, whose text
    layout costs ~2 ms per frame.
    """

    def __init__(self, vb: pg.ViewBox, palette: QtGui.QPalette, height: int = 22):
        super().__init__()
        self.vb = vb
        self.setFixedHeight(height)
        self.font = QtGui.QFont()
        self.font.setPointSizeF(8.0)
        self._text = palette.color(QtGui.QPalette.ColorRole.Text)
        self._tick = QtGui.QColor(self._text)
        self._tick.setAlpha(120)
        self.setCacheMode(QtWidgets.QGraphicsItem.CacheMode.DeviceCoordinateCache)
        #: ``on_click(x_ns)`` when the ruler is clicked (the timeline adds a marker there)
        self.on_click = None
        vb.sigXRangeChanged.connect(self._repaint)
        vb.sigResized.connect(self._repaint)

    def mouseClickEvent(self, ev):  # noqa: N802
        if ev.button() != QtCore.Qt.MouseButton.LeftButton or self.on_click is None:
            ev.ignore()
            return
        ev.accept()
        self.on_click(self.vb.mapSceneToView(ev.scenePos()).x())

    def _repaint(self, *_):
        self.update()

    def ticks(self) -> tuple[list[float], list[float], list[str]]:
        """(major values, minor values, major labels) for the current range."""
        (x0, x1), _ = self.vb.viewRange()
        width = self.vb.width()
        major, minor = tick_steps(x1 - x0, width)
        majors = _multiples(x0, x1, major)
        minors = [v for v in _multiples(x0, x1, minor) if v % major]
        return majors, minors, tick_labels(majors, major)

    def paint(self, p, *args):
        rect = self.boundingRect()
        (x0, x1), _ = self.vb.viewRange()
        if x1 <= x0:
            return
        left = self.mapFromScene(self.vb.mapViewToScene(QtCore.QPointF(x0, 0))).x()
        right = self.mapFromScene(self.vb.mapViewToScene(QtCore.QPointF(x1, 0))).x()
        scale = (right - left) / (x1 - x0)
        majors, minors, labels = self.ticks()
        bottom = rect.bottom()
        p.setPen(QtGui.QPen(self._tick, 1))
        p.drawLine(QtCore.QPointF(left, bottom - 0.5), QtCore.QPointF(right, bottom - 0.5))
        for v in minors:
            x = left + (v - x0) * scale
            p.drawLine(QtCore.QPointF(x, bottom - 3), QtCore.QPointF(x, bottom))
        p.setFont(self.font)
        for v in majors:
            x = left + (v - x0) * scale
            p.setPen(QtGui.QPen(self._tick, 1))
            p.drawLine(QtCore.QPointF(x, bottom - 7), QtCore.QPointF(x, bottom))
        p.setPen(self._text)
        for text, lx, width in self.label_boxes():
            p.drawText(QtCore.QRectF(lx, rect.top(), width + 2, bottom - 4), _BOTTOM_LEFT, text)

    def label_boxes(self) -> list[tuple[str, float, float]]:
        """(label, left x, width) of each major label drawn: right of its tick, or left of
        it where it would run past the axis' end (the last label is never cut); a label
        that would overlap the one before is left out."""
        (x0, x1), _ = self.vb.viewRange()
        if x1 <= x0:
            return []
        left = self.mapFromScene(self.vb.mapViewToScene(QtCore.QPointF(x0, 0))).x()
        right = self.mapFromScene(self.vb.mapViewToScene(QtCore.QPointF(x1, 0))).x()
        scale = (right - left) / (x1 - x0)
        fm = QtGui.QFontMetricsF(self.font)
        majors, _minors, labels = self.ticks()
        out, end = [], -math.inf
        for v, text in zip(majors, labels):
            x = left + (v - x0) * scale
            width = fm.horizontalAdvance(text)
            lx = x + 3 if x + 3 + width <= right else x - 3 - width
            if lx >= end + 4 and lx >= left:
                out.append((text, lx, width))
                end = lx + width
        return out


def _multiples(x0: float, x1: float, step: float) -> list[float]:
    first = math.ceil(x0 / step)
    last = math.floor(x1 / step)
    if last - first > 400:
        return []
    return [k * step for k in range(first, last + 1)]


_BOTTOM_LEFT = QtCore.Qt.AlignmentFlag.AlignLeft | QtCore.Qt.AlignmentFlag.AlignBottom
