"""Iteration breakdown dock: the selected iteration next to the median one.

Top: two stacked bars on one time scale (selected iteration, median iteration),
one segment per category. Below: a table with time, share and bytes per category
for the selected iteration and the median. A combo picks the side (each device,
each rank's main thread). Observes the session's ``breakdown`` part and
``iteration_selected``.
"""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import QEvent, QRect, QRectF, QSize, Qt, Signal
from PySide6.QtGui import QColor, QFontMetrics, QPainter, QPalette, QPen
from PySide6.QtWidgets import (
    QAbstractItemView,
    QAbstractScrollArea,
    QComboBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QSizePolicy,
    QTableWidget,
    QTableWidgetItem,
    QToolTip,
    QVBoxLayout,
    QWidget,
)

from ...core.analysis.figures import device_window_text
from ...core.analysis.shares import verdict_counts, verdict_reading
from ...core.units import fmt_bytes, fmt_ns, fmt_pct, fmt_rate
from ...view.breakdown import Side, color, label_of, median_index, sides
from ..docks import DockSpec
from ..session import Session
from .common import FitLabel, breakable, plain_label, set_muted

TABLE_COLUMNS = ("Category", "Time", "%", "Median", "Δ vs median", "Bytes", "Rate")
_BAR_H = 26
_LABEL_W = 150
#: Rows the category table asks room for (more scroll inside it); it never takes fewer
#: than ``_MIN_ROWS`` before the dock scrolls.
_WANT_ROWS, _MIN_ROWS = 4, 2


class StackedBars(QWidget):
    """Horizontal stacked bars, one per (caption, {category: ns}) row, same time scale."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.rows: list[tuple[str, list[tuple[str, int]]]] = []
        self.setMouseTracking(True)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self._segments: list[tuple[QRectF, str, int, int]] = []
        self.thin = False
        self.bar_h, self.gap = _BAR_H, 10

    def set_thin(self, thin: bool) -> None:
        """Bars one text line high with small gaps (a short dock), else the full height."""
        self.thin = thin
        self.bar_h, self.gap = self._sizes(thin)
        self.updateGeometry()
        self.update()

    def _sizes(self, thin: bool) -> tuple[int, int]:
        return (self.fontMetrics().height() + 4, 4) if thin else (_BAR_H, 10)

    def height_for(self, thin: bool) -> int:
        """The height the bars take, thin or full."""
        bar_h, gap = self._sizes(thin)
        return gap + 2 + max(len(self.rows), 1) * (bar_h + gap)

    def set_rows(self, rows: list[tuple[str, list[tuple[str, int]]]]) -> None:
        self.rows = rows
        self.updateGeometry()
        self.update()

    def sizeHint(self) -> QSize:  # noqa: N802
        return QSize(400, self.height_for(self.thin))

    def minimumSizeHint(self) -> QSize:  # noqa: N802
        return QSize(160, self.sizeHint().height())

    def paintEvent(self, _event) -> None:  # noqa: N802
        p = QPainter(self)
        p.setRenderHint(QPainter.RenderHint.Antialiasing, False)
        pal = self.palette()
        fm = QFontMetrics(self.font())
        self._segments = []
        totals = [sum(v for _c, v in row) for _cap, row in self.rows]
        scale_max = max(totals, default=0)
        label_w = min(max(fm.horizontalAdvance(cap) for cap, _r in self.rows) + 16
                      if self.rows else _LABEL_W, _LABEL_W, self.width() // 3)
        total_w = fm.horizontalAdvance("000.0 ms") + 12
        bar_w = max(self.width() - label_w - total_w - 4, 10)
        y, bar_h = self.gap // 2 + 1, self.bar_h
        for (caption, row), total in zip(self.rows, totals):
            p.setPen(pal.color(QPalette.ColorRole.WindowText))
            text = fm.elidedText(caption, Qt.TextElideMode.ElideRight, label_w - 8)
            p.drawText(QRectF(4, y, label_w - 8, bar_h),
                       Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignLeft, text)
            x = float(label_w)
            for cat, ns in row:
                if ns <= 0 or scale_max <= 0:
                    continue
                w = bar_w * ns / scale_max
                rect = QRectF(x, y, w, bar_h)
                fill = QColor(color(cat))
                p.fillRect(rect, fill)
                self._segments.append((rect, cat, ns, total))
                share = ns / total if total else 0.0
                label = f"{share:.0%}"
                if w > fm.horizontalAdvance(label) + 6:
                    p.setPen(QColor("#000000") if fill.lightness() > 140 else QColor("#ffffff"))
                    p.drawText(rect, Qt.AlignmentFlag.AlignCenter, label)
                x += w
            p.setPen(QPen(pal.color(QPalette.ColorRole.Mid), 1))
            p.setBrush(Qt.BrushStyle.NoBrush)
            p.drawRect(QRectF(label_w, y, x - label_w, bar_h))
            p.setPen(pal.color(QPalette.ColorRole.WindowText))
            p.drawText(QRectF(x + 6, y, total_w, bar_h),
                       Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignLeft, fmt_ns(total))
            y += bar_h + self.gap
        p.end()

    def mouseMoveEvent(self, event) -> None:  # noqa: N802
        pos = event.position()
        for rect, cat, ns, total in self._segments:
            if rect.contains(pos):
                share = ns / total if total else 0.0
                QToolTip.showText(event.globalPosition().toPoint(),
                                  f"{label_of(cat)}: {fmt_ns(ns)} ({share:.1%})", self)
                return
        QToolTip.hideText()


class CategoryTable(QTableWidget):
    """The category rows.  It asks for room for a few rows and takes whatever the panel
    has left (its own rows scroll), so the dock scrolls only when fewer than
    ``_MIN_ROWS`` would show."""

    def rows_height(self, rows: int) -> int:
        n = min(self.rowCount(), rows)
        bar = self.horizontalScrollBar()
        return (self.horizontalHeader().sizeHint().height() + 2 * self.frameWidth()
                + n * self.verticalHeader().defaultSectionSize()
                + (bar.sizeHint().height() if bar.maximum() > 0 else 0))

    def sizeHint(self) -> QSize:  # noqa: N802
        return QSize(super().sizeHint().width(), self.rows_height(_WANT_ROWS))

    def minimumSizeHint(self) -> QSize:  # noqa: N802
        return QSize(super().minimumSizeHint().width(), self.rows_height(_MIN_ROWS))


class BreakdownPanel(QWidget):
    """The Iteration breakdown dock's widget; a click on a category row emits
    ``category_clicked(category)`` (the Statistics dock opens its rows).

    In a dock too short for everything (a laptop's bottom row) the panel goes compact:
    the status line and the verdict's reading each hold to one line (the whole text in
    their tooltips) and the bars are one text line high, so the category table stays in
    view without scrolling the dock."""

    category_clicked = Signal(str)

    def __init__(self, session: Session, parent=None):
        super().__init__(parent)
        self.session = session
        self._sides: list[Side] = []
        self.side_combo = QComboBox(self)
        self.side_combo.setSizeAdjustPolicy(
            QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.side_combo.setMinimumContentsLength(14)
        self.side_combo.currentIndexChanged.connect(lambda _i: self.refresh())
        self.status = FitLabel(self)
        self.status.setText("No trace open")
        set_muted(self.status)
        self.bars = StackedBars(self)
        # what the verdict reads as another bound in this side's bars (a recurring compile
        # runs as forward ops; the verdict counts it as start-up): its numbers, not ours
        self.reading = FitLabel(self)
        set_muted(self.reading)
        self.table = CategoryTable(0, len(TABLE_COLUMNS), self)
        self.table.setHorizontalHeaderLabels(TABLE_COLUMNS)
        self.table.verticalHeader().setVisible(False)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.NoSelection)
        self.table.setAlternatingRowColors(True)
        self.table.verticalHeader().setDefaultSectionSize(self.table.fontMetrics().height() + 6)
        self.table.cellClicked.connect(self._on_cell)
        self.table.setToolTip("Click a category for its kernels, ops or copies in Statistics")
        hdr = self.table.horizontalHeader()
        # the category names keep their width (the key column); on a narrow dock the
        # numbers at the right scroll instead
        hdr.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        hdr.setStretchLastSection(True)
        top = QHBoxLayout()
        self.side_label = plain_label("Breakdown of", self)
        top.addWidget(self.side_label)
        top.addWidget(self.side_combo)
        top.addStretch(1)
        self.compact = False
        self._reading = ("", "")  # the verdict's reading: whole, and its numbers alone
        self._host = None  # the dock's viewport, whose size decides compact or not
        lay = self._lay = QVBoxLayout(self)
        lay.setContentsMargins(4, 4, 4, 4)
        self._full_spacing = max(lay.spacing(), 0)
        lay.addWidget(self.status)
        lay.addLayout(top)
        lay.addWidget(self.bars)
        lay.addWidget(self.reading)
        lay.addWidget(self.table, 1)
        lay.addStretch(0)
        for sig in (session.loading_started, session.job_cancelled, session.load_failed):
            sig.connect(lambda *_a: self.refresh())
        session.trace_changed.connect(self._reload)
        session.on_analysis("breakdown", self._reload)
        session.on_analysis("verdict", self.refresh)
        session.iteration_selected.connect(lambda _i: self.refresh())
        session.busy_changed.connect(lambda _b: self.refresh())  # "Analyzing…" ends with it
        session.rank_selected.connect(self.show_rank)
        self._reload()

    def show_rank(self, rank: int) -> None:
        """Show the first side (device before host) of ``rank``, if it has one."""
        for k, side in enumerate(self._sides):
            if side.rank == rank and rank >= 0:
                self.side_combo.setCurrentIndex(k)
                return

    def _on_cell(self, row: int, _col: int) -> None:
        item = self.table.item(row, 0)
        if item is not None:
            self.category_clicked.emit(item.data(Qt.ItemDataRole.UserRole))

    def current_side(self) -> Side | None:
        k = self.side_combo.currentIndex()
        return self._sides[k] if 0 <= k < len(self._sides) else None

    def _reload(self) -> None:
        bd = self.session.breakdown
        self._sides = sides(bd) if bd is not None else []
        self.side_combo.blockSignals(True)
        self.side_combo.clear()
        for side in self._sides:
            self.side_combo.addItem(side.title)
        self.side_combo.setEnabled(len(self._sides) > 1)
        self.side_label.setVisible(bool(self._sides))
        self.side_combo.setVisible(bool(self._sides))
        self.side_combo.blockSignals(False)
        if self.session.selected_rank >= 0:
            self.show_rank(self.session.selected_rank)
        self.refresh()

    def refresh(self) -> None:
        """Redraw bars and table for the selected iteration and the current side."""
        s, bd, side = self.session, self.session.breakdown, self.current_side()
        if bd is None or side is None or len(side.times) == 0:
            self.status.setText(s.empty_text() if s.trace is None else
                                "Analyzing…" if bd is None and s.busy else _nothing_text(bd))
            self.bars.set_rows([])
            self.table.setRowCount(0)
            self.bars.hide()
            self.table.hide()
            self.reading.hide()
            return
        self.bars.show()
        self.table.show()
        med = median_index(bd)
        sel = s.selected_iteration if 0 <= s.selected_iteration < len(side.times) else -1
        if bd.whole_trace:
            sel, med = 0, -1
        rows = []
        on_device = " · device" if side.clock == "device" and side.kind == "device" else ""
        if sel >= 0:
            rows.append((self._caption(bd, sel) + on_device, side.row(sel)))
        if med >= 0:
            rows.append((f"Median (#{med}){on_device}", side.row(med)))
        self.bars.set_rows([(cap, list(zip(side.categories, r.tolist()))) for cap, r in rows])
        self._fill_table(side, sel, med)
        for col in (3, 4):  # median and delta mean nothing for a single span
            self.table.setColumnHidden(col, med < 0)
        for col in (5, 6):  # no bytes moved (a host thread): no empty columns to scroll to
            self.table.setColumnHidden(col, not any(
                self.table.item(r, col).text() for r in range(self.table.rowCount())))
        self.status.setText(self._status(bd, side, sel, med))
        self.status.set_tip(_clock_why(side))
        shown = sel if sel >= 0 else med
        args = (s.analysis.verdict, s.findings, side.label, side.kind, side.categories,
                side.row(shown)) if shown >= 0 else None
        self._reading = (verdict_reading(*args), verdict_counts(*args)) if args else ("", "")
        self.reading.setVisible(bool(self._reading[0]))
        self._show_reading()
        self.fit()

    def _show_reading(self) -> None:
        """The whole reading; held to one line, its sentence with the numbers first."""
        whole, counts = self._reading
        self.reading.setText(counts if self.compact else whole)
        self.reading.set_tip(whole if self.compact else "")

    def showEvent(self, event) -> None:  # noqa: N802
        super().showEvent(event)
        host = self.parentWidget()
        if host is not None and host is not self._host:
            self._host = host
            host.installEventFilter(self)
        self.fit()

    def eventFilter(self, obj, event) -> bool:  # noqa: N802
        if obj is self._host and event.type() == QEvent.Type.Resize:
            self.fit()
        return False

    def room(self) -> QSize:
        """The dock's room for the panel, whatever scroll bar it shows now (else the
        panel's own size)."""
        area = self._host.parentWidget() if self._host is not None else None
        if isinstance(area, QAbstractScrollArea):
            return area.maximumViewportSize()
        return self.size()

    def full_height(self, width: int) -> int:
        """Height the full layout needs at ``width``: wrapped lines, the full bars and
        ``_WANT_ROWS`` table rows."""
        inner = max(width - 8, 40)
        shown = [(w, t) for w, t in ((self.status, self.status.text()),
                                     (self.reading, self._reading[0])) if not w.isHidden()]
        texts = sum(_wrapped_height(w, t, inner) for w, t in shown)
        top = self.side_combo.sizeHint().height() if not self.side_combo.isHidden() else 0
        bars = self.bars.height_for(False) if not self.bars.isHidden() else 0
        table = self.table.rows_height(_WANT_ROWS) if not self.table.isHidden() else 0
        parts = len(shown) + bool(top) + bool(bars) + bool(table)
        return 8 + texts + top + bars + table + max(parts - 1, 0) * self._spacing(False)

    def fit(self) -> None:
        """Compact when the full layout does not fit the dock's height."""
        room = self.room()
        self.set_compact(self.full_height(room.width()) > room.height())

    def set_compact(self, on: bool) -> None:
        if on == self.compact:
            return
        self.compact = on
        self.status.set_one_line(on)
        self.reading.set_one_line(on)
        self.bars.set_thin(on)
        self._show_reading()
        self._lay.setSpacing(self._spacing(on))

    def _spacing(self, compact: bool) -> int:
        return 2 if compact else self._full_spacing

    @staticmethod
    def _caption(bd, i: int) -> str:
        return "Whole trace" if bd.whole_trace else f"Iteration {i}"

    def _status(self, bd, side: Side, sel: int, med: int) -> str:
        if bd.whole_trace:
            return f"Whole trace as one span ({bd.note})"
        it = self.session.iterations
        dur = it.durations if it is not None and len(it) == len(bd) else bd.durations
        clock = _clock_text(side)
        if sel < 0:
            return (f"Median iteration #{med}: {fmt_ns(dur[med])}{self._device(side, med)}. "
                    f"Select an iteration to compare. {clock}")
        delta = float(dur[sel] - dur[med])
        sign = "+" if delta >= 0 else "−"
        return (f"Iteration {sel}: {fmt_ns(dur[sel])}{self._device(side, sel)} · median "
                f"#{med}: {fmt_ns(dur[med])} ({sign}{fmt_ns(abs(delta))}). {clock}")

    def _device(self, side: Side, i: int) -> str:
        """`` (device 368 ms, ends 158 ms after the step)`` when the side is a device whose
        windows are cut on its own clock."""
        it = self.session.iterations
        if side.kind != "device" or side.clock != "device" or it is None:
            return ""
        text = device_window_text(it, i)
        return f" ({text})" if text else ""

    def _fill_table(self, side: Side, sel: int, med: int) -> None:
        main = sel if sel >= 0 else med
        cur = side.times[main]
        ref = side.times[med] if med >= 0 else None
        shown = [k for k, _c in enumerate(side.categories)
                 if cur[k] > 0 or (ref is not None and ref[k] > 0)]
        self.table.setRowCount(len(shown))
        total = float(cur.sum())
        for r, k in enumerate(shown):
            cat = side.categories[k]
            b = int(side.bytes[main, k]) if side.bytes is not None else 0
            fig = side.copy_figures(main, cat)
            rate, tip = "", ""
            if fig is not None and fig[2] > 0:
                n, b, busy = fig
                rate = fmt_rate(b, busy)
                tip = (f"{n} copies moved {fmt_bytes(b)} in {fmt_ns(busy)} of copy time "
                       f"({rate}); Time is the part of the window no higher-priority work "
                       "covered (exposed)")
            cells = [
                label_of(cat),
                fmt_ns(cur[k]),
                fmt_pct(cur[k] / total) if total else "",
                fmt_ns(ref[k]) if ref is not None else "",
                _delta(cur[k], ref[k]) if ref is not None and sel >= 0 else "",
                fmt_bytes(b) if b > 0 else "",
                rate,
            ]
            for c, text in enumerate(cells):
                item = QTableWidgetItem(text)
                if c == 0:
                    item.setData(Qt.ItemDataRole.DecorationRole, QColor(color(cat)))
                    item.setData(Qt.ItemDataRole.UserRole, cat)
                    item.setToolTip(cat)
                else:
                    item.setTextAlignment(Qt.AlignmentFlag.AlignRight
                                          | Qt.AlignmentFlag.AlignVCenter)
                    if c >= 5 and tip:
                        item.setToolTip(tip)
                self.table.setItem(r, c, item)


def _wrapped_height(label: QLabel, text: str, width: int) -> int:
    """Height of ``text`` in ``label``'s font wrapped to ``width`` (whether the label is
    held to one line now or not)."""
    rect = label.fontMetrics().boundingRect(QRect(0, 0, width, 100_000),
                                            int(Qt.TextFlag.TextWordWrap), breakable(text))
    return rect.height()


def _nothing_text(bd) -> str:
    """Why a finished analysis has no breakdown to draw."""
    if bd is None:
        return "No breakdown available"
    counters = f" (it has {len(bd.counters)} counter series: see the timeline)" \
        if bd.counters else ""
    return ("Nothing to break down: the trace has no device work and no host thread with "
            f"traced ops{counters}. Record with --torch (or a profiler) for a breakdown.")


def _clock_text(side: Side) -> str:
    """Which clock the side's windows are cut on, in a few words (the status line stays
    one line so the table keeps its rows on a laptop; the tooltip says why)."""
    return "On the device clock." if side.clock == "device" else "On the host clock."


def _clock_why(side: Side) -> str:
    if side.clock == "device":
        return ("The device lags its host: its rows cover the device's window on the "
                "device clock, from the previous step's last device work to this step's own.")
    return "Windows on the host clock (the iterations' host spans)."


def _delta(a, b) -> str:
    d = float(np.int64(a) - np.int64(b))
    if d == 0:
        return "0"
    return f"{'+' if d > 0 else '−'}{fmt_ns(abs(d))}"


DOCK = DockSpec("breakdown", "Iteration breakdown", "bottom", 20, 600, BreakdownPanel)
