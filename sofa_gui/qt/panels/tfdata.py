"""tf.data dock: the input pipeline's stage tree with each stage's calls, total and own
time, parallelism, the bottleneck stage marked, and how long the step waits for input.

Clicking a stage selects its longest ``GetNext`` event on the timeline. Subscribes to
the ``input_pipeline`` analysis part and ``trace_changed``; without tf.data in the trace
it says so and its dock is hidden.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QFont
from PySide6.QtWidgets import (
    QDockWidget,
    QHeaderView,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from ...core.units import fmt_ns, fmt_pct
from ..docks import DockSpec
from ..session import Session
from .common import plain_label, set_muted

COLUMNS = ("Stage", "Dataset", "Calls", "Total", "Own", "Parallelism")
_NONE = "No tf.data pipeline in this trace (no Iterator:: events)."


class TfDataPanel(QWidget):
    """A header line and a tree of the pipeline's stages, root first."""

    def __init__(self, session: Session, parent=None):
        super().__init__(parent)
        self.session = session
        lay = QVBoxLayout(self)
        lay.setContentsMargins(6, 6, 6, 6)
        self.header = plain_label(_NONE, self, wrap=True, selectable=True)
        set_muted(self.header)
        lay.addWidget(self.header)
        self.tree = QTreeWidget(self)
        self.tree.setColumnCount(len(COLUMNS))
        self.tree.setHeaderLabels(list(COLUMNS))
        self.tree.setUniformRowHeights(True)
        self.tree.header().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.tree.itemClicked.connect(self._on_clicked)
        lay.addWidget(self.tree, 1)
        self.items: dict[int, QTreeWidgetItem] = {}
        session.on_analysis("input_pipeline", self.refresh)
        session.trace_changed.connect(self.refresh)

    def refresh(self) -> None:
        self.tree.clear()
        self.items = {}
        p = self.session.analysis.input_pipeline
        self._show_dock(p is not None)
        if p is None:
            self.header.setText(_NONE)
            return
        self.header.setText(f"{p.state()}. The step waits in IteratorGetNext "
                            f"{fmt_pct(p.wait_share)} of iteration time. " + _bottleneck_text(p))
        for st in p.ordered():
            parent = self.items.get(st.parent)
            item = QTreeWidgetItem(parent if parent is not None else self.tree)
            par = st.parallelism
            values = (st.label, st.dataset, f"{st.count:,}", fmt_ns(st.total_ns),
                      fmt_ns(st.own_ns), "" if par is None else
                      ("autotuned" if par == -1 else str(par)))
            for col, text in enumerate(values):
                item.setText(col, text)
            for col in (2, 3, 4):
                item.setTextAlignment(col, Qt.AlignmentFlag.AlignRight)
            item.setData(0, Qt.ItemDataRole.UserRole, st.first)
            if st.id == p.bottleneck:
                item.setText(0, f"{st.label}  ← bottleneck")
                bold = QFont(item.font(0))
                bold.setBold(True)
                for col in range(len(COLUMNS)):
                    item.setFont(col, bold)
            self.items[st.id] = item
        self.tree.expandAll()

    def _show_dock(self, shown: bool) -> None:
        """The dock is shown for runs with a tf.data pipeline and hidden for the others (it
        would only say "none"); View ▸ tf.data still opens it."""
        dock = self.parentWidget()
        while dock is not None and not isinstance(dock, QDockWidget):
            dock = dock.parentWidget()  # the panel sits in the dock's scroll area
        if dock is not None:
            dock.setVisible(shown)
            if shown:
                dock.raise_()  # it shares a tab group with the breakdown: bring it forward

    def _on_clicked(self, item: QTreeWidgetItem, _col: int) -> None:
        j = item.data(0, Qt.ItemDataRole.UserRole)
        if isinstance(j, int) and j >= 0:
            self.session.select_slice(j, reveal=True)


def _bottleneck_text(p) -> str:
    b = p.bottleneck_stage
    if b is None:
        return ""
    return f"Bottleneck: {b.label}, {fmt_ns(b.own_ns)} own time."


# a tab beside the breakdown: as a third column the bottom row asked for more width than
# a 1600 px window has and squeezed the right column (Bottlenecks) to ~150 px
DOCK = DockSpec("tfdata", "tf.data", "bottom", 30, 520, TfDataPanel, tab_with="breakdown")
