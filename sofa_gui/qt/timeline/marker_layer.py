"""Markers and the measurement drawn on the timeline (the data: :mod:`sofa_gui.view.markers`).

Each marker is a dashed vertical line with its name at the top; the measurement is a
shaded span between its two points with the delta written on it, and it stays until
cleared or a new one starts. ``changed`` is emitted whenever the markers change (so the
window saves them with the trace and the Markers dock lists them).
"""

from __future__ import annotations

import pyqtgraph as pg
from PySide6 import QtCore, QtGui

from ...view.markers import MarkerSet, Measure

MARKER_COLOR = QtGui.QColor("#8e24aa")
MEASURE_COLOR = QtGui.QColor("#00897b")


#: A marker's name: at the top of the view, right of its line, on a light box.
_MARKER_LABEL = {"position": 0.02, "color": MARKER_COLOR, "anchors": [(0, 0), (0, 0)],
                 "fill": (255, 255, 255, 230)}


class MarkerLayer(QtCore.QObject):
    """Owns the markers and the measurement of one timeline view box."""

    changed = QtCore.Signal()  # the markers (not the measurement) changed
    measure_changed = QtCore.Signal()

    def __init__(self, vb: pg.ViewBox, parent: QtCore.QObject | None = None):
        super().__init__(parent)
        self.vb = vb
        self.markers = MarkerSet()
        self.measure = Measure()
        self._lines: list[pg.InfiniteLine] = []
        self._span: pg.LinearRegionItem | None = None
        self._first: pg.InfiniteLine | None = None

    # -- markers ----------------------------------------------------------------------
    def set_markers(self, markers: MarkerSet) -> None:
        """Show ``markers`` (a new trace's remembered ones); clears the measurement."""
        self.markers = markers
        self.measure.clear()
        self._draw_measure()
        self._draw_markers()

    def add(self, at_ns: float, name: str = "") -> None:
        self.markers.add(at_ns, name)
        self._draw_markers()
        self.changed.emit()

    def rename(self, k: int, name: str) -> None:
        self.markers.rename(k, name)
        self._draw_markers()
        self.changed.emit()

    def remove(self, k: int) -> None:
        self.markers.remove(k)
        self._draw_markers()
        self.changed.emit()

    def _draw_markers(self) -> None:
        for line in self._lines:
            self.vb.removeItem(line)
        pen = pg.mkPen(MARKER_COLOR, width=1, style=QtCore.Qt.PenStyle.DashLine)
        self._lines = []
        for m in self.markers.items:
            line = pg.InfiniteLine(m.at_ns, angle=90, pen=pen, movable=False,
                                   label=m.name, labelOpts=_MARKER_LABEL)
            line.setZValue(20)
            self.vb.addItem(line, ignoreBounds=True)
            self._lines.append(line)

    # -- measurement ------------------------------------------------------------------
    def measure_click(self, x: float) -> None:
        """A Shift-click: the first point, the second (the delta is drawn), or anew."""
        self.measure.click(x)
        self._draw_measure()
        self.measure_changed.emit()

    def clear_measure(self) -> None:
        self.measure.clear()
        self._draw_measure()
        self.measure_changed.emit()

    def measure_text(self) -> str:
        return self.measure.text()

    def _draw_measure(self) -> None:
        for item in (self._span, self._first):
            if item is not None:
                self.vb.removeItem(item)
        self._span = self._first = None
        m = self.measure
        if m.a is None:
            return
        if not m.done:
            self._first = pg.InfiniteLine(m.a, angle=90, movable=False,
                                          pen=pg.mkPen(MEASURE_COLOR, width=1))
            self._first.setZValue(21)
            self.vb.addItem(self._first, ignoreBounds=True)
            return
        fill = QtGui.QColor(MEASURE_COLOR)
        fill.setAlpha(40)
        span = pg.LinearRegionItem((min(m.a, m.b), max(m.a, m.b)), movable=False, brush=fill,
                                   pen=pg.mkPen(MEASURE_COLOR, width=1))
        span.setZValue(21)
        # the delta sits inside the span, half-way down the view, on a light box
        pg.InfLineLabel(span.lines[1], text=m.text(), position=0.5, color=MEASURE_COLOR,
                        fill=pg.mkBrush(255, 255, 255, 230), anchors=[(1, 0.5), (1, 0.5)])
        self.vb.addItem(span, ignoreBounds=True)
        self._span = span
