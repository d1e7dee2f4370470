"""Search bar (Ctrl+F): substring or regex over every slice name of the whole trace.

Shows the match count and the current match, steps with Enter / Shift+Enter or the
arrow buttons. :class:`SearchHighlighter` hands the matches to the timeline.
"""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import QObject, Qt, QTimer
from PySide6.QtGui import QKeySequence, QShortcut
from PySide6.QtWidgets import QHBoxLayout, QLineEdit, QToolButton, QWidget

from ...view.search import SearchQuery
from ..session import Session
from .common import plain_label, set_muted

#: Typing pauses this long before a search runs.
DEBOUNCE_MS = 200
#: Most matches highlighted at once: the timeline indexes highlighted slices on the GUI
#: thread (~1 ms per 1,000), so beyond this only the visible ones are highlighted.
HIGHLIGHT_LIMIT = 50_000


class SearchBar(QWidget):
    """A one-line search field with options, count and next/previous."""

    def __init__(self, session: Session, parent=None):
        super().__init__(parent)
        self.session = session
        self.edit = QLineEdit(self)
        self.edit.setPlaceholderText("Search all slice names (substring; .* for regex)")
        self.edit.setClearButtonEnabled(True)
        self.edit.setMinimumWidth(260)
        self.regex = self._toggle(".*", "Regular expression")
        self.case = self._toggle("Aa", "Match case")
        self.prev_btn = self._button("▲", "Previous match (Shift+Enter)", -1)
        self.next_btn = self._button("▼", "Next match (Enter)", +1)
        self.count = plain_label("", self)
        set_muted(self.count)
        self.count.setMinimumWidth(150)
        close = QToolButton(self)
        close.setText("✕")
        close.setAutoRaise(True)
        close.setToolTip("Close search (Esc)")
        close.clicked.connect(self.close_bar)
        lay = QHBoxLayout(self)
        lay.setContentsMargins(6, 2, 6, 2)
        lay.addWidget(plain_label("Find:", self))
        lay.addWidget(self.edit, 1)
        for w in (self.regex, self.case, self.prev_btn, self.next_btn, self.count, close):
            lay.addWidget(w)
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(DEBOUNCE_MS)
        self._timer.timeout.connect(self.run_search)
        self._ran: SearchQuery | None = None  # the query this bar last ran
        self.edit.textEdited.connect(lambda _t: self._timer.start())
        self.edit.returnPressed.connect(self._on_return)
        self.regex.toggled.connect(lambda _on: self.run_search())
        self.case.toggled.connect(lambda _on: self.run_search())
        QShortcut(QKeySequence(Qt.Key.Key_Escape), self.edit, self.close_bar,
                  context=Qt.ShortcutContext.WidgetShortcut)
        QShortcut(QKeySequence("Shift+Return"), self.edit, lambda: self.step(-1),
                  context=Qt.ShortcutContext.WidgetShortcut)
        session.search_changed.connect(self._update_count)
        session.match_changed.connect(self._update_count)
        session.trace_changed.connect(self._update_count)

    def _toggle(self, text: str, tip: str) -> QToolButton:
        b = QToolButton(self)
        b.setText(text)
        b.setToolTip(tip)
        b.setCheckable(True)
        return b

    def _button(self, text: str, tip: str, delta: int) -> QToolButton:
        b = QToolButton(self)
        b.setText(text)
        b.setToolTip(tip)
        b.setAutoRaise(True)
        b.clicked.connect(lambda: self.step(delta))
        return b

    def query(self) -> SearchQuery:
        return SearchQuery(self.edit.text(), self.regex.isChecked(), self.case.isChecked())

    def open_bar(self) -> None:
        self.show()
        self.edit.setFocus()
        self.edit.selectAll()

    def close_bar(self) -> None:
        self._timer.stop()
        self.hide()
        self._ran = None
        if self.session.search_query is not None:  # a Statistics highlight stays
            self.session.search(None)

    def run_search(self) -> None:
        self._timer.stop()
        self._ran = self.query()
        self.session.search(self._ran)

    def step(self, delta: int) -> None:
        """Enter / F3: the next match; a query edited since it last ran runs first.  With
        nothing typed, F3 steps through whatever is highlighted (a Statistics row, a query)."""
        if self._timer.isActive() or (self.edit.text() and self.query() != self._ran):
            self.run_search()
        self.session.step_highlight(delta)

    def _on_return(self) -> None:
        self.step(+1)

    def _update_count(self) -> None:
        s = self.session
        n = len(s.matches)
        if s.search_error:
            text = s.search_error
        elif s.search_query is None or not s.search_query.text:
            text = ""
        elif n == 0:
            text = "no matches"
        elif s.match_pos < 0:
            text = f"{n:,} matches" + (" (zoom in to highlight)"
                                       if n > HIGHLIGHT_LIMIT else "")
        else:
            text = f"{s.match_pos + 1:,} of {n:,}"
        self.count.setText(text)
        self.prev_btn.setEnabled(n > 0)
        self.next_btn.setEnabled(n > 0)


class SearchHighlighter(QObject):
    """Highlights the session's matches on ``timeline`` (``set_highlight``).

    Up to :data:`HIGHLIGHT_LIMIT` matches are all highlighted; with more, only those
    in the visible window are, refreshed after each zoom or pan, so a broad search
    ("a") never freezes the GUI.
    """

    def __init__(self, session: Session, timeline, parent=None):
        super().__init__(parent)
        self.session, self.timeline = session, timeline
        self.shown = 0  # matches currently highlighted
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(80)
        self._timer.timeout.connect(self.refresh)
        session.search_changed.connect(self.refresh)
        timeline.range_changed.connect(self._on_range)

    @property
    def partial(self) -> bool:
        return len(self.session.matches) > HIGHLIGHT_LIMIT

    def _on_range(self, *_range) -> None:
        if self.partial:
            self._timer.start()

    def refresh(self) -> None:
        m = self.session.matches
        if self.partial:
            m = self._visible(m)
            if len(m) > HIGHLIGHT_LIMIT:
                m = m[:0]
        self.shown = len(m)
        self.timeline.set_highlight(m if len(m) else None)

    def _visible(self, matches: np.ndarray) -> np.ndarray:
        trace = self.session.trace
        lo, hi = self.timeline.visible_range()
        starts = trace.slices.start[matches]
        a = int(np.searchsorted(starts, lo - trace.max_dur_ns, side="left"))
        b = int(np.searchsorted(starts, hi, side="right"))
        cand = matches[a:b]
        return cand[trace.slices.end[cand] > lo] if len(cand) else cand
