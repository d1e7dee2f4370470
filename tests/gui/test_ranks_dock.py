"""Ranks dock on the real two-rank HTA folder: heat map, stragglers, click selects everywhere."""

from __future__ import annotations

import numpy as np
from PySide6 import QtCore


def test_heat_map_of_two_ranks_and_click_selects_rank_and_iteration(qtbot, open_window,
                                                                     data_dir):
    w = open_window(data_dir / "ranks", (1280, 800))
    s = w.session
    r = s.breakdown.ranks
    panel = w.panels["ranks"]
    heat = panel.heatmap
    assert heat.shape() == (2, len(s.iterations)) == r.durations.shape
    np.testing.assert_array_equal(panel.matrix("iteration"), r.durations)
    assert heat.tooltip_at(heat.cell_rect(0, 0).center()).startswith("rank 0, #0")
    assert "straggler" in panel.note.text()
    # the breakdown defaults to the rank of the top finding
    assert s.selected_rank == s.finding_rank() >= 0
    assert w.panels["breakdown"].current_side().rank == s.selected_rank
    w.docks["ranks"].show()
    w.docks["ranks"].raise_()
    qtbot.waitExposed(heat)
    other = 1 - r.ranks.index(s.selected_rank)
    rect = heat.cell_rect(other, 1)
    qtbot.mouseClick(heat, QtCore.Qt.MouseButton.LeftButton, pos=rect.center().toPoint())
    assert s.selected_rank == r.ranks[other] and s.selected_iteration == 1
    assert w.panels["breakdown"].current_side().rank == r.ranks[other]
    iters = w.panels["iterations"]
    assert iters.table.currentIndex().row() == iters.model.row_of(1)
    assert heat.selected() == (other, 1)
    panel.measure.setCurrentIndex(panel.measure.findData("cat:compute"))
    comp = panel.matrix("cat:compute")
    assert np.isfinite(comp).all() and (comp > 0).all()
    assert (comp <= r.durations).all()


def test_single_rank_trace_says_so(open_window):
    from sofa_gui.core.samples import demo_trace_path

    w = open_window(demo_trace_path(), (1280, 800))
    assert w.panels["ranks"].heatmap.shape() == (0, 0)
    assert "Single-rank trace" in w.panels["ranks"].note.text()
    assert w.session.selected_rank == -1
