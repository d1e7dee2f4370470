"""Selection rules, driven through the real widgets on the bundled ResNet-50 sample.

Every click that names a slice selects it and shows it in Details; Esc clears the
innermost selection first (range, highlight, slice, iteration); F3 / Shift+F3 step
through any highlight; the panels follow one selected iteration.
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest
from PySide6 import QtCore
from PySide6.QtTest import QTest

from sofa_gui.core.analysis import stats
from sofa_gui.core.samples import demo_trace_path
from sofa_gui.core.trace import Kind

Key = QtCore.Qt.Key


@pytest.fixture
def win(open_window):
    return open_window(demo_trace_path())


def _key(win, key, shift=False) -> None:
    """A key press as the user makes it: on the focused timeline of the active window."""
    win.activateWindow()
    tl = win.timeline.graphics_view()
    tl.setFocus()
    mod = QtCore.Qt.KeyboardModifier.ShiftModifier if shift else QtCore.Qt.KeyboardModifier(0)
    QTest.keyClick(tl, key, mod)


def click_row(qtbot, view, row: int) -> None:
    rect = view.visualRect(view.model().index(row, 0))
    qtbot.mouseClick(view.viewport(), QtCore.Qt.MouseButton.LeftButton, pos=rect.center())


def _statistics_row(win, qtbot, row: int = 1):
    """Click ``row`` of the Statistics table (kernels, whole trace); its table row."""
    panel = win.panels["statistics"]
    win.docks["statistics"].raise_()
    qtbot.waitUntil(lambda: panel.model.table is not None)
    want = stats.compute_table(win.session.trace, "kernel")
    click_row(qtbot, panel.view, row)
    return want.rows[row], want.members(row)


def _iteration_of(s, i: int) -> int:
    return s.view.iteration_of(float(int(s.trace.slices.start[i]) - s.view.t0))


def _in_front(win, key: str) -> bool:
    return not win.docks[key].visibleRegion().isEmpty()


def test_f3_after_a_statistics_row_steps_through_its_instances(win, qtbot):
    s = win.session
    row, members = _statistics_row(win, qtbot)
    assert s.selected_slice == row.longest
    k = int(np.searchsorted(members, row.longest))
    _key(win, Key.Key_F3)
    assert len(s.matches) == len(members) and win.timeline.model.highlight is not None
    assert s.selected_slice == members[(k + 1) % len(members)]
    _key(win, Key.Key_F3, shift=True)
    assert s.selected_slice == row.longest and len(s.matches) == len(members)


def test_f3_steps_through_a_highlight_any_panel_set(win, qtbot):
    s = win.session
    kernels = np.flatnonzero(s.trace.slices.kind == int(Kind.KERNEL))[[10, 200, 3000]]
    s.view.set_highlights(kernels)  # as a query dock does
    _key(win, Key.Key_F3)
    assert s.selected_slice == kernels[0]
    _key(win, Key.Key_F3)
    assert s.selected_slice == kernels[1]
    _key(win, Key.Key_F3, shift=True)
    assert s.selected_slice == kernels[0]
    lo, hi = win.timeline.visible_range()
    assert lo <= s.trace.slices.start[kernels[0]] <= hi
    assert _in_front(win, "details")


def test_the_statistics_highlight_goes_with_an_iteration_change(win, qtbot):
    s = win.session
    row, _members = _statistics_row(win, qtbot)
    other = (_iteration_of(s, row.longest) + 1) % len(s.iterations)
    s.select_iteration(other)
    assert len(s.matches) == 0 and win.timeline.model.highlight is None


def test_a_query_highlight_outlives_an_iteration_change_and_steps_with_f3(win, qtbot):
    s = win.session
    kernels = np.flatnonzero(s.trace.slices.kind == int(Kind.KERNEL))[[10, 200, 3000]]
    s.show_instances(kernels)  # as the Query dock shows a result's slices
    s.select_iteration(3)
    assert len(s.matches) == 3 and win.timeline.model.highlight is not None
    _key(win, Key.Key_F3)
    assert s.selected_slice == kernels[0]
    _key(win, Key.Key_F3)
    assert s.selected_slice == kernels[1]


def test_esc_clears_range_then_highlight_then_slice_then_iteration(win, qtbot):
    s = win.session
    row, _members = _statistics_row(win, qtbot)
    it = s.selected_iteration
    assert it >= 0 and s.selected_slice == row.longest
    s.select_range(int(s.iterations.starts[it]), int(s.iterations.ends[it]), (0,))
    _key(win, Key.Key_Escape)
    assert s.selected_range is None and len(s.matches) > 0
    _key(win, Key.Key_Escape)
    assert len(s.matches) == 0 and win.timeline.model.highlight is None
    assert s.selected_slice == row.longest
    _key(win, Key.Key_Escape)
    assert s.selected_slice == -1 and s.selected_iteration == it
    _key(win, Key.Key_Escape)
    assert s.selected_iteration == -1
    assert win.panels["iterations"].table.selectionModel().selectedRows() == []


def _empty_point(win):
    """A viewport point on the timeline where a click hits no slice."""
    tl = win.timeline
    lo, hi = tl.visible_range()
    t0 = win.session.view.t0
    layout = tl.model.layout
    tol = (hi - lo) / max(tl.view_box().width(), 1) * 8
    for lane in range(len(layout.lane_top)):
        top = float(layout.lane_top[lane]) + 0.5
        for k in range(40, 960, 7):
            x = (lo - t0) + (hi - lo) * k / 1000
            if tl.model.slice_at(x, top, tol) < 0:
                return tl.view_point(lo + (hi - lo) * k / 1000, top)
    raise AssertionError("no empty spot on the timeline")


def test_clicking_empty_timeline_keeps_details_in_front(win, qtbot):
    s = win.session
    it = s.iterations
    win.timeline.zoom_to(int(it.starts[2]), int(it.ends[2]))
    kernel = int(np.flatnonzero(s.trace.slices.kind == int(Kind.KERNEL))[100])
    s.select_slice(kernel)
    assert _in_front(win, "details") and not _in_front(win, "findings")
    qtbot.mouseClick(win.timeline.graphics_view().viewport(), QtCore.Qt.MouseButton.LeftButton,
                     pos=_empty_point(win))
    assert s.selected_slice == -1
    assert _in_front(win, "details") and not _in_front(win, "findings")


def test_a_statistics_jump_keeps_table_and_timeline_on_one_iteration(win, qtbot):
    s = win.session
    table = stats.compute_table(s.trace, "kernel")
    row = next(r for r in range(len(table.rows))
               if _iteration_of(s, table.rows[r].longest) not in (-1, 2))
    s.select_iteration(2, zoom=False)
    _statistics_row(win, qtbot, row)
    want = _iteration_of(s, table.rows[row].longest)
    assert s.selected_iteration == want
    assert win.timeline.model.selected_iteration == want
    panel = win.panels["iterations"]
    rows = panel.table.selectionModel().selectedRows()
    assert [panel.model.iteration_at(r.row()) for r in rows] == [want]
    assert win.panels["breakdown"].bars.rows[0][0].startswith(f"Iteration {want}")


def test_evidence_and_cause_links_select_the_slice_they_zoom_to(win, qtbot):
    s = win.session
    card = win.panels["findings"].cards[0]
    cause = card.finding.causes[0]
    card.causes.linkActivated.emit("cause:0")
    i = s.selected_slice
    assert i >= 0 and s.trace.name_of(i) == cause.label == "aten::copy_"
    assert int(s.trace.slices.start[i]) == cause.instance.start_ns
    assert _in_front(win, "details")
    assert "aten::copy_" in win.panels["details"].name.text()
    ev = card.finding.evidence[1]
    card.evidence.linkActivated.emit("ev:1")
    j = s.selected_slice
    assert j >= 0 and int(s.trace.slices.end[j]) == ev.end_ns
    assert s.selected_iteration == ev.iteration


def test_a_recording_opens_to_a_finished_breakdown(open_window, data_dir, tmp_path, qtbot):
    """A recording of a plain program: counters only, nothing to break down -- said once
    the analysis is done, never a lasting "Analysing…"."""
    rec = tmp_path / "rec"
    rec.mkdir()
    for name in ("counters.parquet", "manifest.json", "output.log", "processes.parquet"):
        shutil.copyfile(data_dir / "recording-torch-pyspy" / name, rec / name)
    w = open_window(rec)
    status = w.panels["breakdown"].status.text()
    assert "Analysing" not in status and status.startswith("Nothing to break down"), status
