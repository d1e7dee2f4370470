"""Statistics dock and the timeline's area selection, on the real ResNet-50 sample."""

from __future__ import annotations

import numpy as np
import pytest
from PySide6 import QtCore
from PySide6.QtTest import QTest
from test_timeline_interaction import drag

from sofa_gui.core.analysis import stats
from sofa_gui.core.samples import demo_trace_path
from sofa_gui.core.trace import Kind, LaneKind
from sofa_gui.core.units import fmt_bytes, fmt_rate


@pytest.fixture
def win(open_window):
    return open_window(demo_trace_path())


def _click_row(qtbot, view, row: int) -> None:
    rect = view.visualRect(view.model().index(row, 0))
    qtbot.mouseClick(view.viewport(), QtCore.Qt.MouseButton.LeftButton, pos=rect.center())


def test_table_matches_the_core_and_a_click_highlights_every_instance(win, qtbot):
    panel = win.panels["statistics"]
    assert panel.kind == "kernel" and panel.scope_key == "trace"
    # a tab behind another (moved off screen, still 'visible') computes nothing until chosen
    assert panel.visibleRegion().isEmpty() and panel.model.table is None
    win.docks["statistics"].raise_()
    qtbot.waitUntil(lambda: panel.model.table is not None)
    want = stats.compute_table(win.session.trace, "kernel")
    model = panel.model
    assert [r.name for r in model.table.rows[:5]] == [r.name for r in want.rows[:5]]
    assert panel.proxy.index(0, 0).data() == want.rows[0].name  # longest total first
    assert "8,772 instances" in panel.caption.text()
    win.docks["statistics"].raise_()
    _click_row(qtbot, panel.view, 1)
    row = want.rows[1]
    members = want.members(1)
    s = win.session
    assert len(members) == row.count == len(s.matches)
    np.testing.assert_array_equal(s.matches, members)
    assert s.selected_slice == row.longest
    assert win.timeline.model.highlight is not None
    lo, hi = win.timeline.visible_range()
    trace = s.trace
    assert lo <= trace.slices.start[row.longest] and trace.slices.end[row.longest] <= hi


def test_ctrl_drag_selects_a_range_over_the_crossed_lanes_and_esc_clears(win, qtbot):
    tl, s = win.timeline, win.session
    trace = s.trace
    gpu = int(np.flatnonzero(np.asarray(trace.lanes.kind) == LaneKind.GPU)[0])
    i = s.iterations
    tl.zoom_to(int(i.starts[2]), int(i.ends[2]))
    before = tl.visible_range()
    top = tl.model.layout.lane_top[gpu]
    y = tl.view_point(before[0], top + 0.5).y()
    vw = tl.view_box().width()
    x0 = tl.view_point(before[0], 0).x() + int(vw * 0.2)
    x1 = tl.view_point(before[0], 0).x() + int(vw * 0.6)
    ctrl = QtCore.Qt.KeyboardModifier.ControlModifier
    with qtbot.waitSignal(s.range_selected, timeout=3000):
        drag(tl.graphics_view().viewport(), QtCore.QPoint(x0, y), QtCore.QPoint(x1, y), ctrl)
    assert tl.visible_range() == before  # Ctrl-drag selects; it does not zoom
    a, b, lanes = s.selected_range
    assert lanes == (gpu,)
    assert 0.35 < (b - a) / (before[1] - before[0]) < 0.45
    panel = win.panels["statistics"]
    assert panel.scope_key == "range" and win.docks["statistics"].isVisible()
    sl = trace.slices
    inside = ((sl.lane == gpu) & (sl.kind == int(Kind.KERNEL)) & (sl.start >= a)
              & (sl.start < b))
    assert panel.model.table.instances == int(inside.sum()) > 10
    assert f"{int(inside.sum()):,} instances" in panel.caption.text()
    assert "over 1 lanes" in panel.caption.text()
    tl.setFocus()
    QTest.keyClick(tl.graphics_view(), QtCore.Qt.Key.Key_Escape)
    assert s.selected_range is None and tl.area is None
    assert panel.scope_key == "trace"


def test_iteration_and_steady_scopes_follow_the_selection(win, qtbot):
    panel = win.panels["statistics"]
    win.docks["statistics"].raise_()  # an off-screen tab follows the selection when chosen
    panel.show_table("op", "iteration")
    assert "no iteration selected" in panel.caption.text()
    win.session.select_iteration(2)
    assert panel.caption.text().startswith("iteration 2 (ProfilerStep#7)")
    panel.show_table("copy", "steady")
    assert panel.model.columns[-3:] == ("Direction", "Bytes", "Rate")
    assert panel.proxy.index(0, panel.model.columns.index("Rate")).data().endswith("GB/s")


def test_clicking_a_breakdown_category_opens_its_rows(win, qtbot):
    win.session.select_iteration(2)
    bp = win.panels["breakdown"]
    win.docks["breakdown"].raise_()
    cats = [bp.table.item(r, 0).data(QtCore.Qt.ItemDataRole.UserRole)
            for r in range(bp.table.rowCount())]
    row = cats.index("memcpy_h2d")
    cols = [bp.table.horizontalHeaderItem(c).text() for c in range(bp.table.columnCount())]
    rate = bp.table.item(row, cols.index("Rate")).text()
    count, nbytes, busy = bp.current_side().copy_figures(2, "memcpy_h2d")
    # bytes and rate of the same copies (not total bytes over the exposed time)
    assert bp.table.item(row, cols.index("Bytes")).text() == fmt_bytes(nbytes)
    assert rate == fmt_rate(nbytes, busy) and 1 < nbytes / busy < 50
    rect = bp.table.visualRect(bp.table.model().index(row, 0))  # of the same copies
    qtbot.mouseClick(bp.table.viewport(), QtCore.Qt.MouseButton.LeftButton, pos=rect.center())
    panel = win.panels["statistics"]
    assert win.docks["statistics"].isVisible()
    assert (panel.kind, panel.scope_key) == ("copy", "iteration")
    table = panel.model.table
    assert sum(r.count for r in table.rows) == count
    assert sum(r.bytes for r in table.rows) == nbytes
    row = cats.index("compute")
    rect = bp.table.visualRect(bp.table.model().index(row, 0))
    win.docks["breakdown"].raise_()
    qtbot.mouseClick(bp.table.viewport(), QtCore.Qt.MouseButton.LeftButton, pos=rect.center())
    assert panel.kind == "kernel" and panel.caption.text().startswith("iteration 2")


def test_an_off_screen_tab_catches_up_when_chosen(win, qtbot):
    panel = win.panels["statistics"]
    win.docks["statistics"].raise_()
    panel.show_table("op", "iteration")
    win.docks["breakdown"].raise_()  # Statistics goes behind: selections only mark it stale
    win.session.select_iteration(2)
    assert "no iteration selected" in panel.caption.text()
    win.docks["statistics"].raise_()
    qtbot.waitUntil(lambda: panel.caption.text().startswith("iteration 2 (ProfilerStep#7)"))
