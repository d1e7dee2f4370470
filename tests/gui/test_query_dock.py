"""Query dock on the real ResNet-50 sample: run, sort, highlight, remember, refuse, cancel."""

from __future__ import annotations

import numpy as np
import pytest
from PySide6 import QtCore
from PySide6.QtTest import QTest

from sofa_gui.core.query.db import TraceDB
from sofa_gui.core.query.schema import EXAMPLES
from sofa_gui.qt.panels.query import HISTORY_KEY

LEFT = QtCore.Qt.MouseButton.LeftButton


@pytest.fixture
def win(docked):
    return docked("query")


def _run(qtbot, panel, sql: str) -> None:
    panel.editor.setPlainText(sql)
    panel.editor.setFocus()
    QTest.keyClick(panel.editor, QtCore.Qt.Key.Key_Return,
                   QtCore.Qt.KeyboardModifier.ControlModifier)
    assert panel.running
    qtbot.waitUntil(lambda: not panel.running, timeout=60_000)


def test_a_query_fills_the_table_and_highlights_its_slices(win, qtbot):
    panel, s = win.panels["query"], win.session
    qtbot.waitUntil(lambda: panel.tables_open, timeout=60_000)  # opened once the dock is seen
    sql = "SELECT id, name, dur_us FROM kernels ORDER BY dur_us DESC LIMIT 7"
    _run(qtbot, panel, sql)
    want = TraceDB(s.trace, s.analysis).run(sql)
    assert panel.model.rowCount() == 7 and panel.result.rows == want.rows
    assert panel.proxy.index(0, 0).data() == str(want.rows[0][0])  # the query's own order
    np.testing.assert_array_equal(s.matches, sorted(r[0] for r in want.rows))
    assert win.timeline.model.highlight is not None
    assert "7 slices highlighted" in panel.caption.text()
    # sortable: by name, ascending
    panel.table.sortByColumn(1, QtCore.Qt.SortOrder.AscendingOrder)
    names = [panel.proxy.index(r, 1).data() for r in range(7)]
    assert names == sorted(names, key=str.lower)
    # a click on a row selects its slice (and keeps the highlights to step through)
    rect = panel.table.visualRect(panel.proxy.index(2, 0))
    qtbot.mouseClick(panel.table.viewport(), LEFT, pos=rect.center())
    assert s.selected_slice == int(panel.proxy.index(2, 0).data())
    assert len(s.matches) == 7
    # remembered: newest first in the settings and in the recent-queries list
    assert win.prefs.value(HISTORY_KEY)[0] == sql
    assert panel.history.itemData(1) == sql


def test_examples_menu_schema_and_refusals(win, qtbot):
    panel = win.panels["query"]
    assert "rel_start_us" in panel.schema.toPlainText()
    panel.examples.setCurrentIndex(2)
    panel.examples.activated.emit(2)
    assert panel.editor.toPlainText() == EXAMPLES[1][1]
    _run(qtbot, panel, panel.editor.toPlainText())  # top kernels of iteration 3
    assert panel.model.rowCount() == 10 and panel.result.slice_ids is None
    _run(qtbot, panel, "COPY slices TO 'out.csv'")
    assert "COPY refused" in panel.caption.text()
    assert panel.model.rowCount() == 10  # the last result stays
    _run(qtbot, panel, "SELECT nosuch FROM slices")
    assert "Binder Error" in panel.caption.text() and "\n" not in panel.caption.text()


def test_cancel_interrupts_a_long_query(win, qtbot):
    panel = win.panels["query"]
    panel.editor.setPlainText("SELECT sum(a.range * b.range) FROM range(1000000) a, "
                              "range(1000000) b")
    qtbot.mouseClick(panel.run_button, LEFT)
    assert panel.running and panel.cancel_button.isEnabled() and panel.progress.isVisible()
    qtbot.wait(400)
    assert "s" in panel.progress.format()  # elapsed seconds while it runs

    def stopped():
        if panel.running:
            qtbot.mouseClick(panel.cancel_button, LEFT)  # again until the query has started
        return not panel.running

    qtbot.waitUntil(stopped, timeout=60_000)
    assert "nterrupt" in panel.caption.text()
    assert panel.run_button.isEnabled() and not panel.cancel_button.isEnabled()
