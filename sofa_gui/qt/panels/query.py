"""Query dock: SQL over the open trace (the tables of ``sofa-gui sql``), results as a table.

An editor (Ctrl+Enter runs), the schema and example queries beside it, the recent
queries (remembered in the app's settings), and the result as a sortable table. A
query runs on a thread of its own; while it runs a bar shows DuckDB's progress
estimate (or that it is busy, where DuckDB has none) and Cancel interrupts it. When the
result has slice ids (a column ``id`` from ``slices`` or its views, see
:mod:`sofa_gui.core.query.db`), those slices are highlighted on the timeline (F3 steps
through them) and clicking a row selects its slice.
"""

from __future__ import annotations

import logging
import threading
import time

from PySide6.QtCore import (
    QAbstractTableModel,
    QModelIndex,
    QObject,
    QSortFilterProxyModel,
    Qt,
    QTimer,
    Signal,
)
from PySide6.QtGui import QFontDatabase, QKeySequence, QShortcut
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QHeaderView,
    QPlainTextEdit,
    QProgressBar,
    QPushButton,
    QSplitter,
    QTableView,
    QWidget,
)

from ...core.query.output import cell_text
from ...core.query.schema import EXAMPLES, schema_lines
from ...view.tooltip import literal_html
from ..docks import DockSpec
from ..session import Session
from .common import plain_label, row_picker, set_muted, stack

log = logging.getLogger(__name__)

#: Rows a result shows at most (the caption says when there were more).
MAX_ROWS = 10_000
#: Recent queries kept in the settings, newest first.
HISTORY = 20
HISTORY_KEY = "query/history"
_SORT = Qt.ItemDataRole.UserRole + 1


class ResultModel(QAbstractTableModel):
    """Rows of a :class:`~sofa_gui.core.query.db.QueryResult`, read-only."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.result = None

    def set_result(self, result) -> None:
        self.beginResetModel()
        self.result = result
        self.endResetModel()

    def rowCount(self, parent=QModelIndex()) -> int:  # noqa: N802
        return 0 if parent.isValid() or self.result is None else len(self.result.rows)

    def columnCount(self, parent=QModelIndex()) -> int:  # noqa: N802
        return 0 if parent.isValid() or self.result is None else len(self.result.columns)

    def headerData(self, section, orientation, role=Qt.ItemDataRole.DisplayRole):  # noqa: N802
        if self.result is None or role != Qt.ItemDataRole.DisplayRole:
            return None
        if orientation == Qt.Orientation.Horizontal:
            return self.result.columns[section]
        return str(section + 1)

    def data(self, index, role=Qt.ItemDataRole.DisplayRole):
        if not index.isValid() or self.result is None:
            return None
        v = self.result.rows[index.row()][index.column()]
        if role == Qt.ItemDataRole.DisplayRole:
            return cell_text(v)
        if role == _SORT:  # NULLs first, numbers by value, the rest as text
            if v is None:
                return float("-inf")
            return v if isinstance(v, (int, float)) else cell_text(v).lower()
        if role == Qt.ItemDataRole.ToolTipRole and isinstance(v, str) and len(v) > 40:
            return literal_html(v[:4000])
        if role == Qt.ItemDataRole.TextAlignmentRole and isinstance(v, (int, float)):
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        return None


class _Runner(QObject):
    """Runs one query on a Python thread; ``finished`` arrives on the GUI thread."""

    finished = Signal(object, str, float)  # result or None, error, seconds

    def start(self, db_for, sql: str) -> None:
        def work():
            t0 = time.perf_counter()
            try:
                res, err = db_for().run(sql, max_rows=MAX_ROWS), ""
            except Exception as exc:  # QueryError, or a failure to open the tables
                from ...core.query.guard import one_line

                res, err = None, one_line(exc)
            self.finished.emit(res, err, time.perf_counter() - t0)

        threading.Thread(target=work, name="sofa-query", daemon=True).start()


class QueryPanel(QWidget):
    def __init__(self, session: Session, parent=None):
        super().__init__(parent)
        self.session = session
        self._db = None
        self._db_key: tuple = ()
        self._lock = threading.Lock()
        self._started = 0.0
        self._run_trace = 0
        self.running = False
        self.result = None
        self.editor = QPlainTextEdit(self)
        self.editor.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.editor.setPlaceholderText("SELECT ... (Ctrl+Enter runs)")
        self.editor.setPlainText(EXAMPLES[0][1])
        self.schema = QPlainTextEdit(self)
        self.schema.setReadOnly(True)
        self.schema.setFont(self.editor.font())
        self.schema.setPlainText("\n".join(schema_lines()))
        self.schema.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        self.examples = QComboBox(self)
        self.examples.addItem("Examples…", None)
        for title, sql in EXAMPLES:
            self.examples.addItem(title, sql)
        self.examples.activated.connect(self._on_example)
        self.history = QComboBox(self)
        self.history.setToolTip("Recent queries")
        self.history.activated.connect(self._on_history)
        self.run_button = QPushButton("Run", self)
        self.run_button.setToolTip("Run the query (Ctrl+Enter)")
        self.run_button.clicked.connect(self.run_query)
        self.cancel_button = QPushButton("Cancel", self)
        self.cancel_button.clicked.connect(self.cancel)
        self.progress = QProgressBar(self)
        self.progress.setMaximumWidth(160)
        self.caption = plain_label("", self, wrap=True)
        set_muted(self.caption)
        self.model = ResultModel(self)
        self.proxy = QSortFilterProxyModel(self)
        self.proxy.setSourceModel(self.model)
        self.proxy.setSortRole(_SORT)
        self.table = QTableView(self)
        self.table.setModel(self.proxy)
        self.table.setSortingEnabled(True)
        self.table.sortByColumn(-1, Qt.SortOrder.AscendingOrder)  # the query's own order
        self.table.setWordWrap(False)
        self.table.verticalHeader().setDefaultSectionSize(self.fontMetrics().height() + 6)
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        row_picker(self.table)
        self.table.clicked.connect(self._on_row)
        self.table.activated.connect(self._on_row)
        self._runner = _Runner(self)
        self._runner.finished.connect(self._on_finished)
        self._timer = QTimer(self)
        self._timer.setInterval(100)
        self._timer.timeout.connect(self._tick)
        for keys in ("Ctrl+Return", "Ctrl+Enter"):
            sc = QShortcut(QKeySequence(keys), self.editor)
            sc.setContext(Qt.ShortcutContext.WidgetShortcut)
            sc.activated.connect(self.run_query)
        self._layout()
        session.trace_changed.connect(self._on_trace)
        self._history_loaded = False
        self._set_running(False)
        self.caption.setText(session.empty_text() if session.trace is None else "")

    def _layout(self) -> None:
        top = QHBoxLayout()
        top.setContentsMargins(0, 0, 0, 0)
        for w in (self.run_button, self.cancel_button, self.progress, self.examples):
            top.addWidget(w)
        top.addWidget(self.history, 1)
        upper = QSplitter(Qt.Orientation.Horizontal, self)
        upper.addWidget(self.editor)
        upper.addWidget(self.schema)
        upper.setSizes([500, 400])
        split = QSplitter(Qt.Orientation.Vertical, self)
        split.addWidget(upper)
        split.addWidget(self.table)
        split.setSizes([110, 300])
        stack(self, top, self.caption, split)

    # -- settings ------------------------------------------------------------------------
    def _prefs(self):
        """The main window's settings writer (None for a stand-alone panel)."""
        return getattr(self.window(), "prefs", None)

    def recent_queries(self) -> list[str]:
        prefs = self._prefs()
        got = prefs.value(HISTORY_KEY, []) if prefs is not None else []
        if isinstance(got, str):  # QSettings gives a one-item list back as a string
            got = [got]
        return [q for q in (got or []) if isinstance(q, str) and q.strip()][:HISTORY]

    def _remember(self, sql: str) -> None:
        prefs = self._prefs()
        if prefs is None:
            return
        queries = [sql] + [q for q in self.recent_queries() if q != sql]
        prefs.set_value(HISTORY_KEY, queries[:HISTORY])
        self._fill_history()

    def _fill_history(self) -> None:
        self.history.clear()
        self.history.addItem("Recent queries…", None)
        for q in self.recent_queries():
            self.history.addItem(" ".join(q.split())[:120], q)

    def showEvent(self, event) -> None:  # noqa: N802
        super().showEvent(event)
        self._open_soon()
        if not self._history_loaded:
            self._history_loaded = True
            self._fill_history()
            recent = self.recent_queries()
            if recent:
                self.editor.setPlainText(recent[0])

    def dock_visibility_changed(self, visible: bool) -> None:
        """Its dock's tab was chosen (no show event comes for a tab already 'visible')."""
        if visible:
            self._open_soon()

    def _open_soon(self) -> None:
        """Open the tables on a thread while the user types (the first open imports
        DuckDB): only once the dock is seen, so an app that never queries never loads it."""
        if self.session.trace is not None and not self.tables_open and not self.running \
                and not self.visibleRegion().isEmpty():
            threading.Thread(target=self._warm, name="sofa-query-open", daemon=True).start()

    def _on_example(self, i: int) -> None:
        sql = self.examples.itemData(i)
        if sql:
            self.editor.setPlainText(sql)
        self.examples.setCurrentIndex(0)

    def _on_history(self, i: int) -> None:
        sql = self.history.itemData(i)
        if sql:
            self.editor.setPlainText(sql)

    # -- running -------------------------------------------------------------------------
    def _analysis_key(self) -> tuple:
        a = self.session.analysis
        return (id(self.session.trace), id(a.iterations), id(a.findings))

    def _database(self):
        """The trace's tables (opened on the query thread; reopened when the analysis
        brought iterations or findings since)."""
        with self._lock:
            key = self._analysis_key()
            if self._db is None or key != self._db_key:
                from ...core.query.db import TraceDB

                if self._db is not None:
                    self._db.close()
                self._db = TraceDB(self.session.trace, self.session.analysis)
                self._db_key = key
            return self._db

    @property
    def tables_open(self) -> bool:
        """Whether the trace's tables are open (the dock opens them when first shown)."""
        return self._db is not None and self._db_key == self._analysis_key()

    def _warm(self) -> None:
        try:
            self._database()
        except Exception:  # the query that follows reports it, on one line
            log.debug("opening the query tables failed", exc_info=True)

    def run_query(self) -> None:
        sql = self.editor.toPlainText().strip()
        if self.running or not sql:
            return
        if self.session.trace is None:
            self.caption.setText("open a trace first")
            return
        self._remember(sql)
        self._run_trace = id(self.session.trace)
        self._started = time.perf_counter()
        self._set_running(True)
        self.caption.setText("running…")
        self._runner.start(self._database, sql)

    def cancel(self) -> None:
        """Interrupt the running query (DuckDB stops it at its next check)."""
        if self.running and self._db is not None:
            self._db.interrupt()
            self.caption.setText("cancelling…")

    def _set_running(self, running: bool) -> None:
        self.running = running
        self.run_button.setEnabled(not running)
        self.cancel_button.setEnabled(running)
        self.progress.setVisible(running)
        if running:
            self.progress.setRange(0, 0)  # busy until DuckDB has an estimate
            self._timer.start()
        else:
            self._timer.stop()

    def _tick(self) -> None:
        db = self._db
        p = db.progress() if db is not None else None
        if p is None:
            self.progress.setRange(0, 0)
        else:
            self.progress.setRange(0, 100)
            self.progress.setValue(round(100 * p))
        self.progress.setFormat(f"%p%  {time.perf_counter() - self._started:.1f} s")

    def _on_finished(self, result, error: str, seconds: float) -> None:
        self._set_running(False)
        if self._run_trace != id(self.session.trace):
            return  # another trace was opened while it ran
        if result is None:
            self.caption.setText(error)
            self.caption.setToolTip(literal_html(error))
            return
        self.result = result
        self.model.set_result(result)
        self.table.resizeColumnsToContents()
        for c in range(self.model.columnCount()):
            self.table.setColumnWidth(c, min(self.table.columnWidth(c), 360))
        n = len(result.rows)
        text = f"{n:,} row{'s' if n != 1 else ''} in {seconds * 1e3:.0f} ms"
        if result.truncated:
            text += f" (first {MAX_ROWS:,} shown)"
        ids = result.slice_ids
        if ids is not None and len(ids):
            text += f"; {len(ids):,} slices highlighted on the timeline (F3 steps through them)"
            self.session.show_instances(ids)
        self.caption.setText(text)
        self.caption.setToolTip("")

    def _on_row(self, index) -> None:
        res = self.result
        if res is None or res.slice_ids is None or not index.isValid():
            return
        v = res.rows[self.proxy.mapToSource(index).row()][res.slice_column]
        if isinstance(v, int) and 0 <= v < len(self.session.trace.slices):
            self.session.show_instances(res.slice_ids, focus=v)

    def _on_trace(self) -> None:
        self.model.set_result(None)
        self.result = None
        self.caption.setText("")
        if not self.running:
            with self._lock:
                if self._db is not None:
                    self._db.close()
                self._db, self._db_key = None, ()


DOCK = DockSpec("query", "Query", "bottom", 60, 600, QueryPanel, tab_with="breakdown")
