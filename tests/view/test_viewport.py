"""LOD index: blocks cover exactly the pixels the intervals touch, at a bounded count."""

from __future__ import annotations

import numpy as np
import pytest

from sofa_gui.view import viewport as vp
from sofa_gui.view.viewport import (
    CounterPyramid,
    IntervalPyramid,
    clamp_window,
    pan_window,
    zoom_window,
)


def _rows(n_rows: int, per_row: int, seed: int):
    """Disjoint sorted intervals per row (heavy-tailed widths, exponential gaps)."""
    rng = np.random.default_rng(seed)
    rows, s, e = [], [], []
    for r in range(n_rows):
        dur = rng.lognormal(3, 1.8, per_row)
        gap = rng.exponential(20, per_row)
        start = np.cumsum(dur + gap) - dur
        rows.append(np.full(per_row, r))
        s.append(start)
        e.append(start + dur)
    s, e, rows = np.concatenate(s), np.concatenate(e), np.concatenate(rows)
    order = np.argsort(s, kind="stable")
    return rows[order], s[order], e[order]


def _brute_columns(s, e, x0, pxw, width):
    """Pixel columns touched by each interval, by brute force."""
    cols = set()
    for a, b in zip(s.tolist(), e.tolist()):
        if b < x0 or a >= x0 + width * pxw:
            continue
        c0 = max(int(np.floor((a - x0) / pxw)), 0)
        c1 = min(max(int(np.ceil((b - x0) / pxw)) - 1, c0), width - 1)
        cols.update(range(c0, c1 + 1))
    return cols


@pytest.mark.parametrize("frac", [1.0, 0.3, 0.05, 0.004])
def test_raw_blocks_cover_exactly_the_touched_columns(frac):
    row, s, e = _rows(3, 3000, seed=1)
    pyr = IntervalPyramid(row, s, e, np.arange(len(s)), np.arange(len(s)) % 7, 3)
    span = float(e.max())
    x0, width = span * 0.2 * (1 - frac), 400
    x1 = x0 + span * frac
    pxw = (x1 - x0) / width
    b = pyr.blocks([0, 1, 2], x0, x1, pxw, level=0)
    for slot in range(3):
        m = b.slot == slot
        got = set()
        for c0, c1 in zip(b.c0[m].tolist(), b.c1[m].tolist()):
            assert not got & set(range(c0, c1 + 1)), "blocks overlap"
            got.update(range(c0, c1 + 1))
        sel = row == slot
        assert got == _brute_columns(s[sel], e[sel], x0, pxw, width)
        assert m.sum() <= width


def test_pyramid_levels_keep_coverage_within_a_bucket():
    row, s, e = _rows(2, 40_000, seed=2)
    pyr = IntervalPyramid(row, s, e, np.arange(len(s)), np.zeros(len(s)), 2)
    assert len(pyr.levels) > 2, "large rows get coarser levels"
    span = float(e.max())
    width = 500
    pxw = span / width
    k = pyr.choose_level([0, 1], 0.0, span, pxw)
    assert k >= 1 and pyr.levels[k].bucket <= pxw
    b = pyr.blocks([0, 1], 0.0, span, pxw)
    assert b.level == k - 1
    for slot in range(2):
        m = b.slot == slot
        got = set()
        for c0, c1 in zip(b.c0[m].tolist(), b.c1[m].tolist()):
            got.update(range(c0, c1 + 1))
        want = _brute_columns(s[row == slot], e[row == slot], 0.0, pxw, width)
        # a merged entry may fill a gap narrower than one bucket (< 1 px) between entries
        assert want <= got
        assert len(got - want) <= 0.02 * width
        assert m.sum() <= width


def test_block_count_does_not_grow_with_events():
    width = 300
    counts = []
    for per_row in (1_000, 100_000):
        row, s, e = _rows(4, per_row, seed=3)
        pyr = IntervalPyramid(row, s, e, np.arange(len(s)), np.zeros(len(s)), 4)
        span = float(e.max())
        counts.append(len(pyr.blocks(range(4), 0.0, span, span / width)))
    assert all(c <= 4 * width for c in counts)


def test_wide_slices_keep_their_color_merged_ones_use_the_category():
    s = np.array([0.0, 100.0, 100.5, 101.0, 101.5])
    e = np.array([90.0, 100.4, 100.9, 101.4, 101.9])
    color = np.array([3, 4, 5, 6, 7])
    cat = np.full(5, 20)
    pyr = IntervalPyramid(np.zeros(5), s, e, np.arange(5) + 10, color, 1, cat=cat)
    b = pyr.blocks([0], 0.0, 110.0, 1.0)
    assert b.color.tolist() == [3, 20]
    assert b.ref.tolist()[0] == 10  # the wide slice stands for itself
    assert b.ref_px[0] == pytest.approx(90.0)


def test_merged_blocks_keep_proportions_and_mark_important_categories():
    """Blocks take their longest interval's category; a sub-pixel copy among kernels
    gets a marker instead of vanishing (or painting the whole column)."""
    s = np.arange(0.0, 100.0, 0.1)
    e = s + 0.05
    e[::10] += 0.03  # the first interval of every column is the longest
    cat = np.full(len(s), 20)
    cat[503] = 30  # one important interval in column 50
    pyr = IntervalPyramid(np.zeros(len(s)), s, e, np.arange(len(s)), np.zeros(len(s)), 1,
                          cat=cat, marker_from=25)
    b = pyr.blocks([0], 0.0, 100.0, 1.0, level=0)
    assert set(b.color.tolist()) == {20}
    assert len(b) == 1  # one calm band
    mk = b.markers
    assert (mk.c0.tolist(), mk.c1.tolist(), mk.color.tolist()) == ([50], [50], [30])
    for lv in pyr.levels[1:]:
        assert lv.top.max() == 30 and lv.cat.max() == 20  # levels keep both
    span = float(e.max())
    coarse = pyr.blocks([0], 0.0, span, span / 10)
    assert coarse.level >= 0 or len(pyr.levels) == 1
    assert 30 in coarse.markers.color.tolist()
    quiet = IntervalPyramid(np.zeros(len(s)), s, e, np.arange(len(s)), np.zeros(len(s)), 1,
                            cat=cat)
    assert len(quiet.blocks([0], 0.0, 100.0, 1.0).markers) == 0


def test_raw_budget_switches_to_a_level(monkeypatch):
    row, s, e = _rows(1, 20_000, seed=4)
    pyr = IntervalPyramid(row, s, e, np.arange(len(s)), np.zeros(len(s)), 1)
    span = float(e.max())
    pxw = pyr.levels[1].bucket * 0.5  # finer than the first level: raw if affordable
    assert pyr.choose_level([0], 0.0, span, pxw) == 0
    monkeypatch.setattr(vp, "RAW_BUDGET", 100)
    assert pyr.choose_level([0], 0.0, span, pxw) == 1


def test_hit_finds_the_interval_under_x_or_the_longest_nearby():
    s = np.array([0.0, 10.0, 10.5, 12.0])
    e = np.array([5.0, 10.2, 11.9, 12.1])
    pyr = IntervalPyramid(np.zeros(4), s, e, np.array([7, 8, 9, 10]), np.zeros(4), 1)
    assert pyr.hit(0, 2.0, 0.1) == 7
    assert pyr.hit(0, 6.0, 0.1) == -1
    assert pyr.hit(0, 10.3, 1.0) == 9  # between two: the longer within tolerance
    assert pyr.hit(1, 2.0, 0.1) == -1


def test_counter_envelope_keeps_a_single_spike():
    t = np.arange(200_000, dtype=float)
    v = np.zeros_like(t)
    v[123_457] = 9.0
    pyr = CounterPyramid(t, v, float(t[-1]))
    assert len(pyr.levels) > 1
    env = pyr.envelope(0.0, float(t[-1]), t[-1] / 300)
    assert env.vmax.max() == 9.0
    assert len(env.col) <= 301
    spike_col = int(123_457 / (t[-1] / 300))
    assert env.vmax[env.col == spike_col][0] == 9.0


def test_window_helpers_respect_limits():
    assert clamp_window(-50, 50, 0, 1000, 1) == (0, 100)
    assert clamp_window(10, 10, 0, 1000, 1) == (9.5, 10.5)
    assert clamp_window(-10, 5000, 0, 1000, 1) == (0, 1000)
    a, b = zoom_window(0, 100, 25, 0.5, 0, 1000, 1)
    assert (a, b) == (12.5, 62.5)  # the point under the cursor stays put
    assert zoom_window(0, 1000, 500, 4, 0, 1000, 1) == (0, 1000)
    a, b = zoom_window(0, 2, 1, 0.01, 0, 1000, 1)
    assert b - a == 1
    assert pan_window(900, 1000, 50, 0, 1000) == (900, 1000)
    assert pan_window(100, 200, -150, 0, 1000) == (0, 100)


def test_empty_rows_in_a_query_keep_blocks_on_the_right_rows():
    row, s, e = _rows(2, 500, seed=5)
    row = row * 2  # rows 0 and 2 hold intervals, rows 1 and 3 are empty
    pyr = IntervalPyramid(row, s, e, np.arange(len(s)), np.zeros(len(s)), 4)
    span = float(e.max())
    b = pyr.blocks([1, 0, 3, 2], 0.0, span, span / 200)
    assert set(b.slot.tolist()) == {1, 3}  # slots index the rows argument
    for slot, r in ((1, 0), (3, 2)):
        got = set()
        for c0, c1 in zip(b.c0[b.slot == slot].tolist(), b.c1[b.slot == slot].tolist()):
            got.update(range(c0, c1 + 1))
        assert got == _brute_columns(s[row == r], e[row == r], 0.0, span / 200, 200)
