"""ViewState: one owner of what is on screen; intents change it, listeners hear what changed."""

from __future__ import annotations

import numpy as np
import pytest

from sofa_gui.view.state import MIN_PAD_NS, Change, ViewState, padded, reveal_window

US = 1000


def _state(n_slices=10, span=1000.0 * US):
    v = ViewState()
    heard = []
    v.subscribe(heard.append)
    v.set_trace(5_000_000, span, n_slices)
    v.set_iterations(5_000_000 + np.array([0, 300, 600]) * US,
                     5_000_000 + np.array([300, 600, 900]) * US)
    heard.clear()
    return v, heard


def test_selection_changes_notify_once_and_clamp():
    v, heard = _state()
    v.select_slice(3)
    v.select_slice(3)
    v.select_slice(99)  # out of range: clears
    assert heard == [Change.SLICE, Change.SLICE] and v.selected_slice == -1
    v.select_slice(4, reveal=True)
    v.select_slice(4, reveal=True)  # asked to reveal again: heard again
    assert heard[-2:] == [Change.SLICE, Change.SLICE] and v.reveal


def test_zooming_to_an_iteration_uses_the_one_padding():
    v, heard = _state()
    v.select_iteration(1, zoom=True)
    assert heard == [Change.ITERATION, Change.WINDOW]
    assert (v.x0, v.x1) == padded(300.0 * US, 600.0 * US)
    assert v.abs_window() == (5_000_000 + 285 * US, 5_000_000 + 615 * US)
    v.select_iteration(7)
    assert v.selected_iteration == -1


def test_window_is_clamped_to_the_trace_and_absolute_zoom_converts():
    v, heard = _state()
    v.set_window(-50.0, 2e9)
    assert (v.x0, v.x1) == (0.0, 1000.0 * US) and heard == []  # already the whole trace
    v.zoom_to(5_000_000 + 100 * US, 5_000_000 + 200 * US)
    assert (v.x0, v.x1) == (100.0 * US, 200.0 * US) and heard == [Change.WINDOW]


def test_range_selection_layout_and_highlights():
    v, heard = _state()
    v.select_range(400.0, 100.0)
    assert v.range_selection == (100.0, 400.0)
    v.select_range(None)
    v.toggle_group("GPU 0")
    assert v.collapsed == {"GPU 0"}
    v.toggle_lane(3)
    v.set_highlights(np.array([1, 2]))
    v.set_highlights(np.zeros(0))
    assert v.highlights is None
    assert heard == [Change.RANGE, Change.RANGE, Change.LAYOUT, Change.LAYOUT,
                     Change.HIGHLIGHTS, Change.HIGHLIGHTS]


def test_range_selection_keeps_its_lanes_and_reads_back_in_absolute_ns():
    v, heard = _state()
    v.select_range(200.5 * US, 100.2 * US, lanes=[5, 2, 5])
    assert v.range_selection == (100.2 * US, 200.5 * US) and v.range_lanes == (2, 5)
    assert v.abs_range() == (5_000_000 + 100_200, 5_000_000 + 200_500, (2, 5))
    v.select_range(100.2 * US, 200.5 * US, lanes=[2, 5])  # same: no notification
    v.select_range(100.2 * US, 200.5 * US, lanes=[2])  # other lanes: a change
    v.select_range(7.0, 7.0, lanes=[1])  # empty: clears, lanes too
    assert v.range_selection is None and v.range_lanes == () and v.abs_range() is None
    assert heard == [Change.RANGE, Change.RANGE, Change.RANGE]


def test_rank_selection_notifies_and_resets_with_the_trace():
    v, heard = _state()
    v.select_rank(1)
    v.select_rank(1)
    assert v.selected_rank == 1 and heard == [Change.RANK]
    v.select_range(1.0, 2.0, [0])
    v.set_trace(0, 50.0, 2)
    assert (v.selected_rank, v.range_selection, v.range_lanes) == (-1, None, ())


def test_a_new_trace_resets_everything():
    v, heard = _state()
    v.select_slice(1)
    v.toggle_group("g")
    v.set_window(10.0, 20.0)
    v.set_trace(0, 50.0, 2)
    assert (v.selected_slice, v.collapsed, v.x0, v.x1) == (-1, set(), 0.0, 50.0)
    assert len(v.iter_starts) == 0 and heard[-1] is Change.TRACE


@pytest.mark.parametrize("window, thing, zoom, expect", [
    ((0.0, 100.0), (10.0, 20.0), False, (0.0, 100.0)),  # visible: stays
    ((0.0, 100.0), (300.0, 310.0), False, (255.0, 355.0)),  # off-screen: pans, keeps zoom
    ((0.0, 100.0), (0.0, 1000.0), False, padded(0.0, 1000.0)),  # wider: fitted
    ((0.0, 1e6), (5000.0, 7000.0), True, (3000.0, 9000.0)),  # zoom: a third, centred
])
def test_reveal_is_one_rule(window, thing, zoom, expect):
    assert reveal_window(*window, *thing, zoom) == pytest.approx(expect)


def test_padding_has_a_floor():
    assert padded(0.0, 1.0) == (-MIN_PAD_NS, 1.0 + MIN_PAD_NS)


def test_units_read_the_same_everywhere():
    from sofa_gui.core.units import (
        fmt_bytes,
        fmt_ns,
        fmt_ns_exact,
        fmt_pct,
        fmt_rate,
        lane_title,
        us,
    )

    assert (fmt_ns(1.234e9), fmt_ns(45_600_000), fmt_ns(789_000), fmt_ns(12)) == (
        "1.23 s", "45.6 ms", "789 µs", "12 ns")
    assert fmt_ns_exact(176_302_000) == "176.302 ms"
    assert (fmt_bytes(12), fmt_bytes(4 << 20), fmt_bytes(5e9)) == ("12 B", "4.19 MB", "5 GB")
    assert fmt_rate(10_000_000, 1_000_000) == "10 GB/s" and fmt_rate(1, 0) == ""
    assert fmt_pct(0.1234) == "12.3%"
    assert lane_title("stream 7", "GPU 0") == "GPU 0 / stream 7" and lane_title("x") == "x"
    assert us(1_700_000_000_000_000_123) == 1_700_000_000_000_000.123


def test_esc_clears_range_then_highlights_then_slice_then_iteration():
    v, heard = _state()
    v.select_iteration(1)
    v.select_slice(3)
    v.set_highlights([2, 3, 7])
    v.select_range(10.0, 20.0)
    heard.clear()
    assert [v.escape() for _ in range(5)] == [Change.RANGE, Change.HIGHLIGHTS, Change.SLICE,
                                              Change.ITERATION, None]
    assert Change.HIGHLIGHTS_CLEARED in heard  # whoever made the highlights is told
    assert v.highlights is None and v.selected_slice == v.selected_iteration == -1


def test_f3_steps_through_any_highlight_from_the_selected_slice():
    v, heard = _state()
    v.set_highlights(np.array([2, 5, 7]))
    v.select_slice(5)
    assert [v.step_highlight(+1) for _ in range(3)] == [7, 2, 5]  # wraps
    assert v.step_highlight(-1) == 2 and v.selected_slice == 2 and v.reveal
    v.set_highlights(None)
    assert v.step_highlight(+1) == -1 and v.selected_slice == 2


def test_the_iteration_that_holds_a_time():
    v, _ = _state()
    assert [v.iteration_of(x * US) for x in (0, 299, 300, 899, 900, -1)] == [0, 0, 1, 2, -1, -1]
