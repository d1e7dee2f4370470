"""Load report viewer: how many events were read, loaded and skipped (and why)."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QHeaderView,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
)

from ...core.trace import Trace
from .common import plain_label


def report_lines(trace: Trace) -> list[str]:
    """Headline lines of the report (also used for the dialog's header)."""
    rep = trace.meta.load_stats
    lines = [
        f"Source: {trace.meta.source}",
        f"Format: {trace.meta.format}",
        f"Events read: {rep.read:,} · loaded: {rep.loaded:,} · skipped: {rep.skipped_total:,}",
    ]
    lines += [f"Note: {n}" for n in rep.notes]
    return lines


class LoadReportDialog(QDialog):
    """A table of skip reasons with counts, below the headline numbers."""

    def __init__(self, trace: Trace, parent=None):
        super().__init__(parent)
        self.setWindowTitle("Load report")
        self.resize(640, 420)
        lay = QVBoxLayout(self)
        lay.addWidget(plain_label("\n".join(report_lines(trace)), self, wrap=True,
                                  selectable=True))
        skipped = sorted(trace.meta.load_stats.skipped.items(), key=lambda kv: -kv[1])
        self.table = QTableWidget(len(skipped), 2, self)
        self.table.setHorizontalHeaderLabels(["Skipped because", "Events"])
        self.table.verticalHeader().setVisible(False)
        self.table.horizontalHeader().setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        for r, (reason, n) in enumerate(skipped):
            self.table.setItem(r, 0, QTableWidgetItem(str(reason)))
            item = QTableWidgetItem(f"{n:,}")
            item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
            self.table.setItem(r, 1, item)
        if skipped:
            lay.addWidget(self.table, 1)
        else:
            self.table.hide()
            lay.addWidget(plain_label("Every event in the source was loaded.", self))
            lay.addStretch(1)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close, self)
        buttons.rejected.connect(self.reject)
        lay.addWidget(buttons)
