"""The window from the screen: first size, memory per screen size, laptop layouts."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QSettings
from PySide6.QtWidgets import QStyleOptionViewItem

from sofa_gui.core.samples import demo_trace_path
from sofa_gui.qt.window_layout import MEDIUM, NARROW, WIDE, layout_for, screen_key


@pytest.fixture
def settings(tmp_path):
    return QSettings(str(tmp_path / "settings.ini"), QSettings.Format.IniFormat)


def _window(qtbot, settings):
    from sofa_gui.qt.main_window import MainWindow

    w = MainWindow(settings)
    qtbot.addWidget(w)
    return w


def test_width_classes():
    assert layout_for(2560) is WIDE and layout_for(1920) is WIDE
    assert layout_for(1600) is MEDIUM and layout_for(1366) is MEDIUM
    assert layout_for(1280) is NARROW and layout_for(1024) is NARROW


def test_first_window_takes_the_available_screen_and_is_remembered_per_size(qtbot, settings):
    w = _window(qtbot, settings)
    avail = w.screen().availableGeometry()
    assert w.geometry() == avail  # nothing of it off-screen
    w.resize(avail.width() - 100, avail.height() - 80)
    w.save_window_state()
    key = screen_key(avail.size())
    assert settings.contains(f"{key}/geometry") and settings.contains(f"{key}/state")
    again = _window(qtbot, settings)
    assert (again.width(), again.height()) == (avail.width() - 100, avail.height() - 80)
    # another screen size does not inherit it
    settings.remove(key)
    settings.setValue("window/9999x9999/geometry", w.saveGeometry())
    other = _window(qtbot, settings)
    assert other.geometry() == avail
    w.session.shutdown()
    again.session.shutdown()
    other.session.shutdown()


def _on_screen(w, widget) -> bool:
    top_left = widget.mapTo(w, widget.rect().topLeft())
    bottom_right = widget.mapTo(w, widget.rect().bottomRight())
    return w.rect().contains(top_left) and w.rect().contains(bottom_right)


@pytest.mark.parametrize("size", [(1280, 800), (1366, 768)])
def test_laptop_screens_show_everything_readable(qtbot, open_window, size):
    w = open_window(demo_trace_path(), size)
    qtbot.wait(50)
    assert (w.width(), w.height()) == size
    assert _on_screen(w, w.statusBar()) and w.statusBar().isVisible()
    for key in ("findings", "iterations", "breakdown"):
        assert _on_screen(w, w.docks[key]), key
    assert w.timeline.height() >= 0.45 * size[1]
    # the top three findings' heads are in view
    panel = w.panels["findings"]
    viewport = panel.scroll.viewport()
    for card in panel.cards[:3]:
        assert card.head.mapTo(viewport, card.head.rect().bottomLeft()).y() <= viewport.height()
        assert card.title.text() == card.finding.title  # wrapped if long, never cut
        assert card.head.height() <= 3 * card.title.fontMetrics().height() + 6
    # the breakdown's category names are not cut
    table = w.panels["breakdown"].table
    fm = table.fontMetrics()
    for r in range(table.rowCount()):
        text = table.item(r, 0).text()
        assert table.columnWidth(0) >= fm.horizontalAdvance(text) + 20, text
    # the iteration labels are not cut
    it = w.panels["iterations"].table
    labels = [it.model().index(r, 1).data() for r in range(it.model().rowCount())]
    assert all(it.columnWidth(1) >= it.fontMetrics().horizontalAdvance(t) + 8 for t in labels)


def test_a_long_kernel_name_keeps_its_tail_in_statistics(qtbot, open_window):
    w = open_window(demo_trace_path(), (1280, 800))
    st = w.panels["statistics"]
    w.docks["statistics"].show()
    w.docks["statistics"].raise_()
    st.show_table("kernel", "trace")
    qtbot.wait(50)
    view = st.view
    delegate = view.itemDelegateForColumn(0)
    rows = st.model.table.rows
    view.setColumnWidth(0, 150)
    long_row = max((r for r in range(len(rows)) if "::" in rows[r].name),
                   key=lambda r: len(rows[r].name))
    name = rows[long_row].name
    index = st.proxy.mapFromSource(st.model.index(long_row, 0))
    opt = QStyleOptionViewItem()
    opt.rect = view.visualRect(index)
    delegate.initStyleOption(opt, index)
    assert len(opt.text) < len(name) and "::" not in opt.text  # namespaces gone first
    assert index.data() == name  # the model (copy, tooltip, sort) keeps the full name
    assert view.rowHeight(0) <= view.fontMetrics().height() + 8
    view.scrollToBottom()
    st.show_table("kernel", "steady")  # another scope starts at its top rows
    assert view.verticalScrollBar().value() == 0


def test_header_figures_are_never_cut_at_1366_on_the_two_rank_folder(qtbot, open_window, data_dir):
    w = open_window(data_dir / "ranks", (1366, 768))
    top = w.summary.values["Top bottleneck"]
    right = top.mapTo(w.summary, top.rect().topLeft()).x() + top.fontMetrics().horizontalAdvance(
        top.text())
    assert right <= w.summary.width(), top.text()  # elided if need be, never cut
    full = w.summary.text_of("Top bottleneck")
    assert full.endswith("% of step)") and full in top.toolTip()
