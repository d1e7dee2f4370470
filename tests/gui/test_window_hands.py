"""The window's hands: slice menu, Ctrl+C, markers kept with the trace, the shortcut
sheet and File ▸ Export, driven through the real widgets."""

from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtCore import QSettings, Qt
from PySide6.QtGui import QGuiApplication, QImage
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QFileDialog

from sofa_gui.core.samples import demo_trace_path
from sofa_gui.core.trace import Kind


@pytest.fixture
def win(open_window):
    return open_window(demo_trace_path(), (1366, 768))


def _launched_kernel(trace) -> int:
    """A kernel with a flow arrow from its launch."""
    dst = trace.flows.dst
    kernels = dst[trace.slices.kind[dst] == int(Kind.KERNEL)]
    return int(kernels[0])


def _menu_action(menu, text: str):
    return next(a for a in menu.actions() if a.text().replace("&", "").startswith(text))


def test_slice_menu_copies_finds_zooms_and_follows_the_flow(qtbot, win):
    s, trace = win.session, win.session.trace
    k = _launched_kernel(trace)
    s.select_slice(k)
    menu = win.slice_actions.menu_for(k)
    QGuiApplication.clipboard().clear()
    _menu_action(menu, "Copy Name").trigger()
    assert QGuiApplication.clipboard().text() == trace.full_name(k)
    _menu_action(menu, "Copy Details").trigger()
    details = QGuiApplication.clipboard().text()
    assert "Duration:" in details and "Lane:" in details and trace.name_of(k)[:20] in details
    _menu_action(menu, "Find All Like This").trigger()
    like = np.flatnonzero(trace.slices.name == trace.slices.name[k])
    assert np.array_equal(s.matches, like) and len(like) > 1
    stats = win.panels["statistics"]
    row = stats.proxy.mapToSource(stats.view.currentIndex()).row()
    assert k in stats.model.table.members(row)
    assert not win.docks["statistics"].visibleRegion().isEmpty()
    s.zoom_to(trace.start_ns, trace.end_ns)
    _menu_action(menu, "Zoom To").trigger()
    lo, hi = win.timeline.visible_range()
    a, b = int(trace.slices.start[k]), int(trace.slices.start[k] + trace.slices.dur[k])
    assert lo <= a and hi >= b and hi - lo < 2 * (b - a) + 1000
    partner = _menu_action(menu, "Go to Flow Partner")
    assert partner.isEnabled()
    partner.trigger()
    assert s.selected_slice == int(trace.flows.src[trace.flows.dst == k][0])


def test_right_click_opens_the_menu_and_ctrl_c_copies_the_selected_name(qtbot, win):
    s, trace, tl = win.session, win.session.trace, win.timeline
    k = _launched_kernel(trace)
    s.select_slice(k, reveal=True)
    qtbot.wait(50)
    tl.context_requested.emit(k, tl.mapToGlobal(tl.rect().center()))
    menu = win.slice_actions.menu
    assert menu is not None and menu.isVisible()
    assert [a.text().split("\t")[0].replace("&", "") for a in menu.actions()][:2] == [
        "Copy Name", "Copy Details"]
    menu.close()
    QGuiApplication.clipboard().clear()
    tl.setFocus()
    QTest.keyClick(tl.graphics_view(), Qt.Key.Key_C, Qt.KeyboardModifier.ControlModifier)
    assert QGuiApplication.clipboard().text() == trace.full_name(k)


def test_markers_are_listed_renamed_and_remembered_with_the_trace(qtbot, win, open_window):
    tl = win.timeline
    tl.marks.add(1_000_000.0)
    tl.marks.add(5_000_000.0, "slow step")
    panel = win.panels["markers"]
    assert panel.table.rowCount() == 2 and panel.has_content()
    panel.table.item(0, 0).setText("warm-up")  # an edit in the Markers dock renames it
    assert tl.marks.markers.items[0].name == "warm-up"
    assert panel.table.item(1, 2).text()  # the time since the previous marker
    win.prefs.flush()
    other = open_window(None)
    other.settings = win.settings  # the same user settings, a new window
    other.prefs = win.prefs
    other.open_path(demo_trace_path())
    qtbot.waitUntil(lambda: not other.session.busy, timeout=120000)
    names = [m.name for m in other.timeline.marks.markers.items]
    assert names == ["warm-up", "slow step"]
    assert other.panels["markers"].table.rowCount() == 2


def test_question_mark_opens_a_sheet_with_every_shortcut(qtbot, win):
    tl = win.timeline
    tl.setFocus()
    QTest.keyClick(tl.graphics_view(), Qt.Key.Key_Question, Qt.KeyboardModifier.ShiftModifier)
    sheet = win.shortcut_sheet
    assert sheet.isVisible()
    keys = {k for k, _t in sheet.entries()}
    for key in ("W", "A", "S", "D", "F", "Esc", "M", "Ctrl+C", "F3", "Ctrl+F"):
        assert any(key in k.split(", ") for k in keys), key
    timeline_menu = [a.text() for a in win.timeline_menu.actions()]
    assert any(t.endswith("\tW") for t in timeline_menu)
    assert any(t.endswith("\tEsc") for t in timeline_menu)
    sheet.close()


def test_export_writes_png_svg_csv_and_the_report(qtbot, win, tmp_path, monkeypatch):
    answers = iter([tmp_path / "t.png", tmp_path / "t.svg", tmp_path / "iters.csv",
                    tmp_path / "report.html"])
    monkeypatch.setattr(QFileDialog, "getSaveFileName",
                        staticmethod(lambda *a, **k: (str(next(answers)), "")))
    acts = {a.text().replace("&", ""): a for a in win.export_menu.actions()}
    acts["Timeline View as PNG…"].trigger()
    acts["Timeline View as SVG…"].trigger()
    img = QImage(str(tmp_path / "t.png"))
    assert img.width() == win.timeline.width() and img.height() == win.timeline.height()
    assert "<svg" in (tmp_path / "t.svg").read_text()[:2000]
    tables = acts["Table as CSV"].menu()
    tables.aboutToShow.emit()
    iters = next(a for a in tables.actions() if a.text().startswith("Iterations"))
    iters.trigger()
    lines = (tmp_path / "iters.csv").read_text().splitlines()
    assert lines[0].startswith("#,Step") and len(lines) == 1 + len(win.session.iterations)
    acts["Report as HTML…"].trigger()
    assert "<html" in (tmp_path / "report.html").read_text()[:500].lower()


def test_dialogs_start_beside_the_open_trace(qtbot, win, monkeypatch):
    seen = []
    monkeypatch.setattr(QFileDialog, "getOpenFileName",
                        staticmethod(lambda _p, _t, start, _f: (seen.append(start), ("", ""))[1]))
    win.compare_dialog()
    assert seen == [str(demo_trace_path().parent)]


def test_an_empty_compare_is_never_the_dock_shown(qtbot, tmp_path):
    from sofa_gui.qt.main_window import MainWindow

    settings = QSettings(str(tmp_path / "s.ini"), QSettings.Format.IniFormat)
    first = MainWindow(settings)
    qtbot.addWidget(first)
    first.show()
    first.docks["compare"].show()
    first.docks["compare"].raise_()  # the user left Compare in front
    first.save_window_state()
    first.session.shutdown()
    again = MainWindow(settings)
    qtbot.addWidget(again)
    again.show()
    qtbot.waitExposed(again)
    assert again.docks["compare"].isHidden()
    assert not again.docks["breakdown"].visibleRegion().isEmpty()
    again.session.shutdown()
