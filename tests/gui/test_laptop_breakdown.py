"""A clicked iteration's breakdown on a laptop and a desk monitor, and what the Iterations
table's Dominant column says, on real captures: the bundled GPU sample, a PyTorch loop of
tiny ops (the verdict reads its forward and backward ops as host overhead) and a retraced
``tf.function`` (its compiles run as runtime calls and forward ops: start-up).

At 1280x800 the breakdown's category table is in view without scrolling the dock: the
status line and the verdict's reading hold to one line each (the whole text in their
tooltips) and the bars are one text line high.  At 1920x1080 everything is shown whole."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QPoint, Qt
from test_shares_agree_app import analyze_json
from tracedata import DATA

from sofa_gui.core.analysis.verdict import LABELS
from sofa_gui.core.samples import demo_trace_path

TINY = DATA / "corpus" / "pt_train_tiny_ops" / "capture-1.json.gz"
RETRACE = DATA / "corpus" / "tf_tape_retrace_python_lr" / "capture-1"
CAPTURES = {"sample": None, "tiny_ops": TINY, "retrace": RETRACE}


def _path(key: str):
    return CAPTURES[key] or demo_trace_path()


def _click_iteration(qtbot, w, i: int) -> None:
    """Click iteration ``i``'s row in the Iterations table, as a user does."""
    panel = w.panels["iterations"]
    rect = panel.table.visualRect(panel.model.index(panel.row_of(i), 0))
    qtbot.mouseClick(panel.table.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    qtbot.waitUntil(lambda: w.session.selected_iteration == i, timeout=5000)
    qtbot.wait(50)


def _dock_area(w):
    return w.docks["breakdown"].widget()  # the dock body: a scroll area around the panel


def _rows_in_view(table) -> int:
    return min(table.rowCount(), table.viewport().height() // table.rowHeight(0))


@pytest.mark.parametrize("key", list(CAPTURES))
def test_at_1280x800_the_clicked_iterations_table_is_in_view(qtbot, open_window, key):
    w = open_window(_path(key), (1280, 800))
    _click_iteration(qtbot, w, 2)
    panel, area = w.panels["breakdown"], _dock_area(w)
    assert panel.compact
    assert area.verticalScrollBar().maximum() == 0  # the dock does not scroll
    table = panel.table
    top = table.mapTo(area.viewport(), QPoint(0, 0)).y()
    assert top >= 0 and top + table.height() <= area.viewport().height()
    assert _rows_in_view(table) >= min(table.rowCount(), 3)
    moved_bytes = key == "sample"  # a device's copies; a host thread moves none
    assert [table.isColumnHidden(c) for c in (5, 6)] == [not moved_bytes] * 2
    line = panel.status.fontMetrics().height()
    for label in (panel.status, panel.reading):
        if label.isVisibleTo(w):
            assert label.height() <= line + 2  # one line, elided if need be
    assert panel.bars.height() <= 2 * (line + 8) + 8


def test_at_1280x800_the_reading_leads_with_the_verdicts_numbers(qtbot, open_window):
    doc = analyze_json(TINY)
    (moved,) = doc["verdict"]["moved"]
    w = open_window(TINY, (1280, 800))
    _click_iteration(qtbot, w, 2)
    reading = w.panels["breakdown"].reading
    assert reading.text().startswith("The verdict counts 88.6% of profiled time as Host "
                                     "overhead: Framework overhead: many tiny ops")
    assert LABELS[moved["to"]] == "Host overhead"
    tip = reading.toolTip()
    assert "Categories of what the thread ran. The verdict counts" in tip
    assert "here in Forward / Backward / Optimizer / Other." in tip


@pytest.mark.parametrize("key", ["sample", "tiny_ops"])
def test_at_1920x1080_everything_is_shown_whole(qtbot, open_window, key):
    w = open_window(_path(key), (1920, 1080))
    _click_iteration(qtbot, w, 2)
    panel, area = w.panels["breakdown"], _dock_area(w)
    assert not panel.compact
    assert area.verticalScrollBar().maximum() == 0
    assert panel.bars.bar_h == 26  # the full bars
    if panel.reading.isVisibleTo(w):  # wrapped, never cut
        assert panel.reading.text().startswith("Categories of what the thread ran.")
        assert panel.reading.height() >= 2 * panel.reading.fontMetrics().height()
    assert _rows_in_view(panel.table) >= min(panel.table.rowCount(), 6)


def test_a_taller_dock_gives_the_full_layout_back(qtbot, open_window):
    w = open_window(TINY, (1280, 800))
    _click_iteration(qtbot, w, 2)
    panel = w.panels["breakdown"]
    assert panel.compact
    w.resizeDocks([w.docks["breakdown"]], [520], Qt.Orientation.Vertical)
    qtbot.waitUntil(lambda: not panel.compact, timeout=2000)
    assert panel.reading.text().startswith("Categories of what the thread ran.")
    assert _dock_area(w).verticalScrollBar().maximum() == 0
    w.resizeDocks([w.docks["breakdown"]], [260], Qt.Orientation.Vertical)
    qtbot.waitUntil(lambda: panel.compact, timeout=2000)


@pytest.mark.parametrize(("key", "shown", "ran"), [
    ("tiny_ops", "Host overhead", "Backward"),
    ("retrace", "Start-up", None),
    ("sample", "Compute kernels", "Compute kernels"),
])
def test_dominant_says_how_the_verdict_reads_the_iteration(qtbot, open_window, key, shown,
                                                           ran):
    doc = analyze_json(_path(key))
    w = open_window(_path(key), (1280, 800))
    panel = w.panels["iterations"]
    model, table = panel.model, panel.table
    moved = shown != ran
    for r in range(model.rowCount()):
        cell = model.index(r, 5)
        assert cell.data() == shown
        tip = cell.data(Qt.ItemDataRole.ToolTipRole)
        if ran:
            assert f"{ran}: " in tip
        assert "of what the " in tip and "ran in this iteration" in tip
        assert ("The verdict counts" in tip) == moved
    if moved:
        assert LABELS[doc["verdict"]["moved"][0]["to"]] == shown
    # the column keeps the name readable at 1280 px, numbers keep theirs
    fm = table.fontMetrics()
    assert table.columnWidth(5) >= fm.horizontalAdvance(shown) + 9  # cell margins
    assert table.horizontalHeader().length() <= table.viewport().width() + 1


def test_one_finding_is_said_in_the_singular(open_window):
    w = open_window(RETRACE, (1280, 800))
    assert len(w.session.findings) == 1
    assert w.statusBar().currentMessage() == "Analysis done: 1 finding"
