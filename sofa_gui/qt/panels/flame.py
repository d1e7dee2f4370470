"""Icicle (top-down flame) graph of a :class:`~sofa_gui.core.analysis.calltree.CallTree`,
drawn with pyqtgraph: one row per call depth, root on top, width = time.

Frames are painted in device pixels (so labels stay sharp at any zoom) and only those
at least a pixel wide; the wheel zooms the time axis, a drag pans it, a double click
zooms to a frame and a click emits :attr:`FlameGraph.frame_clicked` with its node.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QRectF, Qt, Signal
from PySide6.QtGui import QColor, QFontMetrics, QPainter, QPen

from ...core.analysis.calltree import CallTree, icicle
from ...core.units import fmt_ns, fmt_pct
from ...view.colors import name_color, text_color
from ...view.tooltip import literal_html

#: Frames narrower than this many pixels get no label.
LABEL_PX = 28


class IcicleItem(pg.GraphicsObject):
    """The frames; x in ns of the tree's width, y = level (row height 1)."""

    def __init__(self, graph: FlameGraph):
        super().__init__()
        self.graph = graph
        self.tree: CallTree | None = None
        self.nodes = self.x = self.w = self.level = np.zeros(0, np.int64)
        self.selected = -1
        self.setAcceptHoverEvents(True)

    def set_tree(self, tree: CallTree | None) -> None:
        self.prepareGeometryChange()
        self.tree = tree
        if tree is None:
            self.nodes = self.x = self.w = self.level = np.zeros(0, np.int64)
        else:
            self.nodes, self.x, self.w, self.level = icicle(tree)
        self.selected = -1
        self.update()

    def boundingRect(self) -> QRectF:  # noqa: N802
        if self.tree is None or not len(self.nodes):
            return QRectF(0, 0, 1, 1)
        return QRectF(0, 0, float(max(int(self.w[0]), 1)), float(self.level.max() + 1))

    def node_at(self, x: float, y: float) -> int:
        """The node drawn at item coordinates (x, y), -1 if none."""
        if not len(self.nodes):
            return -1
        lvl = int(np.floor(y))
        hit = np.flatnonzero((self.level == lvl) & (self.x <= x) & (x < self.x + self.w))
        return int(self.nodes[hit[0]]) if len(hit) else -1

    def paint(self, p: QPainter, *_args) -> None:
        if self.tree is None or not len(self.nodes):
            return
        tr = p.transform()
        view = self.graph.plot.getViewBox().viewRect()
        keep = (self.x + self.w >= view.left()) & (self.x <= view.right()) \
            & (self.w * abs(tr.m11()) >= 1)  # frames under a pixel are not drawn
        p.save()
        p.resetTransform()
        fm = QFontMetrics(p.font())
        names = self.tree.names
        for n, x, w, lvl in zip(self.nodes[keep].tolist(), self.x[keep].tolist(),
                                self.w[keep].tolist(), self.level[keep].tolist()):
            r = tr.mapRect(QRectF(x, lvl, w, 1))
            if r.width() < 1:
                continue
            fill = "#9e9e9e" if n == 0 else name_color(names[n])
            p.fillRect(r.adjusted(0, 0, -1, -1), QColor(fill))
            if n == self.selected:
                p.setPen(QPen(QColor("#000000"), 2))
                p.drawRect(r.adjusted(1, 1, -2, -2))
            if r.width() >= LABEL_PX:
                p.setPen(QColor(text_color(fill)))
                text = fm.elidedText(names[n], Qt.TextElideMode.ElideRight, int(r.width()) - 6)
                p.drawText(r.adjusted(3, 0, -3, 0), int(Qt.AlignmentFlag.AlignVCenter
                                                        | Qt.AlignmentFlag.AlignLeft), text)
        p.restore()

    def mouseClickEvent(self, ev) -> None:  # noqa: N802
        if ev.button() != Qt.MouseButton.LeftButton:
            return
        node = self.node_at(ev.pos().x(), ev.pos().y())
        if node < 0:
            return
        ev.accept()
        if ev.double():
            self.graph.zoom_to(node)
        self.graph.choose(node)

    def hoverEvent(self, ev) -> None:  # noqa: N802
        if ev.isExit() or self.tree is None:
            self.setToolTip("")
            return
        node = self.node_at(ev.pos().x(), ev.pos().y())
        self.setToolTip(frame_tip(self.tree, node) if node >= 0 else "")


def frame_tip(tree: CallTree, node: int) -> str:
    text = (f"{tree.names[node]}\ntotal {fmt_ns(int(tree.total[node]))}, self "
            f"{fmt_ns(int(tree.self_ns[node]))}, {int(tree.count[node]):,} calls, "
            f"{fmt_pct(tree.share(node))} of {tree.names[0]}")
    return literal_html(text + "\nclick: highlight its instances; double-click: zoom")


class FlameGraph(pg.GraphicsLayoutWidget):
    """The icicle graph widget; ``frame_clicked(node)`` when a frame is clicked."""

    frame_clicked = Signal(int)

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setBackground(None)
        self.plot = self.addPlot()
        self.plot.hideAxis("left")
        self.plot.hideAxis("bottom")
        self.plot.setMenuEnabled(False)
        self.plot.hideButtons()
        vb = self.plot.getViewBox()
        vb.invertY(True)
        vb.setMouseEnabled(x=True, y=False)
        self.item = IcicleItem(self)
        self.plot.addItem(self.item)
        self.setMinimumHeight(120)

    @property
    def tree(self) -> CallTree | None:
        return self.item.tree

    def set_tree(self, tree: CallTree | None) -> None:
        self.item.set_tree(tree)
        self.reset_zoom()

    def reset_zoom(self) -> None:
        r = self.item.boundingRect()
        vb = self.plot.getViewBox()
        vb.setLimits(xMin=0, xMax=r.right(), minXRange=max(r.width() * 1e-6, 1))
        vb.setRange(xRange=(0, r.right()), yRange=(0, max(r.bottom(), 8)), padding=0)

    def zoom_to(self, node: int) -> None:
        at = np.flatnonzero(self.item.nodes == node)
        if len(at):
            x, w = int(self.item.x[at[0]]), int(self.item.w[at[0]])
            self.plot.getViewBox().setXRange(x, x + max(w, 1), padding=0)

    def choose(self, node: int) -> None:
        """Outline ``node`` and tell the listeners (the panel highlights its instances)."""
        self.item.selected = node
        self.item.update()
        self.frame_clicked.emit(node)

    def frame_rect(self, node: int) -> QRectF | None:
        """Where ``node`` is drawn, in widget pixels (tests click there)."""
        at = np.flatnonzero(self.item.nodes == node)
        if not len(at):
            return None
        k = at[0]
        r = QRectF(float(self.item.x[k]), float(self.item.level[k]), float(self.item.w[k]), 1.0)
        scene = self.item.mapRectToScene(r)
        return self.mapFromScene(scene).boundingRect().toRectF()
