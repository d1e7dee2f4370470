"""The label column left of the lanes: group headers (click to collapse) and lane names.

It follows the main view box vertically; the wheel over it scrolls the lanes.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pyqtgraph as pg
from PySide6 import QtCore, QtGui, QtWidgets

from sofa_gui.core.trace import LaneKind

from ...core.units import format_time
from ...view.model import TimelineModel

#: Colour bar per lane kind (left edge of a lane label).
KIND_COLORS = {
    LaneKind.CPU: "#8e9aaf", LaneKind.GPU: "#5b7fa6", LaneKind.MEMCPY: "#2e7d32",
    LaneKind.NETWORK: "#7c9c9a", LaneKind.COUNTER: "#c9b458",
}
WIDTH = 210
#: Limits of the label column when its right edge is dragged.
MIN_WIDTH, MAX_WIDTH = 90, 640
#: How close to the right edge (px) a drag resizes the column instead of moving a group.
EDGE_PX = 6


def _value_text(v: float, unit: str) -> str:
    if unit in ("ns", "time"):
        return format_time(v)
    if unit.lower() in ("b", "bytes"):
        for scale, name in ((2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB")):
            if abs(v) >= scale:
                return f"{v / scale:.3g} {name}"
        return f"{v:.0f} B"
    return f"{v:.4g} {unit}".strip()


class LaneLabelsItem(pg.GraphicsWidget):
    """Draws the labels for the rows the view box ``vb`` shows."""

    def __init__(self, model: TimelineModel, vb: pg.ViewBox, palette: QtGui.QPalette,
                 on_toggle: Callable[[str], None], on_scroll: Callable[[float], None],
                 on_toggle_lane: Callable[[int], None],
                 on_changed: Callable[[], None] = lambda: None):
        super().__init__()
        self.model = model
        self.vb = vb
        self.on_toggle = on_toggle
        self.on_scroll = on_scroll
        self.on_toggle_lane = on_toggle_lane
        self.on_changed = on_changed  # group order, pins or column width changed
        self.setFixedWidth(WIDTH)
        # repainted only when the lanes scroll or change; otherwise a cached pixmap
        self.setCacheMode(QtWidgets.QGraphicsItem.CacheMode.DeviceCoordinateCache)
        self.font = QtGui.QFont()
        self.font.setPointSizeF(8.5)
        self.bold = QtGui.QFont(self.font)
        self.bold.setBold(True)
        self.small = QtGui.QFont(self.font)
        self.small.setPointSizeF(7.5)
        self._fm = QtGui.QFontMetricsF(self.font)
        self._fm_bold = QtGui.QFontMetricsF(self.bold)
        self._fm_small = QtGui.QFontMetricsF(self.small)
        self.set_palette(palette)
        vb.sigYRangeChanged.connect(self._repaint)
        vb.sigResized.connect(self._repaint)

    def set_palette(self, palette: QtGui.QPalette) -> None:
        self._bg = palette.color(QtGui.QPalette.ColorRole.Window)
        self._text = palette.color(QtGui.QPalette.ColorRole.Text)
        self._muted = QtGui.QColor(self._text)
        self._muted.setAlpha(150)
        self._header = QtGui.QColor(self._text)
        self._header.setAlpha(22)
        self._stripe = QtGui.QColor(self._text)
        self._stripe.setAlpha(10)
        self.update()

    def _repaint(self, *_):
        self.update()

    def _y_map(self) -> tuple[float, float]:
        """(scale, offset) taking row units of the view box to local y (linear)."""
        a = self.mapFromScene(self.vb.mapViewToScene(QtCore.QPointF(0.0, 0.0))).y()
        b = self.mapFromScene(self.vb.mapViewToScene(QtCore.QPointF(0.0, 1.0))).y()
        return b - a, a

    def paint(self, p, *args):
        rect = self.boundingRect()
        p.fillRect(rect, self._bg)
        m = self.model
        if m.layout is None:
            return
        p.setClipRect(rect)
        (_, _), (y0, y1) = self.vb.viewRange()
        scale, offset = self._y_map()
        lane_no = 0
        for line in m.layout.lines:
            if line.kind == "group":
                lane_no = 0
            else:
                lane_no += 1
            if line.top + line.height < y0 or line.top > y1:
                continue
            top = scale * line.top + offset
            bottom = top + scale * line.height
            box = QtCore.QRectF(0, top, rect.width(), bottom - top)
            if line.kind == "group":
                self._group(p, box, line)
            else:
                if lane_no % 2 == 0:
                    p.fillRect(box, self._stripe)
                self._lane(p, box, line, indent=12 if line.group else 4)
        p.setPen(QtGui.QPen(self._muted, 1))
        p.drawLine(QtCore.QPointF(rect.right() - 0.5, rect.top()),
                   QtCore.QPointF(rect.right() - 0.5, rect.bottom()))

    def _group(self, p, box: QtCore.QRectF, line) -> None:
        p.fillRect(box, self._header)
        p.setFont(self.bold)
        p.setPen(self._text)
        arrow = "▸" if line.collapsed else "▾"
        text = self._fm_bold.elidedText(
            f"{arrow} {line.text}", QtCore.Qt.TextElideMode.ElideRight, box.width() - 8)
        p.drawText(box.adjusted(4, 0, -4, 0), _LEFT_VCENTER, text)

    def _lane(self, p, box: QtCore.QRectF, line, indent: int) -> None:
        bar = QtGui.QColor(KIND_COLORS.get(LaneKind(line.lane_kind), "#9e9e9e"))
        p.fillRect(QtCore.QRectF(indent - 4, box.top() + 2, 3, max(box.height() - 4, 1)), bar)
        row_h = box.height() / max(line.shown, 1) if line.lane_kind != LaneKind.COUNTER else 18
        first = QtCore.QRectF(indent + 2, box.top(), box.width() - indent - 8, min(row_h, 18))
        p.setFont(self.font)
        p.setPen(self._text)
        p.drawText(first, _LEFT_VCENTER, self._fm.elidedText(
            line.text, QtCore.Qt.TextElideMode.ElideMiddle, first.width()))
        extra = self._detail(line)
        if extra and box.height() >= 30:
            second = first.translated(0, first.height() - 3)
            p.setFont(self.small)
            p.setPen(self._muted)
            p.drawText(second, _LEFT_VCENTER, self._fm_small.elidedText(
                extra, QtCore.Qt.TextElideMode.ElideRight, second.width()))

    def _detail(self, line) -> str:
        m = self.model
        if line.lane_kind == LaneKind.COUNTER:
            table = m.trace.counters.table
            sids = np.flatnonzero(table.lane == line.lane).tolist()
            if not sids:
                return ""
            pyr = m.index.counters[sids[0]]
            unit = table.unit[sids[0]]
            names = ", ".join(table.name[s] for s in sids) if len(sids) > 1 else ""
            rng = f"max {_value_text(pyr.vmax, unit)}"
            return f"{rng}  {names}".strip()
        if line.depth > line.shown:
            return f"{line.depth} levels · click to show all"
        if line.depth > m.layout.max_rows:
            return f"{line.depth} levels · click to fold"
        if line.depth > 1:
            return f"{line.depth} levels"
        return ""

    # -- interaction -----------------------------------------------------------------
    def mouseClickEvent(self, ev):  # noqa: N802
        if ev.button() == QtCore.Qt.MouseButton.RightButton and self.model.layout is not None:
            line = self._line_at(ev.scenePos())
            if line is not None and line.group:
                ev.accept()
                menu = QtWidgets.QMenu()
                for text, fn in self.pin_actions(line.group):
                    menu.addAction(text, fn)
                menu.exec(ev.screenPos().toPoint())
            return
        if ev.button() != QtCore.Qt.MouseButton.LeftButton or self.model.layout is None:
            return
        units = self.vb.mapSceneToView(ev.scenePos()).y()
        line = self.model.layout.line_at(units)
        if line is None:
            return
        if line.kind == "group":
            ev.accept()
            self.on_toggle(line.group)
        elif line.depth > self.model.layout.max_rows:
            ev.accept()
            self.on_toggle_lane(line.lane)

    def wheelEvent(self, ev):  # noqa: N802
        self.on_scroll(-ev.delta() / 120.0 * 3.0)
        ev.accept()

    def hoverEvent(self, ev):  # noqa: N802
        near = not ev.isExit() and ev.pos().x() >= self.width() - EDGE_PX
        self.setCursor(QtCore.Qt.CursorShape.SplitHCursor if near
                       else QtCore.Qt.CursorShape.ArrowCursor)

    def mouseDragEvent(self, ev):  # noqa: N802
        """Drag the right edge to resize the column; drag a group header onto another to
        move it there (device groups start on top; the order is remembered)."""
        if ev.button() != QtCore.Qt.MouseButton.LeftButton or self.model.layout is None:
            ev.ignore()
            return
        if ev.isStart():
            self._drag = None
            if ev.buttonDownPos().x() >= self.width() - EDGE_PX:
                self._drag = ("resize", None)
            else:
                line = self._line_at(ev.buttonDownScenePos())
                if line is not None and line.kind == "group":
                    self._drag = ("move", line.group)
        drag = getattr(self, "_drag", None)
        if drag is None:
            ev.ignore()
            return
        ev.accept()
        if drag[0] == "resize":
            self.set_column_width(ev.pos().x())
            if ev.isFinish():
                self.on_changed()
        elif ev.isFinish():
            target = self._line_at(ev.scenePos())
            if target is not None and target.group != drag[1]:
                self.model.move_group(drag[1], target.group)
                self.on_changed()

    def set_column_width(self, width: float) -> None:
        self.setFixedWidth(int(min(max(width, MIN_WIDTH), MAX_WIDTH)))
        self._repaint()

    def _line_at(self, scene_pos):
        return self.model.layout.line_at(self.vb.mapSceneToView(scene_pos).y())

    def pin_actions(self, group: str) -> list[tuple[str, Callable[[], None]]]:
        """The header's context menu: pin to the top / unpin."""
        text = "Unpin" if group in self.model.pinned else "Pin to top"

        def act():
            self.model.state.toggle_pin(group)
            self.on_changed()

        return [(text, act)]


_LEFT_VCENTER = QtCore.Qt.AlignmentFlag.AlignLeft | QtCore.Qt.AlignmentFlag.AlignVCenter
