"""Status bar pieces: background progress with a Cancel button, and the load-report link.

Progress changes many times a second while the app must stay responsive, so the
pieces never trigger a relayout or a synchronous repaint (QProgressBar.setValue
and QStatusBar.showMessage repaint the whole dirty window at once): fixed sizes,
elided text, and a bar that only schedules an update.
"""

from __future__ import annotations

from PySide6.QtCore import QRectF, Qt, QTimer, Signal
from PySide6.QtGui import QPainter, QPalette
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPushButton, QWidget

from .session import Session


class ProgressBar(QWidget):
    """A thin bar; ``set_fraction`` schedules a repaint, never forces one.  Until the first
    fraction above 0 arrives (a child process still starting, a file being opened) a
    chunk moves back and forth, so the window never looks stuck."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.fraction = 0.0
        self.phase = 0.0
        self._tick = QTimer(self)
        self._tick.setInterval(60)
        self._tick.timeout.connect(self._advance)
        self.setFixedSize(200, 12)

    @property
    def indeterminate(self) -> bool:
        return self._tick.isActive()

    def set_fraction(self, fraction: float) -> None:
        fraction = max(0.0, min(1.0, float(fraction)))
        if fraction > 0:
            self._tick.stop()
        if abs(fraction - self.fraction) >= 0.002 or fraction in (0.0, 1.0):
            self.fraction = fraction
            self.update()

    def start_waiting(self) -> None:
        """Show activity with no fraction yet (until ``set_fraction`` gets one > 0)."""
        self.fraction = 0.0
        self._tick.start()

    def stop(self) -> None:
        self._tick.stop()

    def _advance(self) -> None:
        self.phase = (self.phase + 0.04) % 2.0
        self.update()

    def value(self) -> int:
        """Per mille, like a QProgressBar with range 0..1000."""
        return round(self.fraction * 1000)

    def paintEvent(self, _event) -> None:  # noqa: N802
        p = QPainter(self)
        p.setRenderHint(QPainter.RenderHint.Antialiasing)
        pal = self.palette()
        r = QRectF(self.rect()).adjusted(0.5, 0.5, -0.5, -0.5)
        p.setPen(pal.color(QPalette.ColorRole.Mid))
        p.setBrush(pal.color(QPalette.ColorRole.Base))
        p.drawRoundedRect(r, 3, 3)
        fill = None
        if self.indeterminate:
            pos = self.phase if self.phase <= 1.0 else 2.0 - self.phase
            w = r.width() * 0.25
            fill = QRectF(r.x() + (r.width() - w) * pos, r.y(), w, r.height())
        elif self.fraction > 0:
            fill = QRectF(r.x(), r.y(), r.width() * self.fraction, r.height())
        if fill is not None:
            p.setPen(Qt.PenStyle.NoPen)
            p.setBrush(pal.color(QPalette.ColorRole.Highlight))
            p.drawRoundedRect(fill, 3, 3)
        p.end()


class ProgressWidget(QWidget):
    """Progress of the session's background job; visible only while one runs."""

    def __init__(self, session: Session, parent=None):
        super().__init__(parent)
        self.session = session
        self.bar = ProgressBar(self)
        self.label = QLabel(self)
        self.label.setTextFormat(Qt.TextFormat.PlainText)
        self.label.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        self.label.setFixedSize(280, self.fontMetrics().height() + 4)
        self.cancel_button = QPushButton("Cancel", self)
        self.cancel_button.setToolTip("Stop loading / analyzing")
        self.cancel_button.clicked.connect(session.cancel)
        self.cancel_button.setFixedSize(self.cancel_button.sizeHint())
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
            self.bar.set_fraction(0.0)
            self.bar.start_waiting()
            self._set_text("Starting…")
        else:
            self.bar.stop()
        self.setVisible(busy)

    def _on_progress(self, fraction: float, message: str) -> None:
        self.bar.set_fraction(fraction)
        if message:
            self._set_text(message)

    def _set_text(self, text: str) -> None:
        text = self.label.fontMetrics().elidedText(text, Qt.TextElideMode.ElideMiddle,
                                                   self.label.width())
        if text != self.label.text():
            self.label.setText(text)


class LoadStatsLink(QLabel):
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
        rep = t.meta.load_stats
        skipped = rep.skipped_total
        self.setText(f"⚠ {skipped:,} events skipped" if skipped
                     else f"{rep.loaded:,} events loaded")

    def mouseReleaseEvent(self, event) -> None:  # noqa: N802
        if self.session.trace is not None:
            self.clicked.emit()
        super().mouseReleaseEvent(event)
