"""Status bar pieces: background progress with a Cancel button, and the load-report link."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QProgressBar, QPushButton, QWidget

from .session import Session


class ProgressWidget(QWidget):
    """Progress of the session's background job; visible only while one runs."""

    def __init__(self, session: Session, parent=None):
        super().__init__(parent)
        self.session = session
        self.bar = QProgressBar(self)
        self.bar.setRange(0, 1000)
        self.bar.setFixedWidth(220)
        self.bar.setTextVisible(False)
        self.label = QLabel(self)
        self.label.setTextFormat(Qt.TextFormat.PlainText)
        self.label.setMinimumWidth(200)
        self.cancel_button = QPushButton("Cancel", self)
        self.cancel_button.setToolTip("Stop loading / analysing")
        self.cancel_button.clicked.connect(session.cancel)
        lay = QHBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.label)
        lay.addWidget(self.bar)
        lay.addWidget(self.cancel_button)
        session.busy_changed.connect(self._on_busy)
        session.progress.connect(self._on_progress)
        self.setVisible(False)

    def _on_busy(self, busy: bool) -> None:
        if busy:
            self.bar.setValue(0)
            self.label.setText("Starting…")
        self.setVisible(busy)

    def _on_progress(self, fraction: float, message: str) -> None:
        self.bar.setValue(int(max(0.0, min(1.0, fraction)) * 1000))
        if message:
            self.label.setText(message)


class ReportLink(QLabel):
    """``⚠ N events skipped`` (or ``N events loaded``); click to open the load report."""

    clicked = Signal()

    def __init__(self, session: Session, parent=None):
        super().__init__(parent)
        self.session = session
        self.setTextFormat(Qt.TextFormat.PlainText)
        self.setCursor(Qt.CursorShape.PointingHandCursor)
        self.setToolTip("Show the load report")
        session.trace_changed.connect(self.refresh)
        self.refresh()

    def refresh(self) -> None:
        t = self.session.trace
        if t is None:
            self.setText("")
            return
        rep = t.meta.report
        skipped = rep.skipped_total
        self.setText(f"⚠ {skipped:,} events skipped" if skipped
                     else f"{rep.loaded:,} events loaded")

    def mouseReleaseEvent(self, event) -> None:  # noqa: N802
        if self.session.trace is not None:
            self.clicked.emit()
        super().mouseReleaseEvent(event)
