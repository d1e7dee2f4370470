"""Iterations dock: one row per iteration; click or Enter selects it and zooms there.

Observes the session's ``iterations`` / ``breakdown`` parts (dominant category), its
``warmup`` part (the final warm-up marks: Step texts and summary, rows kept) and
``iteration_selected`` (a band clicked on the timeline selects the row).
"""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import QAbstractTableModel, QModelIndex, Qt
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import QHeaderView, QTableView, QVBoxLayout, QWidget

from ...core.units import fmt_ns
from ...view.breakdown import dominant_labels
from ...view.model import IterationMarks
from ...view.tooltip import literal_html
from ..docks import DockSpec
from ..session import Session
from .common import TailElideDelegate, fmt_offset, plain_label, row_picker, set_muted

COLUMNS = ("#", "Step", "Start", "Duration", "Δ vs median", "Dominant")
DUR_COLUMNS = (3, 4)  # sorted by duration


class IterationsModel(QAbstractTableModel):
    """Read-only table over ``Iterations`` (+ the breakdown's dominant category).

    Sorts itself with numpy (a view-row -> iteration permutation) instead of a
    QSortFilterProxyModel, which would call ``data()`` from Python per comparison.
    """

    def __init__(self, parent=None):
        super().__init__(parent)
        self._order = np.zeros(0, np.int64)  # view row -> iteration
        self._rank = np.zeros(0, np.int64)  # iteration -> view row
        self._sort = (0, Qt.SortOrder.AscendingOrder)
        self._starts = self._durs = np.zeros(0, np.int64)
        self._labels: list[str] = []
        self._origin = 0
        self._median = 0.0
        self._median_index = -1
        self._dominant: list[str] = []
        self._dominant_tips: list[str] = []
        self._marks = IterationMarks()

    def set_data(self, iterations, origin_ns: int, breakdown=None, verdict=None,
                 findings=None) -> None:
        self.beginResetModel()
        if iterations is None or len(iterations) == 0:
            self._starts = self._durs = np.zeros(0, np.int64)
            self._labels, self._dominant, self._dominant_tips = [], [], []
            self._marks = IterationMarks()
        else:
            self._starts = np.asarray(iterations.starts, np.int64)
            self._durs = np.asarray(iterations.durations, np.int64)
            self._labels = list(iterations.labels or [])
            self._marks = IterationMarks.of(iterations, len(self._starts))
            self._median_index = iterations.median_index
            self._median = float(self._durs[self._median_index]) if len(self._durs) else 0.0
            self._dominant, self._dominant_tips = dominant_labels(
                breakdown, len(self._starts), verdict, findings)
        self._origin = origin_ns
        self._apply_sort()
        self.endResetModel()

    def set_marks(self, iterations) -> None:
        """The same iterations' final warm-up / extra marks: the Step texts change in place
        (re-sorted, persistent indexes kept, when sorted by them), with no reset, so the
        selection and the scroll position stay."""
        self._marks = IterationMarks.of(iterations, len(self._starts))
        if self._sort[0] == 1:
            self.sort(*self._sort)
        if len(self._starts):
            self.dataChanged.emit(self.index(0, 1), self.index(len(self._starts) - 1, 1))

    def iteration_at(self, row: int) -> int:
        return int(self._order[row])

    def row_of(self, iteration: int) -> int:
        return int(self._rank[iteration])

    def sort(self, column: int, order=Qt.SortOrder.AscendingOrder) -> None:
        self.layoutAboutToBeChanged.emit()
        old = self._order.copy()
        self._sort = (column, order)
        self._apply_sort()
        pers = self.persistentIndexList()
        new = [self.index(self.row_of(int(old[p.row()])), p.column()) for p in pers]
        self.changePersistentIndexList(pers, new)
        self.layoutChanged.emit()

    def _apply_sort(self) -> None:
        n = len(self._starts)
        column, order = self._sort
        if column in DUR_COLUMNS:
            key = self._durs
        elif column == 1 and n:
            key = np.array([self._label(i) for i in range(n)], dtype=object).astype(str)
        elif column == 5 and self._dominant:
            key = np.array(self._dominant, dtype=object).astype(str)
        else:
            key = np.arange(n)
        perm = np.argsort(key, kind="stable")
        if order == Qt.SortOrder.DescendingOrder:
            perm = perm[::-1]
        self._order = perm.astype(np.int64)
        self._rank = np.empty(n, np.int64)
        self._rank[self._order] = np.arange(n)

    def rowCount(self, parent=QModelIndex()) -> int:  # noqa: N802 (Qt API)
        return 0 if parent.isValid() else len(self._starts)

    def columnCount(self, parent=QModelIndex()) -> int:  # noqa: N802
        return 0 if parent.isValid() else len(COLUMNS)

    def headerData(self, section, orientation, role=Qt.ItemDataRole.DisplayRole):  # noqa: N802
        if orientation == Qt.Orientation.Horizontal and role == Qt.ItemDataRole.DisplayRole:
            if section == 4 and self._median_index >= 0:
                return f"Δ vs #{self._median_index}"
            return COLUMNS[section]
        if orientation == Qt.Orientation.Horizontal and role == Qt.ItemDataRole.ToolTipRole:
            return _TIPS[section]
        return None

    def data(self, index: QModelIndex, role=Qt.ItemDataRole.DisplayRole):
        if not index.isValid():
            return None
        r, c = int(self._order[index.row()]), index.column()
        if role == Qt.ItemDataRole.DisplayRole:
            return self._text(r, c)
        if role == Qt.ItemDataRole.TextAlignmentRole and c in (0, 2, 3, 4):
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        if role == Qt.ItemDataRole.ToolTipRole and c == 1 and self._marks.extra_of(r):
            return literal_html(f"periodic extra: {self._marks.extra_of(r)}")
        if role == Qt.ItemDataRole.ToolTipRole and c == 5:
            tip = self._dominant_tips[r] if r < len(self._dominant_tips) else ""
            return literal_html(tip) if tip else None
        if role == Qt.ItemDataRole.ToolTipRole and c == 1:
            text = self._text(r, c)
            return literal_html(text) if text else None
        if role == Qt.ItemDataRole.ToolTipRole and c == 2:
            return f"starts {fmt_offset(self._starts[r] - self._origin)} after the trace start"
        if role == Qt.ItemDataRole.ToolTipRole and c == 3:
            dev = self._marks.device_of(r)
            return f"{fmt_ns(self._durs[r])}: the step's own time" + (f"; {dev}" if dev else "")
        return None

    def texts(self, column: int, limit: int = 2000) -> list[str]:
        """Column ``column``'s texts of the first ``limit`` iterations."""
        return [self._text(r, column) for r in range(min(len(self._starts), limit))]

    @property
    def has_labels(self) -> bool:
        """Whether any iteration has a step name, warm-up or extra (else Step is hidden)."""
        return any(self._label(r) for r in range(len(self._starts)))

    def _label(self, r: int) -> str:
        """The step annotation's name, then what is special about the iteration."""
        parts = [self._labels[r]] if r < len(self._labels) and self._labels[r] else []
        if self._marks.is_warmup(r):
            parts.append("warm-up")
        if self._marks.extra_of(r):
            parts.append("+ " + self._marks.short_extra(r))
        return " · ".join(parts)

    def _text(self, r: int, c: int) -> str:
        if c == 0:
            return str(r)
        if c == 1:
            return self._label(r)
        if c == 2:
            return fmt_ns(self._starts[r] - self._origin)
        if c == 3:
            return fmt_ns(self._durs[r])
        if c == 4:
            d = float(self._durs[r]) - self._median
            pct = round(100.0 * d / self._median) if self._median else 0
            sign = "+" if d >= 0 else "−"
            return f"{sign}{fmt_ns(abs(d))} ({sign if pct else '±'}{abs(pct)}%)"
        return self._dominant[r] if r < len(self._dominant) else ""


_TIPS = (
    "Iteration index (0-based, as `sofa-gui analyze` numbers them)",
    "The step annotation the trace gives this iteration (e.g. ProfilerStep#7), warm-up "
    "(left out of steady-state statistics) and periodic extra work (evaluation, "
    "checkpoint) held by the iteration",
    "Start, as an offset from the start of the trace",
    "The step's own time (its annotation's duration when the trace has one); when the "
    "device runs behind, the tooltip adds the device's window",
    "Difference to the median iteration (lower median by duration; the breakdown "
    "compares against the same iteration)",
    "What takes most of the iteration's time, as the verdict reads it: the breakdown "
    "category the device or main thread ran most, or the bound the verdict counts that "
    "category's time in (a recurring compile runs as forward ops: start-up); the cell's "
    "tooltip names the category and its time",
)


class _Table(QTableView):
    """Enter / Return re-selects the current row (and zooms), like a click.  Columns fit
    the viewport: numbers keep their width, the Step and Dominant texts give way
    (elided, full text in the tooltip), so no column hides behind a scroll bar."""

    #: Preferred width of the Step and Dominant columns, set from their texts.
    text_widths = (110, 130)
    #: Width of the Start column, set from its texts.
    start_width = 70

    def resizeEvent(self, event) -> None:  # noqa: N802
        super().resizeEvent(event)
        self.fit_columns()

    def fit_columns(self) -> None:
        hdr = self.horizontalHeader()
        step_pref, dom_pref = self.text_widths
        # a narrow table drops Start (the timeline shows where) before it cuts the texts
        numbers = sum(hdr.sectionSize(c) for c in (0, 3, 4))
        step_need = 0 if self.isColumnHidden(1) else step_pref
        wanted = numbers + self.start_width + step_need + dom_pref
        self.setColumnHidden(2, self.viewport().width() < wanted)
        fixed = numbers + (0 if self.isColumnHidden(2) else self.start_width)
        room = max(self.viewport().width() - fixed, 0)
        step = 0
        if not self.isColumnHidden(1):
            step = step_pref if room >= step_pref + 40 else max(60, min(step_pref, room - 40))
            hdr.resizeSection(1, step)
        hdr.resizeSection(5, max(40, room - step))

    def keyPressEvent(self, event: QKeyEvent) -> None:  # noqa: N802
        if event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter) and self.currentIndex().isValid():
            self.activated.emit(self.currentIndex())
            return
        super().keyPressEvent(event)


class IterationsPanel(QWidget):
    """The Iterations dock's widget."""

    def __init__(self, session: Session, parent=None):
        super().__init__(parent)
        self.session = session
        self.model = IterationsModel(self)
        self.table = _Table(self)
        self.table.setModel(self.model)
        self.table.setSortingEnabled(True)
        self.table.sortByColumn(0, Qt.SortOrder.AscendingOrder)
        row_picker(self.table)
        self.table.setAlternatingRowColors(True)
        self.table.verticalHeader().setVisible(False)
        self.table.verticalHeader().setDefaultSectionSize(
            self.table.fontMetrics().height() + 6)
        hdr = self.table.horizontalHeader()
        hdr.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        hdr.setStretchLastSection(False)
        self._size_columns()
        self.status = plain_label("No trace open", self, wrap=True)
        set_muted(self.status)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(4, 4, 4, 4)
        lay.addWidget(self.status)
        lay.addWidget(self.table, 1)
        lay.addStretch(0)
        self.table.clicked.connect(self._on_row_activated)
        self.table.activated.connect(self._on_row_activated)
        self.table.selectionModel().currentRowChanged.connect(self._on_current_changed)
        session.trace_changed.connect(self._reload)
        session.loading_started.connect(self._on_loading)
        session.on_analysis("iterations", self._reload)
        session.on_analysis("breakdown", self._reload)
        session.on_analysis("verdict", self._reload)
        session.on_analysis("warmup", self._on_marks)
        session.iteration_selected.connect(self._on_selected)
        self._syncing = False
        self.table.hide()

    def _size_columns(self) -> None:
        """Widths from sample text, not from every row (thousands of iterations stay cheap)."""
        fm = self.table.fontMetrics()
        samples = ("0000", "ProfilerStep#00", "000 ms", "000 ms", "+00.0 ms (+00%)")
        for col, text in enumerate(samples):
            self.table.setColumnWidth(col, max(fm.horizontalAdvance(text),
                                               fm.horizontalAdvance(COLUMNS[col]) + 16) + 10)
        self.table.start_width = self.table.columnWidth(2)
        self.table.text_widths = (self.table.columnWidth(1),
                                  fm.horizontalAdvance("Compute kernels") + 16)
        self.table.setTextElideMode(Qt.TextElideMode.ElideRight)
        # a step label keeps its distinctive tail ("…Step#10"), the tooltip the rest
        self.table.setItemDelegateForColumn(1, TailElideDelegate(self.table, compact=False))
        self.table.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)

    def _fit_texts(self) -> None:
        """Widths from the texts of the first 2000 iterations, not a worst-case sample:
        the numbers take what they need, so the Dominant column keeps room on a laptop;
        the Step column's preferred width is its longest label."""
        fm, model = self.table.fontMetrics(), self.model
        hdr = Qt.Orientation.Horizontal

        def longest(col: int) -> int:
            return max((fm.horizontalAdvance(t) for t in model.texts(col)), default=0)

        for col in (0, 2, 3, 4):  # the header keeps room for its sort arrow
            head = fm.horizontalAdvance(str(model.headerData(col, hdr))) + 22
            width = max(longest(col) + 10, head)
            self.table.setColumnWidth(col, width)
            if col == 2:  # a hidden column reads as 0 wide
                self.table.start_width = width
        step = max(fm.horizontalAdvance("ProfilerStep#00"), longest(1)) + 8
        dominant = max(fm.horizontalAdvance("Compute kernels"), longest(5)) + 12
        self.table.text_widths = (step, dominant)

    def row_of(self, iteration: int) -> int:
        """View row that shows ``iteration`` (the table may be sorted)."""
        return self.model.row_of(iteration)

    def _on_loading(self, path: str) -> None:
        if self.session.trace is None:
            self.status.setText("Loading…")

    def _reload(self) -> None:
        s = self.session
        origin = s.trace.start_ns if s.trace is not None else 0
        self.model.set_data(s.iterations, origin, s.breakdown, s.analysis.verdict, s.findings)
        self.table.setColumnHidden(1, not self.model.has_labels)
        self._fit_texts()
        self.table.fit_columns()
        has_rows = self.model.rowCount() > 0
        self.table.setVisible(has_rows)
        self._update_status()
        self._on_selected(s.selected_iteration)

    def _on_marks(self) -> None:
        """The analysis's final warm-up marks: the Step column and the summary line
        follow them; the rows and the selected one stay."""
        self.model.set_marks(self.session.iterations)
        self.table.setColumnHidden(1, not self.model.has_labels)
        self._fit_texts()
        self.table.fit_columns()
        self._update_status()

    def _update_status(self) -> None:
        s = self.session
        it = s.iterations
        if s.trace is None:
            text = "No trace open"
        elif it is None:
            text = "Finding iterations…"
        elif len(it) == 0:
            text = f"No iterations found: {it.reason}" if it.reason else "No iterations found"
        else:
            k = it.median_index
            landmarks = (it.pattern or {}).get("evidence") == "landmarks"
            how = ("at the training loop's landmarks" if landmarks else {
                "annotations": "from step annotations",
                "pattern": "from the repeating kernel pattern"}.get(it.method, it.method))
            text = (f"{len(it)} iterations {how} · median #{k}: {fmt_ns(it.durations[k])}"
                    f" · confidence {it.confidence:.0%}")
            if it.uncertain:
                text = "Iterations uncertain: " + text
            warm = int(np.count_nonzero(it.warmup)) if it.warmup is not None else 0
            if warm:
                text += f" · {warm} warm-up (hatched)"
            for x in it.periodic_extras:
                text += f" · every {x.every}th: {x.name} (+{fmt_ns(x.cost_ns_mean)})"
        self.status.setText(text)

    def _on_row_activated(self, index) -> None:
        if index.isValid():
            self.session.select_iteration(self.model.iteration_at(index.row()), zoom=True)

    def _on_current_changed(self, current, _previous) -> None:
        if self._syncing or not current.isValid():
            return
        src = self.model.iteration_at(current.row())
        if src != self.session.selected_iteration:
            self.session.select_iteration(src, zoom=True)

    def _on_selected(self, i: int) -> None:
        self._syncing = True
        try:
            if i < 0:
                self.table.clearSelection()
            else:
                row = self.row_of(i)
                self.table.selectRow(row)
                self.table.scrollTo(self.model.index(row, 0))
        finally:
            self._syncing = False


DOCK = DockSpec("iterations", "Iterations", "bottom", 10, 600, IterationsPanel)
