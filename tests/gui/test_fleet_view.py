"""A 32-rank folder in the app: the fleet overview first, then one rank in full.

The ranks are made from the two public HTA rank traces (tests/data/ranks); rank 13's
compute is stretched 2x.  The fleet analysis runs on an embedded Dask LocalCluster with
one worker process ($SOFA_GUI_FLEET_WORKERS=1, light on a 2-core CI machine).
"""

from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtCore import Qt
from tracedata import DATA

from sofa_gui.core.fleet.synth import make_rank_folder

pytestmark = pytest.mark.slow
SOURCES = [DATA / "ranks" / "sampled_rank-0.json.gz", DATA / "ranks" / "sampled_rank-1.json.gz"]
FLEET_TIMEOUT_MS = 300_000


@pytest.fixture
def run32(tmp_path):
    out = tmp_path / "run32"
    make_rank_folder(out, SOURCES, 32, slow={13: 2.0})
    return out


@pytest.fixture
def window(open_window, monkeypatch):
    monkeypatch.setenv("SOFA_GUI_FLEET_WORKERS", "1")
    monkeypatch.delenv("SOFA_GUI_SCHEDULER", raising=False)
    return open_window(None)


def _row_of(panel, rank: int) -> int:
    t = panel.table
    return next(r for r in range(t.rowCount()) if t.item(r, 0).text() == str(rank))


def test_big_rank_folder_opens_as_fleet_then_one_rank_in_full(qtbot, window, run32):
    s, panel = window.session, window.fleet_panel
    seen = []
    s.fleet_rank_done.connect(lambda summary: seen.append(summary.rank))
    window.open_path(run32)
    qtbot.waitUntil(lambda: window.stack.currentWidget() is panel, timeout=60_000)
    assert panel.table.rowCount() == 32  # every rank listed before any is done
    qtbot.waitUntil(lambda: s.fleet is not None, timeout=FLEET_TIMEOUT_MS)
    qtbot.waitUntil(lambda: not s.busy, timeout=30_000)
    assert sorted(seen) == list(range(32))
    assert s.trace is None  # no rank loaded into the client yet
    assert "32/32 analyzed" in panel.header.text()
    assert panel.header.text().startswith("run32: ")  # the folder's name, its path in the tip
    assert str(run32) in panel.header.toolTip()
    assert window.statusBar().currentMessage() == "Fleet analysis done: 32 ranks, 1 straggler"
    # rank 13's kernels run 2x longer: op work that moves, the largest category compute
    assert "Straggler: rank 13" in panel.verdict.text() and \
        "cause: op work that moves" in panel.verdict.text()
    cause = panel.table.item(_row_of(panel, 13), 6).text()
    assert cause.startswith("op work that moves") and "largest category: compute" in cause
    assert window.windowTitle().startswith("run32 (32 ranks)")

    # the heat map: 32 ranks x 2 iterations, rank 13's cells outlined as stragglers
    hm = panel.heatmap
    assert hm.shape() == (32, 2)
    values, marks = panel.matrix()
    assert marks[13].all() and marks.sum() == 2
    assert np.nanargmax(values[:, 0]) == 13  # iteration time: rank 13 is the darkest row
    panel.metric.setCurrentText("compute")  # any breakdown category can colour it
    values, _ = panel.matrix()
    assert np.nanargmax(values[:, 1]) == 13

    # click rank 13's cell of the second iteration: that rank opens in full, at that step
    pos = hm.cell_rect(13, 1).center().toPoint()
    qtbot.mouseClick(hm, Qt.MouseButton.LeftButton, pos=pos)
    qtbot.waitUntil(lambda: s.analysis_done and not s.busy, timeout=120_000)
    assert window.stack.currentWidget() is window.timeline
    assert s.trace.meta.source.endswith("rank-13.json") and s.open_ranks == [13]
    assert len(s.iterations) == 2
    assert s.view.selected_iteration == 1
    assert s.iterations.labels[1] == "ProfilerStep#552"
    assert window.windowTitle().startswith("rank 13 of run32")
    assert s.fleet is not None  # the summaries stay

    # back to the overview: a table row + "Open rank" opens it too
    window.fleet_action.trigger()
    row = _row_of(panel, 13)
    rect = panel.table.visualItemRect(panel.table.item(row, 1))
    qtbot.mouseClick(panel.table.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    assert panel.selected_rank == 13 and panel.open_btn.isEnabled()

    # "Open with median rank": rank 13 next to the median rank
    assert window.stack.currentWidget() is panel
    qtbot.mouseClick(panel.median_btn, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: s.analysis_done and not s.busy, timeout=120_000)
    med = s.fleet.median_rank()
    assert med != 13 and s.open_ranks == sorted({13, med})
    assert sorted(set(s.trace.lanes.rank.tolist())) == sorted({13, med})


def test_small_rank_folder_keeps_the_all_ranks_timeline(qtbot, window):
    from sofa_gui.app.fleet_jobs import fleet_files

    assert fleet_files(DATA / "ranks") is None
    s = window.session
    window.open_path(DATA / "ranks")
    qtbot.waitUntil(lambda: not s.busy, timeout=120_000)
    assert s.analysis_done and window.stack.currentWidget() is window.timeline
    assert s.fleet is None and not window.fleet_action.isEnabled()
