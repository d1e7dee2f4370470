"""Overlays on the timeline: iteration bands, the iteration strip, selection and flows,
and the rubber band shown while dragging a zoom range.

All draw in device pixels from the model (few shapes, so no caching needed).
"""

from __future__ import annotations

import math

import numpy as np
import pyqtgraph as pg
from PySide6 import QtCore, QtGui

from ...core.units import format_time
from ...view.model import TimelineModel

ACCENT = QtGui.QColor("#1e88e5")


def _ink(palette: QtGui.QPalette | None, alpha: int = 255) -> QtGui.QColor:
    """The palette's text colour (black in light themes, white in dark) at ``alpha``."""
    c = QtGui.QColor(palette.color(QtGui.QPalette.ColorRole.Text)) if palette else QtGui.QColor(
        "#111111")
    c.setAlpha(alpha)
    return c
#: At most this many flow arrows are drawn for one selected slice.
MAX_ARROWS = 200


def _view_geometry(item: pg.GraphicsObject, p: QtGui.QPainter):
    vb = item.getViewBox()
    if vb is None:
        return None
    (x0, x1), (y0, y1) = vb.viewRange()
    tr = p.transform()
    return x0, x1, y0, y1, tr.m11(), tr.dx(), tr.m22(), tr.dy()


class _ViewItem(pg.GraphicsObject):
    """Base: bounded by the model's extent, painted in device pixels."""

    def __init__(self, model: TimelineModel):
        super().__init__()
        self.model = model

    def boundingRect(self):  # noqa: N802
        return QtCore.QRectF(0.0, 0.0, self.model.span, max(self.model.total_height, 1.0))

    def dataBounds(self, ax, frac=1.0, orthoRange=None):  # noqa: N802
        return None

    def changed(self) -> None:
        self.prepareGeometryChange()
        self.update()


def _visible_iterations(m: TimelineModel, x0: float, x1: float) -> range:
    if not len(m.iter_starts):
        return range(0)
    a = max(int(np.searchsorted(m.iter_ends, x0, side="left")), 0)
    b = int(np.searchsorted(m.iter_starts, x1, side="right"))
    return range(a, b)


EXTRA_COLOR = QtGui.QColor(230, 140, 30)  # amber: periodic extra work in this iteration


def warmup_brush(alpha: int) -> QtGui.QBrush:
    """Grey diagonal hatching for warm-up iterations."""
    color = QtGui.QColor(128, 128, 128, alpha)
    return QtGui.QBrush(color, QtCore.Qt.BrushStyle.BDiagPattern)


class IterationBandsItem(_ViewItem):
    """Alternating shaded bands behind the lanes; the selected iteration tinted;
    warm-up iterations hatched grey (left out of the steady-state statistics)."""

    def __init__(self, model: TimelineModel, palette: QtGui.QPalette | None = None):
        super().__init__(model)
        self._shade = _ink(palette, 16)
        self._selected = QtGui.QColor(ACCENT)
        self._selected.setAlpha(24)
        self._warmup = warmup_brush(70)

    def paint(self, p, *args):
        geo = _view_geometry(self, p)
        m = self.model
        if geo is None or not len(m.iter_starts):
            return
        x0, x1, y0, y1, sx, dx, sy, dy = geo
        p.save()
        p.resetTransform()
        p.setPen(QtCore.Qt.PenStyle.NoPen)
        top, bottom = sy * y0 + dy, sy * min(y1, m.total_height) + dy
        if bottom <= top:
            p.restore()
            return
        for i in _visible_iterations(m, x0, x1):
            warm = m.iter_marks.is_warmup(i)
            if i != m.selected_iteration and i % 2 == 0 and not warm:
                continue
            a = sx * max(m.iter_starts[i], x0) + dx
            b = sx * min(m.iter_ends[i], x1) + dx
            rect = QtCore.QRectF(a, top, max(b - a, 1.0), bottom - top)
            if warm:
                p.fillRect(rect, self._warmup)
            if i == m.selected_iteration or i % 2:
                p.fillRect(rect, self._selected if i == m.selected_iteration else self._shade)
        p.restore()


class IterationStripItem(_ViewItem):
    """The strip above the lanes: one numbered cell per iteration; click selects."""

    def __init__(self, model: TimelineModel, palette: QtGui.QPalette):
        super().__init__(model)
        self.font = QtGui.QFont()
        self.font.setPointSizeF(8.0)
        self._fm = QtGui.QFontMetricsF(self.font)
        self._text = palette.color(QtGui.QPalette.ColorRole.Text)
        self._cells = (_ink(palette, 18), _ink(palette, 40))
        self._warmup = warmup_brush(110)

    def boundingRect(self):  # noqa: N802
        return QtCore.QRectF(0.0, 0.0, self.model.span, 1.0)

    def paint(self, p, *args):
        geo = _view_geometry(self, p)
        m = self.model
        if geo is None or not len(m.iter_starts):
            return
        x0, x1, y0, y1, sx, dx, sy, dy = geo
        p.save()
        p.resetTransform()
        p.setFont(self.font)
        top, bottom = min(sy * y0 + dy, sy * y1 + dy), max(sy * y0 + dy, sy * y1 + dy)
        for i in _visible_iterations(m, x0, x1):
            a = sx * m.iter_starts[i] + dx
            b = sx * m.iter_ends[i] + dx
            rect = QtCore.QRectF(a, top + 1, max(b - a - 1, 1.0), bottom - top - 2)
            selected = i == m.selected_iteration
            p.fillRect(rect, ACCENT if selected else self._cells[i % 2])
            if m.iter_marks.is_warmup(i) and not selected:
                p.fillRect(rect, self._warmup)
            if m.iter_marks.extra_of(i):  # periodic extra: a bar along the cell's bottom
                p.fillRect(QtCore.QRectF(a, rect.bottom() - 3, rect.width(), 3), EXTRA_COLOR)
            view = QtCore.QRectF(sx * x0 + dx, rect.top(), sx * (x1 - x0), rect.height())
            self._cell_text(p, rect.intersected(view), i, selected)
        p.restore()

    def _cell_text(self, p, visible: QtCore.QRectF, i: int, selected: bool) -> None:
        m = self.model
        dur = format_time(m.iter_ends[i] - m.iter_starts[i])
        tag = ("  warm-up" if m.iter_marks.is_warmup(i) else "") + (
            f"  + {m.iter_marks.short_extra(i)}" if m.iter_marks.extra_of(i) else "")
        for text in (f"#{i}  {dur}{tag}", f"#{i}  {dur}", f"#{i}", str(i)):
            if self._fm.horizontalAdvance(text) + 6 <= visible.width():
                p.setPen(QtGui.QColor("white") if selected else self._text)
                p.drawText(visible.adjusted(3, 0, -3, 0),
                           QtCore.Qt.AlignmentFlag.AlignLeft | QtCore.Qt.AlignmentFlag.AlignVCenter,
                           text)
                return


class SelectionItem(_ViewItem):
    """Outline of the selected slice and its flow partners, flow arrows, and the
    selected iteration's boundaries."""

    def __init__(self, model: TimelineModel, palette: QtGui.QPalette | None = None):
        super().__init__(model)
        self.outline = _ink(palette)

    def paint(self, p, *args):
        geo = _view_geometry(self, p)
        m = self.model
        if geo is None or m.trace is None:
            return
        x0, x1, y0, y1, sx, dx, sy, dy = geo
        p.save()
        p.resetTransform()
        if 0 <= m.selected_iteration < len(m.iter_starts):
            pen = QtGui.QPen(ACCENT, 2.0)
            p.setPen(pen)
            for x in (m.iter_starts[m.selected_iteration], m.iter_ends[m.selected_iteration]):
                if x0 <= x <= x1:
                    xd = sx * x + dx
                    p.drawLine(QtCore.QPointF(xd, sy * y0 + dy), QtCore.QPointF(xd, sy * y1 + dy))
        if m.selected >= 0:
            sel = self._device_rect(m.selected, sx, dx, sy, dy)
            partners = m.partners[:MAX_ARROWS].tolist()
            boxes = [(q, self._device_rect(q, sx, dx, sy, dy)) for q in partners]
            p.setBrush(QtCore.Qt.BrushStyle.NoBrush)
            p.setPen(QtGui.QPen(ACCENT, 1.5, QtCore.Qt.PenStyle.DashLine))
            for _, r in boxes:
                if r is not None:
                    p.drawRect(r)
            if sel is not None:
                self._arrows(p, m.selected, sel, boxes)
                p.setBrush(QtCore.Qt.BrushStyle.NoBrush)
                p.setPen(QtGui.QPen(self.outline, 2.0))
                p.drawRect(sel)
        p.restore()

    def _device_rect(self, index: int, sx, dx, sy, dy) -> QtCore.QRectF | None:
        m = self.model
        span = m.row_span(m.slice_row(index))
        if span is None:
            return None
        s, e = m.slice_extent(index)
        left, right = sx * s + dx, sx * e + dx
        return QtCore.QRectF(left - 1, sy * span[0] + dy + 0.5,
                             max(right - left, 1.0) + 2, span[1] * sy - 1)

    def _arrows(self, p, sel_index: int, sel: QtCore.QRectF, boxes) -> None:
        flows = self.model.trace.flows
        outgoing = set(flows.dst[flows.src == sel_index].tolist())
        p.setPen(QtGui.QPen(ACCENT, 1.5))
        for q, r in boxes:
            if r is None:
                continue
            a, b = (sel, r) if q in outgoing else (r, sel)
            start = QtCore.QPointF(a.left() + 1, a.center().y())
            end = QtCore.QPointF(b.left() + 1, b.center().y())
            draw_arrow(p, start, end, ACCENT)


def draw_arrow(p: QtGui.QPainter, start: QtCore.QPointF, end: QtCore.QPointF, color) -> None:
    """Line with a filled head at ``end`` (device pixels)."""
    p.drawLine(start, end)
    ang = math.atan2(end.y() - start.y(), end.x() - start.x())
    size = 7.0
    pts = [end]
    for da in (2.6, -2.6):
        pts.append(QtCore.QPointF(end.x() + size * math.cos(ang + da),
                                  end.y() + size * math.sin(ang + da)))
    p.save()
    p.setBrush(QtGui.QBrush(color))
    p.drawPolygon(QtGui.QPolygonF(pts))
    p.restore()


class _SpanItem(_ViewItem):
    """Base of the translucent boxes labelled with their duration (:func:`_paint_span`)."""

    def __init__(self, model: TimelineModel):
        super().__init__(model)
        self.font = QtGui.QFont()
        self.font.setPointSizeF(8.5)
        self.font.setBold(True)


class RubberBandItem(_SpanItem):
    """Translucent time range shown while left-dragging, with its duration."""

    def __init__(self, model: TimelineModel):
        super().__init__(model)
        self.range: tuple[float, float] | None = None

    def set_range(self, rng: tuple[float, float] | None) -> None:
        self.range = rng
        self.update()

    def paint(self, p, *args):
        geo = _view_geometry(self, p)
        if geo is None or self.range is None:
            return
        x0, x1, y0, y1, sx, dx, sy, dy = geo
        a, b = sorted(self.range)
        rect = QtCore.QRectF(sx * a + dx, sy * y0 + dy, max(sx * (b - a), 1.0), sy * (y1 - y0))
        _paint_span(p, rect, ACCENT, 40, QtCore.Qt.PenStyle.SolidLine, self.font,
                    format_time(b - a))


def _paint_span(p, rect, color: QtGui.QColor, alpha: int, style, font, text: str) -> None:
    """A translucent box in device pixels with its duration on top (zoom band, area)."""
    p.save()
    p.resetTransform()
    fill = QtGui.QColor(color)
    fill.setAlpha(alpha)
    p.setPen(QtGui.QPen(color, 1.0, style))
    p.setBrush(fill)
    p.drawRect(rect)
    p.setFont(font)
    p.setPen(color.darker(170))
    p.drawText(rect.adjusted(0, 3, 0, 0),
               QtCore.Qt.AlignmentFlag.AlignHCenter | QtCore.Qt.AlignmentFlag.AlignTop, text)
    p.restore()


AREA = QtGui.QColor("#f59e0b")


class AreaItem(_SpanItem):
    """The area selection (Ctrl-drag): a time range over the lanes it crosses, kept
    until Esc or a new one; Statistics aggregates what is inside."""

    def __init__(self, model: TimelineModel):
        super().__init__(model)
        self.area: tuple[float, float, float, float] | None = None  # x0, x1, y0, y1

    def set_area(self, area) -> None:
        self.area = area
        self.update()

    def paint(self, p, *args):
        geo = _view_geometry(self, p)
        if geo is None or self.area is None:
            return
        _x0, _x1, _y0, _y1, sx, dx, sy, dy = geo
        a, b, top, bottom = self.area
        rect = QtCore.QRectF(sx * a + dx, sy * top + dy, max(sx * (b - a), 1.0),
                             max(sy * (bottom - top), 1.0))
        _paint_span(p, rect, AREA, 45, QtCore.Qt.PenStyle.DashLine, self.font,
                    format_time(b - a))
