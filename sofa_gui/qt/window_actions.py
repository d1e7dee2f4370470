"""The main window's Edit menu, File ▸ Export, the timeline's keys in View, the
shortcut sheet (Help, ``?``) and the markers saved with each trace.

The timeline's own keys (W/A/S/D zoom and pan, F, Esc, M) work while the timeline has
the focus; their View entries name the key after a tab and do the same when chosen.
"""

from __future__ import annotations

import hashlib

from PySide6.QtGui import QAction, QKeySequence

from ..view.markers import MarkerSet
from . import export
from .shortcut_sheet import ShortcutSheet
from .slice_actions import SliceActions

#: Settings key prefix of a trace's markers (then a hash of its path).
MARKERS_KEY = "markers/"


def install(win) -> None:
    """Add the menus and wiring this module describes to main window ``win``."""
    win.slice_actions = SliceActions(win)
    _edit_menu(win)
    _export_menu(win)
    _timeline_keys(win)
    _help(win)
    win.panels["markers"].attach(win.timeline.marks)
    win.timeline.marks.changed.connect(lambda: save_markers(win))


def _act(win, menu, text: str, slot, keys=None) -> QAction:
    act = QAction(text, win)
    if keys:
        act.setShortcuts([QKeySequence(k) for k in keys])
    act.triggered.connect(slot)
    menu.addAction(act)
    return act


def _edit_menu(win) -> None:
    sa = win.slice_actions
    edit = win.menuBar().insertMenu(win.view_menu.menuAction(), _new_menu(win, "&Edit"))
    menu = edit.menu()
    win.edit_menu = menu

    def on_slice(fn):
        return lambda: fn(win.session.selected_slice) if win.session.selected_slice >= 0 else None

    win.copy_action = _act(win, menu, "&Copy", sa.copy, ["Ctrl+C"])
    _act(win, menu, "Copy Slice &Details", on_slice(sa.copy_details), ["Ctrl+Shift+C"])
    menu.addSeparator()
    _act(win, menu, "&Find All Like Selected Slice", on_slice(sa.find_like), ["Ctrl+Shift+F"])
    _act(win, menu, "Show Selected Slice in &Statistics", on_slice(sa.show_in_statistics))
    _act(win, menu, "Go to Flow &Partner", on_slice(sa.open_partner), ["Ctrl+Shift+P"])


def _new_menu(win, title: str):
    from PySide6.QtWidgets import QMenu

    return QMenu(title, win)


def _export_menu(win) -> None:
    menu = win.file_menu.addMenu("E&xport")
    win.file_menu.insertMenu(win.report_action, menu)
    win.export_menu = menu
    tl = win.timeline
    _act(win, menu, "Timeline View as &PNG…", lambda: export.run_export(
        win, lambda p: export.timeline_png(tl, p),
        export.ask_path(win, "Export timeline view", "timeline.png", "PNG image (*.png)")))
    _act(win, menu, "Timeline View as &SVG…", lambda: export.run_export(
        win, lambda p: export.timeline_svg(tl, p),
        export.ask_path(win, "Export timeline view", "timeline.svg", "SVG image (*.svg)")))
    tables = menu.addMenu("&Table as CSV")
    tables.aboutToShow.connect(lambda: _fill_tables(win, tables))
    win.report_html_action = _act(win, menu, "&Report as HTML…", lambda: export.run_export(
        win, lambda p: export.report_html(win.session, p),
        export.ask_path(win, "Export report", "report.html", "HTML report (*.html)")))
    menu.aboutToShow.connect(lambda: _enable_export(win, menu))


def _enable_export(win, menu) -> None:
    has_trace = win.session.trace is not None
    for act in menu.actions():
        act.setEnabled(has_trace)
    win.report_html_action.setEnabled(has_trace and win.session.analysis_done)


def _fill_tables(win, menu) -> None:
    menu.clear()
    for title, view in export.tables_of(win).items():
        rows = view.model().rowCount()
        act = menu.addAction(f"{title} ({rows} rows)…")
        act.setEnabled(rows > 0)
        name = title.lower().replace(" ", "-").replace("(", "").replace(")", "") + ".csv"
        act.triggered.connect(lambda _c=False, v=view, n=name: export.run_export(
            win, lambda p: export.table_csv(v, p),
            export.ask_path(win, "Export table", n, "CSV table (*.csv)")))


def _timeline_keys(win) -> None:
    """The timeline's keys in View, each named after a tab (they act on the timeline)."""
    tl, v = win.timeline, win.view_menu
    view = win.session.view
    centre = lambda: (view.x0 + view.x1) / 2  # noqa: E731
    span = lambda: view.x1 - view.x0  # noqa: E731
    first = v.actions()[0] if v.actions() else None
    entries = (
        ("Zoom In\tW", lambda: tl.zoom_around(centre(), 0.75)),
        ("Zoom Out\tS", lambda: tl.zoom_around(centre(), 1 / 0.75)),
        ("Pan Left\tA", lambda: tl.pan_by(-0.15 * span())),
        ("Pan Right\tD", lambda: tl.pan_by(0.15 * span())),
        ("Zoom to Selection\tF", tl.fit_selection),
        ("Clear Selection\tEsc", lambda: tl.keyPressEvent(_esc_event())),
        ("Add &Marker\tM", tl.mark_selection),
        ("Clear Measurement", tl.marks.clear_measure),  # measure: Shift+click twice
    )
    menu = v.addMenu("&Timeline")
    v.insertMenu(first, menu)
    for text, slot in entries:
        _act(win, menu, text, slot)
    win.timeline_menu = menu


def _esc_event():
    from PySide6.QtCore import QEvent, Qt
    from PySide6.QtGui import QKeyEvent

    return QKeyEvent(QEvent.Type.KeyPress, Qt.Key.Key_Escape, Qt.KeyboardModifier.NoModifier)


def _help(win) -> None:
    h = win.help_menu
    first = h.actions()[0] if h.actions() else None
    act = QAction("&Keyboard Shortcuts", win)
    # "?" is Shift+/ on most layouts; platforms differ in whether Shift is part of it
    act.setShortcuts([QKeySequence("?"), QKeySequence("Shift+?"), QKeySequence("F1")])
    act.triggered.connect(lambda: show_shortcuts(win))
    h.insertAction(first, act)
    win.shortcuts_action = act


def show_shortcuts(win) -> ShortcutSheet:
    sheet = ShortcutSheet(win)
    sheet.show()
    win.shortcut_sheet = sheet
    return sheet


def markers_key(path: str) -> str:
    return MARKERS_KEY + hashlib.sha1(str(path).encode("utf-8", "replace")).hexdigest()[:16]


def save_markers(win) -> None:
    path = win.session.path
    if path:
        win.prefs.set_value(markers_key(path), win.timeline.marks.markers.to_json())


def load_markers(win) -> None:
    """The markers remembered for the open trace (none for a new one)."""
    path = win.session.path
    raw = win.prefs.value(markers_key(path)) if path else None
    win.timeline.marks.set_markers(MarkerSet.from_json(raw))
    win.panels["markers"].refresh()
