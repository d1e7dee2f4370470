"""Markers dock: the timeline's markers in time order (M on a selection, a click on the
time ruler). A name can be edited in place; a double-click on a time shows the marker
in the middle of the timeline; Delete removes the selected one. The markers are saved
with the trace (see ``MainWindow``)."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QHeaderView,
    QTableWidget,
    QTableWidgetItem,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from ...core.units import fmt_ns
from ..docks import DockSpec
from ..session import Session
from .common import fmt_offset, plain_label, set_muted

HINT = ("No markers: press M on a selection or click the time ruler. "
        "Shift-click two points on the timeline to measure between them.")


class MarkersPanel(QWidget):
    """Lists the markers of a :class:`~sofa_gui.qt.timeline.marker_layer.MarkerLayer`."""

    def __init__(self, session: Session, parent=None):
        super().__init__(parent)
        self.session = session
        self.layer = None
        self.status = plain_label(HINT, self, wrap=True)
        set_muted(self.status)
        self.table = QTableWidget(0, 3, self)
        self.table.setHorizontalHeaderLabels(["Name", "At", "Since previous"])
        self.table.verticalHeader().setVisible(False)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.DoubleClicked
                                   | QAbstractItemView.EditTrigger.EditKeyPressed)
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.table.horizontalHeader().setStretchLastSection(True)
        self.table.itemChanged.connect(self._on_edit)
        self.table.cellDoubleClicked.connect(self._on_double)
        self.remove_button = QToolButton(self)
        self.remove_button.setText("Remove")
        self.remove_button.clicked.connect(self.remove_selected)
        row = QHBoxLayout()
        row.addWidget(self.status, 1)
        row.addWidget(self.remove_button)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(4, 4, 4, 4)
        lay.addLayout(row)
        lay.addWidget(self.table, 1)

    def attach(self, layer) -> None:
        """List ``layer``'s markers (and follow its changes)."""
        self.layer = layer
        layer.changed.connect(self.refresh)
        self.refresh()

    def has_content(self) -> bool:
        return self.layer is not None and len(self.layer.markers) > 0

    def refresh(self) -> None:
        items = self.layer.markers.items if self.layer is not None else []
        self.table.blockSignals(True)
        self.table.setRowCount(len(items))
        for r, m in enumerate(items):
            since = fmt_ns(m.at_ns - items[r - 1].at_ns) if r else ""
            for c, text in enumerate((m.name, fmt_offset(m.at_ns), since)):
                item = QTableWidgetItem(text)
                if c:
                    item.setFlags(item.flags() & ~Qt.ItemFlag.ItemIsEditable)
                self.table.setItem(r, c, item)
        self.table.blockSignals(False)
        self.status.setText(f"{len(items)} markers" if items else HINT)
        self.remove_button.setEnabled(bool(items))

    def _on_edit(self, item: QTableWidgetItem) -> None:
        if item.column() == 0 and self.layer is not None:
            self.layer.rename(item.row(), item.text())

    def _on_double(self, row: int, col: int) -> None:
        if col and self.layer is not None:
            self.show_marker(row)

    def show_marker(self, row: int) -> None:
        """Centre the timeline on marker ``row`` (the zoom is kept)."""
        view = self.session.view
        at = self.layer.markers.items[row].at_ns
        half = (view.x1 - view.x0) / 2
        view.set_window(at - half, at + half)

    def remove_selected(self) -> None:
        rows = sorted({ix.row() for ix in self.table.selectedIndexes()}, reverse=True)
        for r in rows:
            self.layer.remove(r)

    def keyPressEvent(self, event) -> None:  # noqa: N802
        if event.key() in (Qt.Key.Key_Delete, Qt.Key.Key_Backspace):
            self.remove_selected()
            return
        super().keyPressEvent(event)


DOCK = DockSpec("markers", "Markers", "bottom", 45, 400, MarkersPanel, tab_with="breakdown")
