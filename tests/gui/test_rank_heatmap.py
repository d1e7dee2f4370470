"""The rank x iteration heat map: cells, straggler outlines, clicks, tooltips, no min width."""

from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtCore import QPointF, Qt

from sofa_gui.qt.panels.rank_heatmap import RankHeatmap


@pytest.fixture
def heat(qtbot):
    w = RankHeatmap()
    qtbot.addWidget(w)
    w.resize(500, 220)
    w.show()
    qtbot.waitExposed(w)
    return w


def _real_ranks(data_dir):
    from sofa_gui.core.analysis.pipeline import analyze
    from sofa_gui.core.importers import load_trace

    trace = load_trace(data_dir / "ranks")
    return analyze(trace).breakdown.ranks


def test_real_two_rank_folder_cells_and_straggler(heat, qtbot, data_dir):
    ranks = _real_ranks(data_dir)
    n = ranks.durations.shape[1]
    strag = np.array([[r == s for s in ranks.straggler] for r in ranks.ranks])
    heat.set_matrix(ranks.durations, [f"rank {r}" for r in ranks.ranks],
                    [f"#{i}" for i in range(n)], stragglers=strag, title="iteration time")
    assert heat.shape() == (2, n) and strag.sum() == n  # one straggler per iteration
    slow = np.unravel_index(np.argmax(ranks.durations), ranks.durations.shape)
    fast = np.unravel_index(np.argmin(ranks.durations), ranks.durations.shape)
    slow_c, fast_c = heat.color_of(*slow), heat.color_of(*fast)
    assert slow_c.red() > slow_c.blue() and fast_c.blue() > fast_c.red()  # warm / cool
    img = heat.grab().toImage()
    r, c = (int(x) for x in np.argwhere(strag)[0])
    rect = heat.cell_rect(r, c)
    edge = img.pixelColor(int(rect.left() + 2), int(rect.center().y()))
    assert edge.lightness() < 60  # the dark straggler outline is drawn
    with qtbot.waitSignal(heat.cell_clicked) as sig:
        qtbot.mouseClick(heat, Qt.MouseButton.LeftButton, pos=rect.center().toPoint())
    assert sig.args == [r, c] and heat.selected() == (r, c)
    tip = heat.tooltip_at(rect.center())
    assert tip.startswith(f"rank {ranks.ranks[r]}, #{c}: ") and "straggler" in tip


def test_nan_cells_and_shape_errors(heat):
    v = np.array([[1e6, np.nan], [2e6, 3e6]])
    heat.set_matrix(v, ["a", "b"], ["0", "1"])
    assert heat.tooltip_at(heat.cell_rect(0, 1).center()).endswith("no data")
    assert heat.cell_at(QPointF(1, 1)) is None  # the label column is not a cell
    with pytest.raises(ValueError):
        heat.set_matrix(v, ["a"], ["0", "1"])


def test_long_labels_do_not_widen_it(heat):
    long = "rank " + "x" * 100_000
    heat.set_matrix(np.ones((2, 3)), [long, "r1"], ["i" * 50_000, "1", "2"])
    assert heat.minimumSizeHint().width() <= 100 and heat.width() == 500
    heat.grab()  # paints without error; labels are elided
    assert heat.cell_rect(0, 0).left() <= 500 * 0.3 + 1


def test_redraw_of_the_same_grid_keeps_the_selected_cell(heat, qtbot):
    v = np.arange(12, dtype=float).reshape(3, 4) * 1e6
    rows, cols = ["rank 0", "rank 1", "rank 2"], ["#0", "#1", "#2", "#3"]
    heat.set_matrix(v, rows, cols)
    qtbot.mouseClick(heat, Qt.MouseButton.LeftButton, pos=heat.cell_rect(2, 1).center().toPoint())
    assert heat.selected() == (2, 1)
    heat.set_matrix(v[::-1].copy(), rows, cols, title="another metric")  # same grid
    assert heat.selected() == (2, 1)
    img = heat.grab().toImage()
    rect = heat.cell_rect(2, 1)
    sel = heat.palette().color(heat.palette().ColorRole.Highlight)
    edge = img.pixelColor(int(rect.left() + 1), int(rect.center().y()))
    assert abs(edge.hue() - sel.hue()) < 10  # the outline is still painted
    heat.set_matrix(v[:2], rows[:2], cols)  # another grid: nothing selected
    assert heat.selected() == (-1, -1)


def test_colours_follow_the_new_matrix(heat):
    heat.set_matrix(np.array([[1.0, 2.0]]), ["a"], ["0", "1"])
    hot = heat.color_of(0, 1)
    heat.set_matrix(np.array([[2.0, 1.0]]), ["a"], ["0", "1"])
    assert heat.color_of(0, 0) == hot
    assert heat.color_of(0, 1).blue() > heat.color_of(0, 1).red()


def test_scale_is_centred_on_the_median_and_a_small_spread_stays_pale(heat):
    """Four ranks within 4 %: no cell is far from white; the values are printed and the
    legend names the centre."""
    v = np.array([[100e6, 101e6], [102e6, 104e6], [100.5e6, 103e6], [101.5e6, 102.5e6]])
    heat.set_matrix(v, ["r0", "r1", "r2", "r3"], ["#0", "#1"])
    for r in range(4):
        for c in range(2):
            color = heat.color_of(r, c)
            assert min(color.red(), color.green(), color.blue()) > 150, (r, c)
            assert heat.cell_text(r, c) == "100 ms" or heat.cell_text(r, c).endswith("ms")
    med = np.median(v)
    assert heat.scale().centre == med
    assert "median" in heat.legend_text() and "10.0%" in heat.legend_text()
    spread = np.array([[100e6, 200e6], [100e6, 100e6]])  # one slow cell: full red
    heat.set_matrix(spread, ["r0", "r1"], ["#0", "#1"])
    assert heat.color_of(0, 1).red() > 150 and heat.color_of(0, 1).blue() < 60
    assert heat.color_of(0, 0).red() == heat.color_of(0, 0).green()  # the median: white


def test_a_large_fleet_paints(heat):
    v = np.random.default_rng(0).random((256, 200))
    v[5, 7] = np.nan
    heat.set_matrix(v, [f"rank {i}" for i in range(256)], [str(i) for i in range(200)])
    heat.grab()
    assert heat.color_of(5, 7) == heat.color_of(5, 7) and heat.shape() == (256, 200)


def test_value_range_is_computed_once_per_matrix_not_per_paint(heat, qtbot, monkeypatch):
    from sofa_gui.qt.panels import rank_heatmap

    calls = []
    real = rank_heatmap.finite_range
    monkeypatch.setattr(rank_heatmap, "finite_range", lambda v: (calls.append(1), real(v))[1])
    values = np.array([[1e6, 2e6, np.nan], [3e6, 4e6, 5e6]])
    heat.set_matrix(values, ["r0", "r1"], ["#0", "#1", "#2"])
    for _ in range(3):
        heat.repaint()
    assert len(calls) == 1 and heat._range() == (1e6, 5e6)
    heat.set_matrix(values * 2, ["r0", "r1"], ["#0", "#1", "#2"])  # new data: new range
    heat.repaint()
    assert len(calls) == 2 and heat._range() == (2e6, 1e7)
    heat.set_matrix(np.full((2, 3), np.nan), ["r0", "r1"], ["#0", "#1", "#2"])
    assert heat._range() == (0.0, 1.0)
