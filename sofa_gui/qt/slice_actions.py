"""What a right-click on a slice offers, and Ctrl+C.

The slice menu: Copy Name, Copy Details (as text), Find All Like This (every slice of the
name highlighted like search matches, F3 steps through them, and its Statistics row
selected), Zoom To, Show in Statistics, Go to Flow Partner (the launch of a kernel, the
kernel of a launch). On empty timeline space: Add Marker Here and Clear Measurement.
Selection goes through the session's intents only.

Ctrl+C copies the selected rows of the table that has the focus (tab-separated, full
names), else the selected slice's full name.
"""

from __future__ import annotations

from PySide6.QtCore import QObject, QPoint, Qt
from PySide6.QtGui import QAction, QGuiApplication
from PySide6.QtWidgets import QAbstractItemView, QApplication, QMenu

from ..view.slice_text import flow_partners, same_name, slice_details


class SliceActions(QObject):
    """The slice context menu and Copy of one main window."""

    def __init__(self, window):
        super().__init__(window)
        self.win = window
        self.session = window.session
        self.menu: QMenu | None = None
        window.timeline.context_requested.connect(self.popup)

    # -- the menu ---------------------------------------------------------------------
    def menu_for(self, i: int) -> QMenu:
        """The context menu for slice ``i`` (-1: empty timeline space)."""
        menu = QMenu(self.win)
        if i >= 0 and self.session.trace is not None:
            self._add(menu, "Copy &Name", lambda: self.copy_name(i), "Ctrl+C")
            self._add(menu, "Copy &Details", lambda: self.copy_details(i))
            menu.addSeparator()
            self._add(menu, "&Find All Like This", lambda: self.find_like(i))
            self._add(menu, "&Zoom To", lambda: self.zoom_to(i), "F")
            self._add(menu, "Show in &Statistics", lambda: self.show_in_statistics(i))
            partners = flow_partners(self.session.trace, i)
            act = self._add(menu, "Go to Flow &Partner", lambda: self.open_partner(i))
            act.setEnabled(bool(partners))
            menu.addSeparator()
        tl = self.win.timeline
        x = getattr(tl, "context_x", None)
        if x is not None:
            self._add(menu, "Add &Marker Here", lambda: tl.marks.add(x))
        clear = self._add(menu, "Clear Measurement", tl.marks.clear_measure)
        clear.setEnabled(tl.marks.measure.a is not None)
        return menu

    @staticmethod
    def _add(menu: QMenu, text: str, slot, shortcut: str = "") -> QAction:
        act = menu.addAction(text + (f"\t{shortcut}" if shortcut else ""))
        act.triggered.connect(slot)
        return act

    def popup(self, i: int, pos: QPoint) -> None:
        self.menu = self.menu_for(int(i))
        self.menu.popup(pos)

    # -- actions ----------------------------------------------------------------------
    def copy_name(self, i: int) -> None:
        QGuiApplication.clipboard().setText(self.session.trace.full_name(i))

    def copy_details(self, i: int) -> None:
        QGuiApplication.clipboard().setText(slice_details(self.session.trace, i))

    def find_like(self, i: int) -> None:
        """Highlight every slice named like ``i`` and select its Statistics row."""
        trace = self.session.trace
        matches = same_name(trace, i)
        self.session.show_instances(matches, focus=i)
        self.show_in_statistics(i)
        self.win.statusBar().showMessage(
            f"{len(matches):,} slices named {trace.name_of(i)[:80]} (F3: next)", 8000)

    def zoom_to(self, i: int) -> None:
        s = self.session.trace.slices
        start = int(s.start[i])
        self.session.zoom_to(start, start + int(s.dur[i]), pad=True)

    def show_in_statistics(self, i: int) -> None:
        if self.win.panels["statistics"].show_slice_row(i):
            self.win.docks["statistics"].show()
            self.win.docks["statistics"].raise_()
        else:
            self.win.statusBar().showMessage("Statistics has no table for this kind of slice",
                                             5000)

    def open_partner(self, i: int) -> None:
        partners = flow_partners(self.session.trace, i)
        if partners:
            self.session.select_slice(partners[0], reveal=True)

    def copy(self) -> None:
        """Ctrl+C: the focused table's selected rows, else the selected slice's name."""
        view = _focused_view()
        if view is not None and view.selectionModel() is not None and (
                view.selectionModel().hasSelection()):
            QGuiApplication.clipboard().setText(table_rows_text(view))
            return
        i = self.session.selected_slice
        if i >= 0 and self.session.trace is not None:
            self.copy_name(i)


def _focused_view() -> QAbstractItemView | None:
    w = QApplication.focusWidget()
    while w is not None and not isinstance(w, QAbstractItemView):
        w = w.parentWidget()
    return w


def table_rows_text(view: QAbstractItemView) -> str:
    """The selected rows of ``view``, tab-separated, as the model holds them (full text)."""
    model = view.model()
    rows = sorted({ix.row() for ix in view.selectionModel().selectedIndexes()})
    cols = [c for c in range(model.columnCount())
            if not getattr(view, "isColumnHidden", lambda _c: False)(c)]
    return "\n".join("\t".join(str(model.index(r, c).data(Qt.ItemDataRole.DisplayRole) or "")
                               for c in cols) for r in rows)
