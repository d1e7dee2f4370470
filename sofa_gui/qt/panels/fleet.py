"""Fleet view: a big rank folder as a ranks x iterations heat map, before any rank is loaded.

The heat map (:class:`.rank_heatmap.RankHeatmap`) fills in as ranks finish
(``Session.fleet_rank_done``; redrawn at most every :data:`REDRAW_MS`), then shows the
cross-rank result (``fleet_changed``) with stragglers outlined; the metric can be the
iteration time, the time outside collectives, the collective wait or any breakdown
category.  Clicking a cell opens that rank in full at that iteration.  The table below
lists every rank (status, median iteration, top finding, straggler cause); selecting a
row and "Open rank" (or a double-click) loads it, "with neighbours" / "with median
rank" load it alongside others.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QHeaderView,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from ...core.units import fmt_ns
from ...view.tooltip import literal_html
from ..session import Session
from .common import plain_label, row_picker
from .rank_heatmap import RankHeatmap

#: Partial heat maps while ranks finish: at most one redraw per this many ms.
REDRAW_MS = 500
#: Metrics of the heat map: label -> FleetResult attribute (categories follow).
METRICS = {"Iteration time": "iteration", "Time outside collectives": "own",
           "Collective wait (exposed communication)": "comm"}
COLUMNS = ("Rank", "Status", "Iterations", "Median iteration", "Own time vs median",
           "Top finding", "Straggler cause")


class _Item(QTableWidgetItem):
    """Sorts by a number when it has one (``UserRole``), else by text."""

    def __lt__(self, other):  # noqa: D105
        a, b = self.data(Qt.ItemDataRole.UserRole), other.data(Qt.ItemDataRole.UserRole)
        if a is not None and b is not None:
            return a < b
        return super().__lt__(other)


def _item(text: str, key: float | None = None) -> QTableWidgetItem:
    it = _Item(text)
    it.setFlags(Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsSelectable)
    if key is not None:
        it.setData(Qt.ItemDataRole.UserRole, float(key))
    return it


class FleetPanel(QWidget):
    """The fleet overview (central widget while a big rank folder is shown)."""

    def __init__(self, session: Session, parent: QWidget | None = None):
        super().__init__(parent)
        self.session = session
        self.selected_rank: int | None = None
        self.header = plain_label("", self, bold=True, wrap=True)
        self.verdict = plain_label("", self, wrap=True, selectable=True)
        self.table = QTableWidget(0, len(COLUMNS), self)
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.verticalHeader().hide()
        row_picker(self.table)
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        self.table.horizontalHeader().setStretchLastSection(True)
        self.table.setWordWrap(False)
        self.table.verticalHeader().setDefaultSectionSize(
            self.table.fontMetrics().height() + 6)
        self.open_btn = QPushButton("Open rank", self)
        self.neigh_btn = QPushButton("Open with neighbours", self)
        self.median_btn = QPushButton("Open with median rank", self)
        buttons = QHBoxLayout()
        for b in (self.open_btn, self.neigh_btn, self.median_btn):
            buttons.addWidget(b)
            b.setEnabled(False)
        buttons.addStretch(1)
        self.metric = QComboBox(self)
        self.metric.addItems(list(METRICS))
        # long metric names must not set the window's minimum width (the list shows them whole)
        self.metric.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.metric.setMinimumContentsLength(14)
        self.heatmap = RankHeatmap(self)
        self._partial = None  # FleetResult over the ranks finished so far
        self._redraw = QTimer(self)
        self._redraw.setSingleShot(True)
        self._redraw.setInterval(REDRAW_MS)
        self._redraw.timeout.connect(self._partial_result)
        top = QHBoxLayout()
        top.addWidget(self.header, 1)
        top.addWidget(plain_label("Colour:", self))
        top.addWidget(self.metric)
        lay = QVBoxLayout(self)
        lay.addLayout(top)
        lay.addWidget(self.heatmap, 3)
        lay.addWidget(self.verdict)
        lay.addLayout(buttons)
        lay.addWidget(self.table, 2)
        self.open_btn.clicked.connect(lambda: self._open(""))
        self.neigh_btn.clicked.connect(lambda: self._open("neighbours"))
        self.median_btn.clicked.connect(lambda: self._open("median"))
        self.table.itemSelectionChanged.connect(self._on_selection)
        self.table.itemDoubleClicked.connect(lambda _it: self._open(""))
        self.heatmap.cell_clicked.connect(self._on_cell)
        self.metric.currentIndexChanged.connect(lambda _i: self._draw())
        session.fleet_started.connect(self._on_started)
        session.fleet_rank_done.connect(self._on_rank)
        session.fleet_changed.connect(self._on_result)

    # -- session ------------------------------------------------------------------------
    def _on_started(self) -> None:
        s = self.session
        self.selected_rank = None
        self.table.setSortingEnabled(False)
        self.table.setRowCount(len(s.fleet_files))
        self._rows = {}
        for row, f in enumerate(s.fleet_files):
            self._rows[f.rank] = row
            self._set_row(row, [_item(str(f.rank), f.rank), _item("waiting")])
        self.verdict.setText("")
        self._partial = None
        self._partial_result()
        self._update_header()

    def _on_rank(self, summary) -> None:
        row = getattr(self, "_rows", {}).get(summary.rank)
        if row is not None:
            self._set_row(row, self._rank_items(summary))
        self._update_header()
        if not self._redraw.isActive():
            self._redraw.start()

    def _partial_result(self) -> None:
        """The heat map over the ranks finished so far (the others are empty rows)."""
        from ...core.fleet.cross import cross_rank
        from ...core.fleet.summary import RankSummary

        s = self.session
        if s.fleet is not None:
            return
        done = {x.rank: x for x in s.fleet_summaries}
        rows = [done.get(f.rank) or RankSummary(f.rank, str(f.path)) for f in s.fleet_files]
        self._partial = cross_rank(rows)
        self._draw()

    def current(self):
        """The result the heat map shows: final, else partial."""
        return self.session.fleet if self.session.fleet is not None else self._partial

    def _sync_metrics(self, res) -> None:
        want = list(METRICS) + list(res.categories)
        have = [self.metric.itemText(i) for i in range(self.metric.count())]
        if want != have:
            keep = self.metric.currentText()
            self.metric.blockSignals(True)
            self.metric.clear()
            self.metric.addItems(want)
            self.metric.setCurrentIndex(max(want.index(keep) if keep in want else 0, 0))
            self.metric.blockSignals(False)

    def matrix(self):
        """(values, straggler marks) of the chosen metric, ranks x iterations, ns."""
        res = self.current()
        name = self.metric.currentText()
        if name in METRICS:
            values = getattr(res, METRICS[name])
        else:
            values = res.category(name)
        marks = np.zeros(values.shape, bool)
        for st in res.stragglers:
            marks[res.ranks.index(st.rank), st.iterations] = True
        return values, marks

    def _draw(self) -> None:
        res = self.current()
        if res is None:
            return
        self._sync_metrics(res)
        values, marks = self.matrix()
        n_done = sum(1 for x in res.summaries if x.ok and len(x.durations))
        title = (f"{self.metric.currentText()} per rank and iteration "
                 f"({n_done}/{len(res.summaries)} ranks"
                 + (", stragglers outlined)" if res.stragglers else ")"))
        self.heatmap.set_matrix(values, [f"rank {r}" for r in res.ranks], res.labels,
                                stragglers=marks, fmt=fmt_ns, title=title)

    def _on_cell(self, row: int, col: int) -> None:
        """A click on a cell opens that rank in full, at that iteration."""
        res = self.current()
        if res is None or not 0 <= row < len(res.ranks):
            return
        rank = res.ranks[row]
        self.heatmap.set_selected(row, col)
        self.select_rank(rank)
        label = res.labels[col] if 0 <= col < len(res.labels) else ""
        self.session.open_rank(rank, "", iteration=(res.alignment, label, col))

    def _on_result(self) -> None:
        res = self.session.fleet
        if res is None:
            return
        self.table.setSortingEnabled(False)
        self.table.setRowCount(len(res.summaries))
        self._rows = {}
        own = np.nanmedian(res.own, axis=1) if res.own.size else np.full(len(res.ranks), np.nan)
        med_own = float(np.nanmedian(own)) if np.any(~np.isnan(own)) else np.nan
        cause = {st.rank: st for st in res.stragglers}
        for row, s in enumerate(res.summaries):
            self._rows[s.rank] = row
            items = self._rank_items(s)
            d = own[row] - med_own
            items.append(_item("" if np.isnan(d) else f"{'+' if d >= 0 else '-'}"
                               f"{fmt_ns(abs(d))}", None if np.isnan(d) else d))
            items.append(_item(s.findings[0]["title"] if s.findings else ""))
            st = cause.get(s.rank)
            items.append(_item(st.cause_text() if st else ""))
            self._set_row(row, items)
        self.table.setSortingEnabled(True)
        self.table.sortItems(0, Qt.SortOrder.AscendingOrder)
        self.table.resizeColumnsToContents()
        self.verdict.setText(_verdict(res))
        self._update_header()
        self._draw()

    # -- widgets ------------------------------------------------------------------------
    def _rank_items(self, s) -> list[QTableWidgetItem]:
        med = float(np.median(s.durations)) if len(s.durations) else None
        status = "ok" if s.ok else f"error: {s.error}"
        return [_item(str(s.rank), s.rank), _item(status), _item(str(len(s.durations)),
                                                                 len(s.durations)),
                _item(fmt_ns(med) if med is not None else "", med)]

    def _set_row(self, row: int, items: list[QTableWidgetItem]) -> None:
        for col, it in enumerate(items):
            self.table.setItem(row, col, it)

    def _update_header(self) -> None:
        s = self.session
        n, done = len(s.fleet_files), len(s.fleet_summaries)
        failed = sum(1 for x in s.fleet_summaries if not x.ok)
        res = s.fleet
        eng = res.engine if res is not None else {}
        where = (f" on {eng.get('workers')} Dask workers "
                 f"({'embedded' if eng.get('embedded') else eng.get('scheduler')})") if eng else ""
        fail = f", {failed} failed" if failed else ""
        state = "done" if res is not None else "analyzing"
        # the folder's name, as the window title has it; its whole path in the tooltip
        self.header.setText(f"{Path(s.fleet_path or '').name}: {n} ranks, {done}/{n} "
                            f"analyzed{fail}{where} ({state})")
        self.header.setToolTip(literal_html(s.fleet_path or ""))

    def select_rank(self, rank: int) -> None:
        row = getattr(self, "_rows", {}).get(rank)
        if row is None:
            return
        for r in range(self.table.rowCount()):  # rows may be sorted: find it by its rank
            it = self.table.item(r, 0)
            if it is not None and it.text() == str(rank):
                self.table.selectRow(r)
                return

    def _on_selection(self) -> None:
        rows = self.table.selectionModel().selectedRows()
        rank = None
        if rows:
            it = self.table.item(rows[0].row(), 0)
            rank = int(it.text()) if it is not None else None
        self.selected_rank = rank
        for b in (self.open_btn, self.neigh_btn, self.median_btn):
            b.setEnabled(rank is not None)
        self.median_btn.setEnabled(rank is not None and self.session.fleet is not None)

    def _open(self, alongside: str) -> None:
        if self.selected_rank is not None:
            self.session.open_rank(self.selected_rank, alongside)


def _verdict(res) -> str:
    lines = []
    if res.stragglers:
        st = res.stragglers[0]
        lines.append(f"Straggler: rank {st.rank}, +{fmt_ns(st.excess_ns)} per iteration "
                     f"({st.fraction:.0%}) in {len(st.iterations)} of {len(res.labels)} "
                     f"iterations; cause: {st.cause_text()}"
                     + (f"; {len(res.stragglers) - 1} more" if len(res.stragglers) > 1 else ""))
    else:
        lines.append("No straggler: every rank is within 5% of the median rank.")
    for f in res.findings:
        lines.append(f"[{f.severity}] {f.title}")
    med = res.median_rank()
    if med is not None:
        lines.append(f"Median rank: {med}. Iterations aligned by {res.alignment}.")
    return "\n".join(lines)
