"""LanesItem: every lane's slices and counters, painted from the LOD index.

One ``GraphicsObject`` for the whole trace.  A frame is computed only when the
view or the data changes (the key is the view range, the device transform and
the model version) and kept as numpy rectangle arrays in device pixels; paint
then hands each colour's rectangles to ``QPainter.drawRects`` through a pointer
into the array (no Python object per rectangle) and draws the cached labels.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
import shiboken6
from PySide6 import QtCore, QtGui

from sofa_gui.core.trace import LaneKind
from sofa_gui.view.viewport import NAME_COLOR_PX, Blocks, Markers

from ...view.colors import PALETTE, name_color, text_color
from ...view.model import TimelineModel

#: Blocks at least this wide (px) get their slice's name drawn inside.
LABEL_MIN_PX = 28.0
#: Vertical gap above and below a slice inside its row (px).
ROW_PAD = 1.5
#: Height of a presence marker (a copy/sync/collective merged into another block).
MARKER_PX = 4.0


def rects_ptr(arr: np.ndarray, start: int = 0):
    """A ``QRectF*`` pointing into a C-contiguous (M, 4) float64 array."""
    return shiboken6.wrapInstance(arr.ctypes.data + start * 32, QtCore.QRectF)


def draw_rect_groups(p: QtGui.QPainter, groups, brushes) -> None:
    """Fill each (colour id, rects, start, count) group with one ``drawRects`` call."""
    p.setPen(QtCore.Qt.PenStyle.NoPen)
    for cid, arr, start, n in groups:
        p.setBrush(brushes[cid])
        p.drawRects(rects_ptr(arr, start), n)


def group_by_color(rects: np.ndarray, color: np.ndarray, n_colors: int) -> list:
    """Sort rectangles by colour; return (colour, array, start, count) batches."""
    if len(rects) == 0:
        return []
    order = np.argsort(color, kind="stable")
    arr = np.ascontiguousarray(rects[order])
    counts = np.bincount(color, minlength=n_colors)
    out, pos = [], 0
    for cid in np.flatnonzero(counts).tolist():
        n = int(counts[cid])
        out.append((cid, arr, pos, n))
        pos += n
    return out


class _Geometry:
    """View coordinates (rel ns, row units) -> pixels relative to the view's top-left.

    Frames are computed in these relative pixels, so a frame (and its pixmap)
    stays valid wherever the view sits on the device (window paint or grab).
    """

    def __init__(self, x0, x1, y0, y1, sx: float, sy: float):
        self.x0, self.x1, self.y0, self.y1 = x0, x1, y0, y1
        self.sx, self.sy = sx, sy
        self.pxw = 1.0 / sx if sx > 0 else 1.0
        self.left = 0.0
        self.width = max(int(np.ceil((x1 - x0) * sx - 1e-6)), 1)
        self.height = max(int(np.ceil((y1 - y0) * sy - 1e-6)), 1)

    def y(self, v):
        return self.sy * (v - self.y0)


class _Frame:
    """Everything one view needs painted, computed once."""

    def __init__(self):
        self.backgrounds: list = []  # (QColor, rects)
        self.groups: list = []
        self.markers: list = []
        self.labels: list = []  # (pen index, QRectF, text)
        self.counter_groups: list = []  # (QBrush, rects)
        self.dim: np.ndarray | None = None
        self.hl_groups: list = []
        self.hl_outline: np.ndarray | None = None
        self.hl_labels: list = []  # labels of highlighted (search hit) blocks
        self.block_count = 0
        self.size = (1, 1)


class LanesItem(pg.GraphicsObject):
    """Slices and counters of every visible lane; reads :class:`TimelineModel`."""

    def __init__(self, model: TimelineModel, palette: QtGui.QPalette):
        super().__init__()
        self.model = model
        self._key = None
        self._frame = _Frame()
        self._brushes = [QtGui.QBrush(QtGui.QColor(c)) for c in PALETTE]
        self._text_pens = [QtGui.QPen(QtGui.QColor(text_color(c))) for c in PALETTE]
        self.font = QtGui.QFont()
        self.font.setPointSizeF(8.0)
        self._fm = QtGui.QFontMetricsF(self.font)
        self._text_width: dict[str, float] = {}
        self._elided: dict[tuple[str, int], str | None] = {}
        self._statics: dict[str, QtGui.QStaticText] = {}
        self._text_h = self._fm.height()
        self.set_palette(palette)
        self.last_block_count = 0
        self._pixmap: QtGui.QPixmap | None = None
        self._painted = False

    def set_palette(self, palette: QtGui.QPalette) -> None:
        base = palette.color(QtGui.QPalette.ColorRole.Base)
        text = palette.color(QtGui.QPalette.ColorRole.Text)
        self._stripe = QtGui.QColor(text)
        self._stripe.setAlpha(10)
        self._header = QtGui.QColor(text)
        self._header.setAlpha(22)
        self._dim = QtGui.QColor(base)
        self._dim.setAlpha(170)
        self._outline = QtGui.QPen(QtGui.QColor("#ff8f00"), 1.0)
        self.invalidate()

    # -- pyqtgraph item contract -------------------------------------------------
    def boundingRect(self):  # noqa: N802
        return QtCore.QRectF(0.0, 0.0, self.model.span, max(self.model.total_height, 1.0))

    def dataBounds(self, ax, frac=1.0, orthoRange=None):  # noqa: N802
        r = self.boundingRect()
        return (r.left(), r.right()) if ax == 0 else (r.top(), r.bottom())

    def invalidate(self) -> None:
        """Data or layout changed: recompute at the next paint."""
        self.prepareGeometryChange()
        self._key = None
        self.update()

    def paint(self, p, *args):
        m = self.model
        vb = self.getViewBox()
        if m.index is None or vb is None:
            return
        (x0, x1), (y0, y1) = vb.viewRange()
        tr = p.transform()
        key = (x0, x1, y0, y1, tr.m11(), tr.m22(), m.version)
        if key != self._key:
            self._frame = self._compute(_Geometry(x0, x1, y0, y1, tr.m11(), tr.m22()))
            self._key = key
            self._pixmap = None
            self._painted = False
        self.last_block_count = self._frame.block_count
        origin = QtCore.QPointF(tr.m11() * x0 + tr.dx(), tr.m22() * y0 + tr.dy())
        p.save()
        p.resetTransform()
        if self._painted and self._pixmap is None:
            self._pixmap = self._render_pixmap(p)  # repainted unchanged: keep a bitmap
        if self._pixmap is not None:
            p.drawPixmap(origin, self._pixmap)
        else:
            p.translate(origin)
            self._draw(p, self._frame)
            self._painted = True
        p.restore()

    def _render_pixmap(self, p: QtGui.QPainter) -> QtGui.QPixmap:
        dpr = p.device().devicePixelRatioF() if p.device() is not None else 1.0
        f = self._frame
        pix = QtGui.QPixmap(int(np.ceil(f.size[0] * dpr)), int(np.ceil(f.size[1] * dpr)))
        pix.setDevicePixelRatio(dpr)
        pix.fill(QtCore.Qt.GlobalColor.transparent)
        painter = QtGui.QPainter(pix)
        self._draw(painter, f)
        painter.end()
        return pix

    # -- frame computation -------------------------------------------------------------
    def _compute(self, g: _Geometry) -> _Frame:
        m = self.model
        f = _Frame()
        f.size = (g.width, g.height)
        self._backgrounds(g, f)
        rows = m.layout.visible_rows(g.y0, g.y1)
        top = g.y(m.layout.row_top[rows])
        height = m.layout.row_height[rows] * g.sy
        blocks = m.index.slices.blocks(rows, g.x0, g.x1, g.pxw)
        rects = self._block_rects(blocks, g, top, height)
        f.groups = group_by_color(rects, blocks.color, len(PALETTE))
        f.markers = group_by_color(self._marker_rects(blocks.markers, g, top, height),
                                    blocks.markers.color, len(PALETTE))
        f.block_count = len(blocks)
        f.labels = self._labels(blocks, rects, m.layout.row_shared[rows])
        f.counter_groups = self._counters(g)
        if m.highlight is not None:
            hb = m.highlight.blocks(rows, g.x0, g.x1, g.pxw)
            hr = self._block_rects(hb, g, top, height)
            f.dim = np.array([[g.left, g.y(g.y0), g.width, (g.y1 - g.y0) * g.sy]])
            f.hl_groups = group_by_color(hr, hb.color, len(PALETTE))
            # the dim layer covers every label: search hits get theirs drawn again on top
            f.hl_labels = self._labels(hb, hr, m.layout.row_shared[rows])
            if len(hr):
                out = hr.copy()
                out[:, 0] -= 0.5
                out[:, 1] -= 0.5
                out[:, 2] = np.maximum(out[:, 2], 1.0)
                f.hl_outline = np.ascontiguousarray(out)
        return f

    def _block_rects(self, b: Blocks, g: _Geometry, top, height) -> np.ndarray:
        n = len(b)
        r = np.empty((n, 4))
        if n == 0:
            return r
        w = (b.c1 - b.c0 + 1).astype(np.float64)
        r[:, 0] = g.left + b.c0
        r[:, 1] = top[b.slot] + ROW_PAD
        # a 1 px gap shows where two slices drawn in their own colours meet
        r[:, 2] = np.where((w >= 4) & (b.ref_px >= NAME_COLOR_PX), w - 1, w)
        r[:, 3] = np.maximum(height[b.slot] - 2 * ROW_PAD, 1.0)
        return r

    def _marker_rects(self, mk: Markers, g: _Geometry, top, height) -> np.ndarray:
        """Thin strips along the bottom of a row: an important category is in there."""
        r = np.empty((len(mk), 4))
        if len(mk):
            r[:, 0] = g.left + mk.c0
            r[:, 1] = top[mk.slot] + height[mk.slot] - ROW_PAD - MARKER_PX
            r[:, 2] = mk.c1 - mk.c0 + 1
            r[:, 3] = MARKER_PX
        return r

    def _labels(self, b: Blocks, rects: np.ndarray, shared: np.ndarray) -> list:
        """Names inside wide blocks, except on lines several rows share (they'd overlap)."""
        wide = np.flatnonzero((rects[:, 2] >= LABEL_MIN_PX) & (b.ref_px >= LABEL_MIN_PX)
                              & (rects[:, 3] >= 9) & ~shared[b.slot])
        out = []
        for i in wide.tolist():
            x, y, w, h = rects[i].tolist()
            avail = w - 6
            text = self._fit(self.model.label_of(int(b.ref[i])), avail)
            if text is None:
                continue
            top = y + (h - self._text_h) / 2
            out.append((int(b.color[i]), QtCore.QPointF(x + 3, top), self._static(text)))
        out.sort(key=lambda t: t[0])
        return out

    def _fit(self, text: str, avail: float) -> str | None:
        """``text`` elided to ``avail`` px (cached: panning keeps the widths), or None."""
        tw = self._text_width.get(text)
        if tw is None:
            tw = self._text_width[text] = self._fm.horizontalAdvance(text)
        if tw <= avail:
            return text
        key = (text, int(avail))
        out = self._elided.get(key, "")
        if out == "":
            if len(self._elided) > 50_000:
                self._elided.clear()
            out = self._fm.elidedText(text, QtCore.Qt.TextElideMode.ElideRight, int(avail))
            out = self._elided[key] = out if len(out) > 2 else None
        return out

    def _backgrounds(self, g: _Geometry, f: _Frame) -> None:
        m = self.model
        stripes, headers = [], []
        lane_no = 0
        for line in m.layout.lines:
            if line.kind == "group":
                lane_no = 0
                target = headers
            else:
                lane_no += 1
                if lane_no % 2:
                    continue
                target = stripes
            if line.top + line.height < g.y0 or line.top > g.y1:
                continue
            target.append((g.left, g.y(line.top), g.width, line.height * g.sy))
        f.backgrounds = [(self._stripe, np.array(stripes, float).reshape(-1, 4)),
                         (self._header, np.array(headers, float).reshape(-1, 4))]

    def _counters(self, g: _Geometry) -> list:
        m = self.model
        trace = m.trace
        if not len(trace.counters.table.name):
            return []
        out = []
        for line in m.layout.lines:
            if line.lane_kind != LaneKind.COUNTER or line.kind != "lane":
                continue
            if line.top + line.height < g.y0 or line.top > g.y1:
                continue
            bottom = g.y(line.top + line.height) - 3
            usable = line.height * g.sy - 6
            for sid in np.flatnonzero(trace.counters.table.lane == line.lane).tolist():
                out.extend(self._series_rects(sid, g, bottom, usable))
        return out

    def _series_rects(self, sid: int, g: _Geometry, bottom: float, usable: float) -> list:
        pyr = self.model.index.counters[sid]
        env = pyr.envelope(g.x0, g.x1, g.pxw)
        if len(env.col) == 0:
            return []
        base = min(pyr.vmin, 0.0)
        scale = usable / (pyr.vmax - base) if pyr.vmax > base else 0.0
        col, lo, hi = env.col, env.vmin, env.vmax
        brk = np.r_[True, (np.diff(col) != 1) | (lo[1:] != lo[:-1]) | (hi[1:] != hi[:-1])]
        heads = np.flatnonzero(brk)
        tails = np.r_[heads[1:], len(col)] - 1
        x = g.left + col[heads]
        w = (col[tails] - col[heads] + 1).astype(float)
        y_hi = bottom - (hi[heads] - base) * scale
        y_lo = bottom - (lo[heads] - base) * scale
        fill = np.column_stack([x, y_hi, w, bottom - y_hi])
        line = np.column_stack([x, y_hi - 0.75, w, np.maximum(y_lo - y_hi, 0) + 1.5])
        color = QtGui.QColor(name_color(self.model.trace.counters.table.name[sid]))
        light = QtGui.QColor(color)
        light.setAlpha(80)
        return [(QtGui.QBrush(light), np.ascontiguousarray(fill)),
                (QtGui.QBrush(color.darker(130)), np.ascontiguousarray(line))]

    # -- painting -----------------------------------------------------------------
    def _draw(self, p: QtGui.QPainter, f: _Frame) -> None:
        p.setPen(QtCore.Qt.PenStyle.NoPen)
        for color, rects in f.backgrounds:
            if len(rects):
                p.setBrush(QtGui.QBrush(color))
                r = np.ascontiguousarray(rects)
                p.drawRects(rects_ptr(r), len(r))
        draw_rect_groups(p, f.groups, self._brushes)
        draw_rect_groups(p, f.markers, self._brushes)
        for brush, rects in f.counter_groups:
            p.setBrush(brush)
            p.drawRects(rects_ptr(rects), len(rects))
        self._draw_labels(p, f.labels)
        if f.dim is not None:
            p.setPen(QtCore.Qt.PenStyle.NoPen)
            p.setBrush(QtGui.QBrush(self._dim))
            p.drawRects(rects_ptr(f.dim), 1)
            draw_rect_groups(p, f.hl_groups, self._brushes)
            if f.hl_outline is not None:
                p.setBrush(QtCore.Qt.BrushStyle.NoBrush)
                p.setPen(self._outline)
                p.drawRects(rects_ptr(f.hl_outline), len(f.hl_outline))
            self._draw_labels(p, f.hl_labels)

    def _static(self, text: str) -> QtGui.QStaticText:
        """Laid-out text, cached: ``drawStaticText`` is ~3x cheaper than ``drawText``."""
        st = self._statics.get(text)
        if st is None:
            if len(self._statics) > 20_000:
                self._statics.clear()
            st = self._statics[text] = QtGui.QStaticText(text)
            st.setTextFormat(QtCore.Qt.TextFormat.PlainText)  # trace names are never markup
            st.prepare(QtGui.QTransform(), self.font)
        return st

    def _draw_labels(self, p: QtGui.QPainter, labels: list) -> None:
        if not labels:
            return
        p.setFont(self.font)
        current = -1
        for cid, pos, st in labels:
            if cid != current:
                p.setPen(self._text_pens[cid])
                current = cid
            p.drawStaticText(pos, st)
