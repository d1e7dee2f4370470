"""Statistics dock: the top-N table of ``sofa-gui stats`` for a kind and a scope.

Scopes: the whole trace, the selected iteration, the steady state (all iterations
but the first) or the timeline's area selection (Ctrl-drag: a time range over the
lanes it crosses). Clicking a row highlights every instance in scope on the
timeline (F3 steps through them) and jumps to the longest. The numbers are those
of :mod:`sofa_gui.core.analysis.stats`, so the app and the CLI agree.
"""

from __future__ import annotations

from operator import attrgetter

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QSortFilterProxyModel, Qt
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QHeaderView,
    QTableView,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from ...core.analysis import stats
from ...core.trace import Kind
from ...core.units import fmt_bytes, fmt_ns, fmt_pct
from ...view.tooltip import literal_html
from ..docks import DockSpec
from ..session import Session
from .common import ComputedWhenSeen, TailElideDelegate, plain_label, row_picker, set_muted

KINDS = (("kernel", "Kernels"), ("op", "CPU ops"), ("copy", "Copies"),
         ("collective", "Collectives"))
SCOPES = (("trace", "Whole trace"), ("iteration", "Selected iteration"),
          ("steady", "Steady state"), ("range", "Range selection"))
COLUMNS = ("Name", "Count", "Total", "Self", "Mean", "Median", "p95", "Max", "Share")
COPY_COLUMNS = ("Direction", "Bytes", "Rate")
#: Slice kind -> the table that lists it.
SLICE_KIND_TABLE = {int(Kind.KERNEL): "kernel", int(Kind.CPU_OP): "op",
                    int(Kind.MEMCPY): "copy", int(Kind.COMMUNICATION): "collective"}
#: Breakdown category -> the table that lists its work (idle time: the host ops around it).
CATEGORY_KIND = {"compute": "kernel", "communication": "collective",
                 "memcpy_h2d": "copy", "memcpy_d2h": "copy", "memcpy_d2d": "copy",
                 "memcpy_p2p": "copy", "memcpy_other": "copy", "memcpy": "copy"}


def kind_for_category(category: str) -> str | None:
    """Statistics kind behind a breakdown category (None: memset, no table of its own)."""
    if category == "memset":
        return None
    return CATEGORY_KIND.get(category, "op")


#: Rows shown; the caption says how many groups there are in all.
TOP = 500
_SORT = Qt.ItemDataRole.UserRole + 1


class StatsModel(QAbstractTableModel):
    """Read-only rows of a :class:`~sofa_gui.core.analysis.stats.StatsTable`."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.table: stats.StatsTable | None = None
        self.columns = COLUMNS

    def set_table(self, table: stats.StatsTable | None) -> None:
        self.beginResetModel()
        self.table = table
        self.columns = COLUMNS + (COPY_COLUMNS if table is not None and table.kind == "copy"
                                  else ())
        self.endResetModel()

    def rowCount(self, parent=QModelIndex()) -> int:  # noqa: N802
        return 0 if parent.isValid() or self.table is None else len(self.table.rows)

    def columnCount(self, parent=QModelIndex()) -> int:  # noqa: N802
        return 0 if parent.isValid() else len(self.columns)

    def headerData(self, section, orientation, role=Qt.ItemDataRole.DisplayRole):  # noqa: N802
        if orientation == Qt.Orientation.Horizontal and role == Qt.ItemDataRole.DisplayRole:
            return self.columns[section]
        if orientation == Qt.Orientation.Horizontal and role == Qt.ItemDataRole.ToolTipRole:
            return _HEADER_TIPS.get(self.columns[section])
        return None

    def data(self, index, role=Qt.ItemDataRole.DisplayRole):
        if not index.isValid() or self.table is None:
            return None
        r = self.table.rows[index.row()]
        col = self.columns[index.column()]
        if role == Qt.ItemDataRole.DisplayRole:
            return _text(r, col)
        if role == _SORT:
            return _key(r, col)
        if role == Qt.ItemDataRole.ToolTipRole and col == "Name":
            extra = f"\n({r.variants} distinct names folded)" if r.variants > 1 else ""
            return literal_html(f"{r.full_name}{extra}")
        if role == Qt.ItemDataRole.TextAlignmentRole and col != "Name":
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        return None


_HEADER_TIPS = {
    "Count": "instances in scope (a slice counts where it starts)",
    "Self": "time not spent in nested slices on the same thread (CPU ops)",
    "Median": "50th percentile of the instances' durations",
    "p95": "95th percentile (linear interpolation)",
    "Share": "part of all time of this kind in scope (CPU ops: of self time)",
    "Rate": "bytes of these copies over their own duration",
}


def _text(r: stats.StatRow, col: str) -> str:
    if col == "Name":
        return r.name
    if col == "Count":
        return f"{r.count:,}"
    if col == "Share":
        return fmt_pct(r.share)
    if col == "Direction":
        return r.copy_kind
    if col == "Bytes":
        return fmt_bytes(r.bytes) if r.bytes >= 0 else "unknown"
    if col == "Rate":
        return f"{r.gbps:.2f} GB/s" if r.gbps is not None else "unknown"
    return fmt_ns(_key(r, col))


#: Column -> its sort key (and the ns shown for time columns); looked up per cell, so
#: a table, not a dict built per call.
_KEYS = {"Name": lambda r: r.name.lower(), "Count": attrgetter("count"),
         "Total": attrgetter("total_ns"), "Self": attrgetter("self_ns"),
         "Mean": attrgetter("mean_ns"), "Median": attrgetter("median_ns"),
         "p95": attrgetter("p95_ns"), "Max": attrgetter("max_ns"), "Share": attrgetter("share"),
         "Direction": attrgetter("copy_kind"), "Bytes": attrgetter("bytes"),
         "Rate": lambda r: r.gbps or 0.0}


def _key(r: stats.StatRow, col: str):
    return _KEYS[col](r)


def session_scope(s: Session, key: str) -> tuple[stats.Scope | None, str]:
    """The scope ``key`` (a :data:`SCOPES` key) means in the session now, or None and
    why it cannot be shown (no range selected, no iteration...)."""
    if key == "trace":
        return stats.Scope(), ""
    if key == "range":
        if s.selected_range is None:
            return None, "no range selected: Ctrl+drag on the timeline to select one"
        a, b, lanes = s.selected_range
        scope = stats.range_scope(a, b, lanes)
        scope.label = f"range of {fmt_ns(b - a)} over {len(lanes)} lanes"
        return scope, ""
    iters = s.iterations
    if iters is None or len(iters) == 0:
        return None, "no iterations found (yet)"
    if key == "steady":
        try:
            return stats.steady_scope(iters), ""
        except IndexError as exc:
            return None, str(exc)
    if s.selected_iteration < 0:
        return None, "no iteration selected: click one in Iterations or on the timeline"
    return stats.iteration_scope(iters, s.selected_iteration), ""


class StatisticsPanel(ComputedWhenSeen, QWidget):
    """Kind and scope pickers, a caption and the sortable table."""

    def __init__(self, session: Session, parent=None):
        super().__init__(parent)
        self.session = session
        self.kind_combo = QComboBox(self)
        for key, text in KINDS:
            self.kind_combo.addItem(text, key)
        self.scope_combo = QComboBox(self)
        for key, text in SCOPES:
            self.scope_combo.addItem(text, key)
        self.clear_button = QToolButton(self)
        self.clear_button.setText("Clear range")
        self.clear_button.setToolTip("Clear the area selection (Esc on the timeline)")
        self.clear_button.clicked.connect(session.clear_range)
        self.caption = plain_label("", self, wrap=True)  # a line of its own: never cut
        set_muted(self.caption)
        self.model = StatsModel(self)
        self.proxy = QSortFilterProxyModel(self)
        self.proxy.setSourceModel(self.model)
        self.proxy.setSortRole(_SORT)
        self.view = QTableView(self)
        self.view.setModel(self.proxy)
        self.view.setSortingEnabled(True)
        self.view.sortByColumn(2, Qt.SortOrder.DescendingOrder)
        row_picker(self.view)
        self.view.setItemDelegateForColumn(0, TailElideDelegate(self.view))
        self.view.verticalHeader().hide()
        self.view.verticalHeader().setDefaultSectionSize(self.view.fontMetrics().height() + 6)
        self.view.setWordWrap(False)
        head = self.view.horizontalHeader()
        head.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        head.setStretchLastSection(False)
        head.setMinimumSectionSize(40)
        self.view.clicked.connect(self._on_clicked)
        self.view.activated.connect(self._on_clicked)
        top = QHBoxLayout()
        top.setContentsMargins(0, 0, 0, 0)
        top.addWidget(self.kind_combo)
        top.addWidget(self.scope_combo)
        top.addWidget(self.clear_button)
        top.addStretch(1)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(4, 4, 4, 4)
        lay.addLayout(top)
        lay.addWidget(self.caption)
        lay.addWidget(self.view, 1)
        self.kind_combo.currentIndexChanged.connect(lambda _i: self.refresh())
        self.scope_combo.currentIndexChanged.connect(lambda _i: self.refresh())
        session.trace_changed.connect(self._on_trace)
        for sig in (session.loading_started, session.job_cancelled, session.load_failed):
            sig.connect(lambda *_a: self.refresh())
        session.iterations_changed.connect(self.refresh)
        session.warmup_changed.connect(self._on_warmup)
        session.iteration_selected.connect(self._on_iteration)
        session.range_selected.connect(self._on_range)
        self._stale = True
        self.refresh()

    # -- public ------------------------------------------------------------------------
    @property
    def kind(self) -> str:
        return self.kind_combo.currentData()

    @property
    def scope_key(self) -> str:
        return self.scope_combo.currentData()

    def show_table(self, kind: str, scope: str) -> None:
        """Switch to ``kind`` (kernel|op|copy|collective) in ``scope`` (trace|iteration|
        steady|range), e.g. when a breakdown category is clicked."""
        self._choose(kind, scope)
        self._compute()

    def show_slice_row(self, i: int) -> bool:
        """The trace-wide table of slice ``i``'s kind with the row holding ``i`` selected
        and in view; False when its kind has no table."""
        trace = self.session.trace
        kind = SLICE_KIND_TABLE.get(int(trace.slices.kind[i])) if trace is not None else None
        if kind is None:
            return False
        self.show_table(kind, "trace")
        table = self.model.table
        for row in range(len(table.rows) if table is not None else 0):
            if i in table.members(row):
                index = self.proxy.mapFromSource(self.model.index(row, 0))
                self.view.selectRow(index.row())
                self.view.scrollTo(index)
                return True
        return False

    def _choose(self, kind: str, scope: str) -> None:
        for combo, value in ((self.kind_combo, kind), (self.scope_combo, scope)):
            combo.blockSignals(True)
            combo.setCurrentIndex(max(combo.findData(value), 0))
            combo.blockSignals(False)

    def open_category(self, category: str) -> bool:
        """Show the rows behind a breakdown category in the iteration the breakdown shows
        (the selected one, else the median); False when the category has no table."""
        kind = kind_for_category(category)
        if kind is None:
            return False
        s = self.session
        if s.selected_iteration < 0 and s.breakdown is not None and len(s.breakdown):
            if not s.breakdown.whole_trace:
                s.select_iteration(int(s.breakdown.median_iteration), zoom=False)
        self.show_table(kind, "iteration" if s.selected_iteration >= 0 else "trace")
        return True

    # -- reactions ------------------------------------------------------------------------
    def _on_trace(self) -> None:
        if self.scope_key in ("range", "iteration"):
            self._choose(self.kind, "trace")
        self.refresh()

    def _on_iteration(self, _i: int) -> None:
        if self.scope_key == "iteration":
            self.refresh()

    def _on_warmup(self) -> None:
        """The steady state starts after the analysis's final warm-up."""
        if self.scope_key == "steady":
            self.refresh()

    def _on_range(self, rng) -> None:
        if rng is not None:
            self.show_table(self.kind, "range")
        elif self.scope_key == "range":
            self._choose(self.kind, "trace")
            self.refresh()

    def _scope(self) -> tuple[stats.Scope | None, str]:
        return session_scope(self.session, self.scope_key)

    def _compute(self) -> None:
        self._stale = False
        s = self.session
        self.clear_button.setVisible(s.selected_range is not None)
        if s.trace is None:
            self.model.set_table(None)
            self.caption.setText(s.empty_text())
            return
        scope, why = self._scope()
        if scope is None:
            self.model.set_table(None)
            self.caption.setText(why)
            self.caption.setToolTip(literal_html(why))
            return
        table = stats.compute_table(s.trace, self.kind, scope, top=TOP)
        self.model.set_table(table)
        self._fit_columns()
        self.view.scrollToTop()  # a new scope starts at its biggest rows
        shown = len(table.rows)
        text = (f"{scope.label}: {table.instances:,} instances, {shown} "
                f"{'groups' if shown != 1 else 'group'}"
                + (f" (top {TOP})" if shown >= TOP else "")
                + f"; share of {stats.SHARE_OF[self.kind]}")
        self.caption.setText(text)
        self.caption.setToolTip(literal_html(text))

    def _fit_columns(self) -> None:
        head = self.view.horizontalHeader()
        fm = self.view.fontMetrics()
        for c in range(1, self.model.columnCount()):
            head.resizeSection(c, fm.horizontalAdvance("0000.0 ms") + 12)
        head.resizeSection(0, max(160, min(self.view.viewport().width() // 3, 420)))

    def _on_clicked(self, index) -> None:
        if not index.isValid() or self.model.table is None:
            return
        row = self.proxy.mapToSource(index).row()
        table = self.model.table
        members = table.members(row)
        self.session.show_instances(members, focus=table.rows[row].longest, scoped=True)



DOCK = DockSpec("statistics", "Statistics", "bottom", 30, 600, StatisticsPanel,
                tab_with="breakdown")
