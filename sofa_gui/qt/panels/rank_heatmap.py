"""A rank x iteration heat map: which rank was slow in which iteration, at a glance.

Reusable on its own (the Ranks dock, the fleet view). API:

* ``RankHeatmap.set_matrix(values, rank_labels, iteration_labels, stragglers=None,
  fmt=None, title="")``: ``values`` is a float array of shape (ranks, iterations)
  (rows = ranks, columns = iterations); NaN marks a missing cell (drawn grey,
  never clickable as data).  ``stragglers`` is an optional bool array of the same
  shape: those cells get a thick outline.  ``fmt(value) -> str`` formats values in
  tooltips and the legend (default: the value as ns, e.g. "176 ms").
* ``cell_clicked(row, column)`` signal: a cell was clicked (indices into ``values``).
* ``set_selected(row, column)`` outlines one cell (-1, -1 clears); ``selected()``.
* ``cell_at(QPointF) -> (row, column) | None`` and ``cell_rect(row, column)`` for tests.

Colour is a diverging scale centred on the median of the whole matrix
(:mod:`sofa_gui.view.heat_scale`): blue below it, white at it, red above, reaching full
colour at the largest deviation but no closer than 10 % of the median, so a 4 % spread
stays pale and one slow rank stands out however many ranks there are. Each cell prints
its value where it fits; the legend gives the scale's ends and centre. Labels are
elided; the full text is in the tooltip. The widget asks for no minimum width from its
labels.
"""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import QEvent, QPointF, QRectF, QSize, Qt, Signal
from PySide6.QtGui import QColor, QFontMetrics, QPainter, QPen
from PySide6.QtWidgets import QSizePolicy, QToolTip, QWidget

from ...core.units import fmt_ns, fmt_pct
from ...view.heat_scale import DivergingScale, diverging_scale
from ...view.tooltip import literal_html

_COOL = QColor("#2166ac")  # faster than the median
_MID = QColor("#f7f7f7")  # the median
_WARM = QColor("#b2182b")  # slower than the median
_MISSING = QColor("#9ca3af")
_STRAGGLER = QColor("#111827")  # near-black, with a white inner line: visible on any cell
_PAD = 4


def _mix(a: QColor, b: QColor, t: float) -> QColor:
    t = min(max(t, 0.0), 1.0)
    return QColor(round(a.red() + (b.red() - a.red()) * t),
                  round(a.green() + (b.green() - a.green()) * t),
                  round(a.blue() + (b.blue() - a.blue()) * t))


def scale_color(t: float) -> QColor:
    """The colour at position ``t`` (-1 .. 1) of the diverging scale."""
    return _mix(_MID, _WARM, t) if t >= 0 else _mix(_MID, _COOL, -t)


def finite_range(values: np.ndarray) -> tuple[float, float]:
    """(min, max) of the finite values; (0, 1) when there are none."""
    finite = values[np.isfinite(values)]
    if not len(finite):
        return 0.0, 1.0
    return float(finite.min()), float(finite.max())


class RankHeatmap(QWidget):
    """Paints the matrix; rows are ranks, columns iterations."""

    cell_clicked = Signal(int, int)

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setMouseTracking(True)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Expanding)
        self._values = np.zeros((0, 0))
        self._stragglers = np.zeros((0, 0), bool)
        self._rows: list[str] = []
        self._cols: list[str] = []
        self._fmt = fmt_ns
        self._title = ""
        self._sel = (-1, -1)
        self._label_px: float | None = None  # widest rank label, measured once per matrix
        self._colors: list[list[QColor]] | None = None  # per cell, built once per matrix
        self._lo_hi: tuple[float, float] | None = None  # finite value range, once per matrix
        self._scale: DivergingScale | None = None  # colour scale, once per matrix

    # -- data ------------------------------------------------------------------------
    def set_matrix(self, values, rank_labels, iteration_labels, stragglers=None,
                   fmt=None, title: str = "") -> None:
        v = np.asarray(values, np.float64)
        if v.ndim != 2 or v.shape != (len(rank_labels), len(iteration_labels)):
            raise ValueError(f"values shape {v.shape} does not match "
                             f"{len(rank_labels)} ranks x {len(iteration_labels)} iterations")
        self._values = v
        s = np.zeros(v.shape, bool) if stragglers is None else np.asarray(stragglers, bool)
        if s.shape != v.shape:
            raise ValueError(f"stragglers shape {s.shape} != values shape {v.shape}")
        self._stragglers = s
        rows, cols = [str(x) for x in rank_labels], [str(x) for x in iteration_labels]
        if (rows, cols) != (self._rows, self._cols):
            self._sel = (-1, -1)  # a redraw of the same grid (new metric, more ranks) keeps it
        self._rows, self._cols = rows, cols
        self._fmt = fmt or fmt_ns
        self._title = title
        self._label_px = None
        self._colors = None
        self._lo_hi = None
        self._scale = None
        self.update()

    def shape(self) -> tuple[int, int]:
        return self._values.shape

    def set_selected(self, row: int, col: int) -> None:
        self._sel = (row, col)
        self.update()

    def selected(self) -> tuple[int, int]:
        return self._sel

    # -- geometry --------------------------------------------------------------------
    def sizeHint(self) -> QSize:
        return QSize(420, 60 + 22 * max(len(self._rows), 2))

    def minimumSizeHint(self) -> QSize:
        return QSize(80, 60)

    def _label_width(self) -> float:
        if self._label_px is None:
            fm = QFontMetrics(self.font())
            self._label_px = max((fm.horizontalAdvance(r) for r in self._rows), default=0)
        return min(self._label_px + 3 * _PAD + 2, self.width() * 0.3)

    def changeEvent(self, ev) -> None:
        if ev.type() == ev.Type.FontChange:
            self._label_px = None
        super().changeEvent(ev)

    def _grid(self) -> QRectF:
        fm = QFontMetrics(self.font())
        top = fm.height() * (2 if self._title else 1) + 2 * _PAD
        bottom = fm.height() + 2 * _PAD  # legend
        left = self._label_width()
        return QRectF(left, top, max(self.width() - left - _PAD, 1),
                      max(self.height() - top - bottom, 1))

    def cell_rect(self, row: int, col: int) -> QRectF:
        g = self._grid()
        nr, nc = self._values.shape
        w, h = g.width() / max(nc, 1), g.height() / max(nr, 1)
        return QRectF(g.left() + col * w, g.top() + row * h, w, h)

    def cell_at(self, pos: QPointF):
        nr, nc = self._values.shape
        g = self._grid()
        if not nr or not nc or not g.contains(pos):
            return None
        col = int((pos.x() - g.left()) / (g.width() / nc))
        row = int((pos.y() - g.top()) / (g.height() / nr))
        return (min(row, nr - 1), min(col, nc - 1))

    # -- painting --------------------------------------------------------------------
    def paintEvent(self, _ev) -> None:
        p = QPainter(self)
        p.setRenderHint(QPainter.RenderHint.Antialiasing, False)
        pal = self.palette()
        fm = QFontMetrics(self.font())
        nr, nc = self._values.shape
        if not nr or not nc:
            p.setPen(pal.color(pal.ColorRole.PlaceholderText))
            p.drawText(self.rect(), Qt.AlignmentFlag.AlignCenter, "no per-rank data")
            return
        y = _PAD
        if self._title:
            p.setPen(pal.color(pal.ColorRole.WindowText))
            p.drawText(QRectF(_PAD, y, self.width() - 2 * _PAD, fm.height()),
                       Qt.AlignmentFlag.AlignLeft,
                       fm.elidedText(self._title, Qt.TextElideMode.ElideRight,
                                     self.width() - 2 * _PAD))
            y += fm.height()
        lo, hi = self._range()
        for c in range(nc):
            r0 = self.cell_rect(0, c)
            text = fm.elidedText(self._cols[c], Qt.TextElideMode.ElideRight, int(r0.width()) - 2)
            p.setPen(pal.color(pal.ColorRole.WindowText))
            p.drawText(QRectF(r0.left(), y, r0.width(), fm.height()),
                       Qt.AlignmentFlag.AlignHCenter, text)
        lw = self._label_width()
        for r in range(nr):
            rr = self.cell_rect(r, 0)
            p.setPen(pal.color(pal.ColorRole.WindowText))
            p.drawText(QRectF(_PAD, rr.top(), lw - 2 * _PAD, rr.height()),
                       Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignLeft,
                       fm.elidedText(self._rows[r], Qt.TextElideMode.ElideRight,
                                     int(lw - 2 * _PAD)))
            for c in range(nc):
                self._paint_cell(p, r, c)
        self._paint_outlines(p)
        self._paint_legend(p, fm, lo, hi)

    def _range(self) -> tuple[float, float]:
        if self._lo_hi is None:
            self._lo_hi = finite_range(self._values)
        return self._lo_hi

    def color_of(self, row: int, col: int) -> QColor:
        if self._colors is None:
            self._colors = self._cell_colors()
        return self._colors[row][col]

    def scale(self) -> DivergingScale:
        if self._scale is None:
            self._scale = diverging_scale(self._values)
        return self._scale

    def _cell_colors(self) -> list[list[QColor]]:
        v = self._values
        t = self.scale().position(v)
        ok = np.isfinite(v)
        return [[scale_color(float(t[r, c])) if ok[r, c] else _MISSING
                 for c in range(v.shape[1])] for r in range(v.shape[0])]

    def cell_text(self, r: int, c: int) -> str:
        """What cell (r, c) prints: its value, or '' where it does not fit."""
        v = self._values[r, c]
        if not np.isfinite(v):
            return ""
        text = self._fmt(v)
        rect = self.cell_rect(r, c)
        fm = QFontMetrics(self.font())
        fits = fm.horizontalAdvance(text) <= rect.width() - 4 and fm.height() <= rect.height()
        return text if fits else ""

    def _paint_cell(self, p: QPainter, r: int, c: int) -> None:
        rect = self.cell_rect(r, c).adjusted(0.5, 0.5, -0.5, -0.5)
        color = self.color_of(r, c)
        p.fillRect(rect, color)
        if not np.isfinite(self._values[r, c]):
            p.fillRect(rect, Qt.BrushStyle.BDiagPattern)
            return
        text = self.cell_text(r, c)
        if text:
            p.setPen(QColor("black") if color.lightness() > 140 else QColor("white"))
            p.drawText(rect, Qt.AlignmentFlag.AlignCenter, text)

    def _paint_outlines(self, p: QPainter) -> None:
        p.setBrush(Qt.BrushStyle.NoBrush)
        for r, c in zip(*np.nonzero(self._stragglers)):
            rect = self.cell_rect(int(r), int(c))
            p.setPen(QPen(_STRAGGLER, 3))
            p.drawRect(rect.adjusted(2, 2, -2, -2))
            p.setPen(QPen(QColor("white"), 1))
            p.drawRect(rect.adjusted(4, 4, -4, -4))
        r, c = self._sel
        if r >= 0 and c >= 0:
            p.setPen(QPen(self.palette().color(self.palette().ColorRole.Highlight), 3))
            p.drawRect(self.cell_rect(r, c).adjusted(0.5, 0.5, -0.5, -0.5))

    def _paint_legend(self, p: QPainter, fm: QFontMetrics, lo: float, hi: float) -> None:
        y = self.height() - fm.height() - _PAD
        x = self._label_width()
        for i in range(21):
            p.fillRect(QRectF(x + i * 4, y + 2, 4, fm.height() - 4), scale_color(i / 10 - 1))
        p.setPen(self.palette().color(self.palette().ColorRole.WindowText))
        avail = max(int(self.width() - x - 90 - _PAD), 0)
        p.drawText(QRectF(x + 90, y, avail, fm.height()), Qt.AlignmentFlag.AlignLeft,
                   fm.elidedText(self.legend_text(), Qt.TextElideMode.ElideRight, avail))

    def legend_text(self) -> str:
        """The scale in words: its blue end, centre and red end, the values' range."""
        sc = self.scale()
        rel = sc.relative_half()
        ends = (f"blue −{fmt_pct(rel)} · white median {self._fmt(sc.centre)} · "
                f"red +{fmt_pct(rel)}" if rel is not None else
                f"median {self._fmt(sc.centre)} ± {self._fmt(sc.half)}")
        lo, hi = self._range()
        text = f"{ends}   (values {self._fmt(lo)} .. {self._fmt(hi)})"
        return text + ("   outlined: straggler" if self._stragglers.any() else "")

    # -- interaction -----------------------------------------------------------------
    def tooltip_at(self, pos: QPointF) -> str:
        cell = self.cell_at(pos)
        if cell is None:
            return ""
        r, c = cell
        v = self._values[r, c]
        col = self._values[:, c]
        med = np.nanmedian(col) if np.isfinite(col).any() else np.nan
        head = f"{self._rows[r]}, {self._cols[c]}"
        if not np.isfinite(v):
            return head + ": no data"
        text = f"{head}: {self._fmt(v)}"
        if np.isfinite(med) and med > 0:
            text += f" ({100 * (v / med - 1):+.1f}% vs the median rank of this iteration)"
        if self._stragglers[r, c]:
            text += "\nstraggler of this iteration"
        return text

    def event(self, ev) -> bool:
        if ev.type() == QEvent.Type.ToolTip:
            text = self.tooltip_at(QPointF(ev.pos()))
            if text:
                QToolTip.showText(ev.globalPos(), literal_html(text), self)
            else:
                QToolTip.hideText()
            return True
        return super().event(ev)

    def mousePressEvent(self, ev) -> None:
        cell = self.cell_at(ev.position())
        if cell is not None and ev.button() == Qt.MouseButton.LeftButton:
            self.set_selected(*cell)
            self.cell_clicked.emit(*cell)
            return
        super().mousePressEvent(ev)
