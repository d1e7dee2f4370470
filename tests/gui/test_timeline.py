"""Timeline rendering and API: colours, LOD bounds, cached repaint, overlays, groups."""

from __future__ import annotations

import numpy as np
import pytest
from PySide6 import QtCore, QtGui, QtWidgets
from PySide6.QtTest import QTest
from timeline_fixtures import BASE, US, deep_trace, small_trace, synthetic

from sofa_gui.core.analysis.results import Iterations
from sofa_gui.core.trace import Kind
from sofa_gui.qt.timeline import prepare
from sofa_gui.qt.timeline.overlays import ACCENT
from sofa_gui.view import colors
from sofa_gui.view.tooltip import literal_html


def _pixel(img: QtGui.QImage, p: QtCore.QPoint) -> str:
    return QtGui.QColor(img.pixel(p.x(), p.y())).name()


def _grab(w) -> QtGui.QImage:
    QtWidgets.QApplication.processEvents()
    return w.grab().toImage()


def _inside(w, index: int, frac_x: float = 0.5) -> QtCore.QPoint:
    """A pixel inside slice ``index``, above where its label text sits."""
    m = w.model
    top, _ = m.row_span(m.slice_row(index))
    s, e = m.slice_extent(index)
    return w.view_point(m.t0 + int(s + (e - s) * frac_x), top + 3.0 / 18)


def _index(trace, name: str) -> int:
    nid = trace.name_ids(lambda n: n == name)[0]
    return int(np.flatnonzero(trace.slices.name == nid)[0])


def test_slices_are_painted_in_their_colors(make_timeline):
    trace = small_trace()
    w = make_timeline(trace)
    img = _grab(w)
    kernel = _index(trace, "void gemm_kernel<float>(float*)")
    copy = _index(trace, "Memcpy HtoD (Pageable -> Device)")
    own, _ = colors.slice_color_ids(trace)
    assert _pixel(img, _inside(w, kernel)) == colors.PALETTE[own[kernel]]
    assert _pixel(img, _inside(w, copy)) == colors.RESERVED["memcpy_h2d"]
    assert own[kernel] == colors.name_color_id("void gemm_kernel<float>(float*)")  # stable


@pytest.mark.parametrize("n", [2_000, 200_000])
def test_drawn_blocks_bounded_by_rows_times_width(make_timeline, n):
    trace = synthetic(n, lanes=10)
    w = make_timeline(trace, size=(900, 500))
    width = int(w.view_box().width()) + 1
    t0, span = trace.start_ns, trace.end_ns - trace.start_ns
    for frac, at in ((1.0, 0.0), (0.2, 0.3), (0.01, 0.5), (0.0005, 0.5)):
        w.zoom_to(t0 + int(span * at), t0 + int(span * (at + frac)))
        _grab(w)
        rows = len(w.model.layout.visible_rows(*w.view_box().viewRange()[1]))
        assert 0 < w.drawn_block_count() <= rows * width


def test_repaint_after_pans_matches_a_fresh_render(make_timeline):
    trace = synthetic(50_000, lanes=10)
    t0, span = trace.start_ns, trace.end_ns - trace.start_ns
    a = make_timeline(trace, size=(800, 400))
    a.zoom_to(t0 + span // 3, t0 + span // 3 + span // 50)
    _grab(a)
    for _ in range(3):
        lo, hi = a.visible_range()
        a.zoom_to(lo + (hi - lo) // 10, hi + (hi - lo) // 10)
        _grab(a)
    b = make_timeline(trace, size=(800, 400))
    b.zoom_to(*a.visible_range())
    assert b.visible_range() == a.visible_range()
    rect = a.view_box().sceneBoundingRect().toRect().adjusted(2, 2, -2, -2)
    assert _grab(a).copy(rect) == _grab(b).copy(rect)


def _count(img: QtGui.QImage, color: str, rect: QtCore.QRect | None = None) -> int:
    rect = rect or img.rect()
    target = QtGui.QColor(color).rgb()
    return sum(img.pixel(x, y) == target for x in range(rect.left(), rect.right(), 1)
               for y in range(rect.top(), rect.bottom(), 1))


def test_selection_outline_and_flow_arrow(make_timeline, qtbot):
    trace = small_trace()
    w = make_timeline(trace)
    kernel = _index(trace, "void gemm_kernel<float>(float*)")
    launch = _index(trace, "cudaLaunchKernel")
    p_launch, p_kernel = _inside(w, launch, 0.0), _inside(w, kernel, 0.0)
    top, bottom = sorted((p_launch.y(), p_kernel.y()))  # device lanes are drawn first
    between = QtCore.QRect(p_launch.x() - 4, top + 12, p_kernel.x() - p_launch.x() + 8,
                           bottom - top - 20)
    before = _grab(w)
    assert _count(before, ACCENT.name(), between) == 0
    with qtbot.waitSignal(w.slice_selected):
        w.select_slice(kernel)
    after = _grab(w)
    assert _count(after, ACCENT.name(), between) > 5  # the launch -> kernel arrow
    box = _inside(w, kernel)
    outline = QtCore.QRect(box.x() - 400, box.y() - 6, 800, 20)
    ink = w.palette().color(QtGui.QPalette.ColorRole.Text).name()
    assert _count(after, ink, outline) > _count(before, ink, outline) + 50


def test_collapsing_a_group_shows_a_summary_line(make_timeline, qtbot):
    trace = small_trace()
    w = make_timeline(trace)
    height = w.model.total_height
    header = next(line for line in w.model.layout.lines if line.text == "host 1")
    pos = w.graphics_view().mapFromScene(w.view_box().mapViewToScene(
        QtCore.QPointF(0, header.top + 0.5)))
    pos.setX(40)  # in the label column
    QTest.mouseClick(w.graphics_view().viewport(), QtCore.Qt.MouseButton.LeftButton,
                     QtCore.Qt.KeyboardModifier.NoModifier, pos)
    assert w.model.collapsed == {"host 1"}
    assert w.model.total_height < height - 2
    assert not any(line.text == "python main" for line in w.model.layout.lines)
    step = _index(trace, "train_step")
    own, _ = colors.slice_color_ids(trace)
    img = _grab(w)
    at = w.view_point(BASE + 50 * US, header.top + 0.1 + 3.0 / 18)  # above the label text
    assert _pixel(img, at) == colors.PALETTE[own[step]]  # drawn on the header line
    w._toggle_group("host 1")
    assert w.model.total_height == height
    w._toggle_group("host 1")
    w.select_slice(step)  # revealing a slice opens its group
    assert w.model.collapsed == set()


def test_highlight_dims_the_rest_and_outlines_matches(make_timeline):
    trace = small_trace()
    w = make_timeline(trace)
    kernel = _index(trace, "void gemm_kernel<float>(float*)")
    launch = _index(trace, "cudaLaunchKernel")
    plain = _grab(w)
    w.set_highlight(np.array([kernel]))
    img = _grab(w)
    assert _pixel(img, _inside(w, kernel)) == _pixel(plain, _inside(w, kernel))
    assert _pixel(img, _inside(w, launch)) != _pixel(plain, _inside(w, launch))
    assert _count(img, "#ff8f00") > 100
    w.set_highlight(None)
    assert _grab(w) == plain


def test_counter_lane_draws_the_step(make_timeline):
    from sofa_gui.view.tooltip import counter_tooltip

    trace = small_trace()
    w = make_timeline(trace)
    line = next(ln for ln in w.model.layout.lines if ln.text == "memory")
    assert "memory: 5 GB" in counter_tooltip(w.model, line.lane, 700.0 * US)
    assert "memory: 0 B" in counter_tooltip(w.model, line.lane, 100.0 * US)
    img = _grab(w)
    near_top = line.top + 0.35
    high = _pixel(img, w.view_point(BASE + 700 * US, near_top))
    low = _pixel(img, w.view_point(BASE + 200 * US, near_top))
    assert high != low
    assert QtGui.QColor(high).lightness() < QtGui.QColor(low).lightness()


def test_tooltip_is_plain_text_with_the_key_facts(make_timeline):
    trace = small_trace()
    w = make_timeline(trace)
    bold = _index(trace, "<b>not bold</b>")
    text = w.tooltip_text(bold)
    assert text.splitlines()[0] == "<b>not bold</b>"
    assert "lane: host 1 / python main" in text
    assert "start: +500.000 µs" in text and "duration: 400 µs" in text
    html = literal_html(text)
    assert "&lt;b&gt;not bold&lt;/b&gt;" in html and "<b>" not in html
    kernel = _index(trace, "void gemm_kernel<float>(float*)")
    assert "grid: [64, 1, 1]" in w.tooltip_text(kernel)
    copy = _index(trace, "Memcpy HtoD (Pageable -> Device)")
    assert "copy: H2D, 4.19 MB" in w.tooltip_text(copy)



def test_hover_shows_the_tooltip_of_the_slice_under_the_mouse(make_timeline, qtbot):
    trace = small_trace()
    w = make_timeline(trace)
    bold = _index(trace, "<b>not bold</b>")
    top, _ = w.model.row_span(w.model.slice_row(bold))
    at = w.view_point(BASE + 700 * US, top + 0.5)
    viewport = w.graphics_view().viewport()
    QTest.mouseMove(viewport, at - QtCore.QPoint(6, 0))
    qtbot.wait(30)  # pyqtgraph rate-limits hover events
    QTest.mouseMove(viewport, at)
    qtbot.waitUntil(lambda: "not bold" in QtWidgets.QToolTip.text(), timeout=2000)
    text = QtWidgets.QToolTip.text()
    assert "&lt;b&gt;not bold&lt;/b&gt;" in text and "lane: host 1 / python main" in text


def test_iterations_strip_and_selection(make_timeline, qtbot):
    trace = small_trace()
    w = make_timeline(trace)
    starts = BASE + np.array([0, 300, 600]) * US
    w.set_iterations(Iterations("annotations", "test", starts, starts + 300 * US))
    with qtbot.waitSignal(w.iteration_selected) as sig:
        w.select_iteration(1)
    assert sig.args == [1]
    img = _grab(w)
    strip = w.strip_view_box()
    pos = w.graphics_view().mapFromScene(strip.mapViewToScene(QtCore.QPointF(350.0 * US, 0.9)))
    assert _pixel(img, pos) == ACCENT.name()
    assert w.iteration_text(1).splitlines()[:3] == [
        "iteration 1", "start: +300.000 µs", "duration: 300 µs"]
    with qtbot.assertNotEmitted(w.iteration_selected):
        w.select_iteration(1)
    with qtbot.waitSignal(w.iteration_selected) as sig:
        w.select_iteration(None)
    assert sig.args == [-1]
    w.set_iterations(None)
    assert len(w.model.iter_starts) == 0


def test_range_signal_carries_absolute_ns(make_timeline, qtbot):
    trace = small_trace()
    w = make_timeline(trace)
    with qtbot.waitSignal(w.range_changed) as sig:
        w.zoom_to(BASE + 123 * US, BASE + 456 * US)
    assert sig.args == [BASE + 123 * US, BASE + 456 * US]
    with qtbot.waitSignal(w.range_changed) as sig:
        w.reset_zoom()
    assert sig.args == [trace.start_ns, trace.end_ns]


def test_prepared_trace_and_empty_states(make_timeline):
    trace = small_trace()
    w = make_timeline()
    _grab(w)  # no trace: paints nothing, no errors
    w.set_trace(prepare(trace))  # built off the GUI thread in the app
    assert w.visible_range() == (trace.start_ns, trace.end_ns)
    _grab(w)
    assert w.drawn_block_count() > 0
    w.select_slice(10**9)  # out of range: ignored
    assert w.model.selected == -1
    w.set_trace(None)
    _grab(w)
    assert w.drawn_block_count() == 0 or w.model.trace is None


def test_kinds_get_distinct_fixed_colors():
    trace = small_trace()
    own, cat = colors.slice_color_ids(trace)
    kinds = trace.slices.kind
    copy = int(np.flatnonzero(kinds == Kind.MEMCPY)[0])
    assert colors.PALETTE[own[copy]] == colors.RESERVED["memcpy_h2d"] == colors.PALETTE[cat[copy]]
    reserved = set(colors.RESERVED.values())
    assert not reserved & set(colors.NAME_COLORS)
    for c in colors.PALETTE:
        lum = colors.luminance(c)
        text = colors.luminance(colors.text_color(c))
        hi, lo = max(lum, text), min(lum, text)
        assert (hi + 0.05) / (lo + 0.05) >= 4.5  # WCAG AA for the label text


def test_deep_lanes_are_capped_until_expanded(make_timeline, qtbot):
    from sofa_gui.view.layout import MAX_ROWS

    trace = deep_trace(30)
    w = make_timeline(trace)
    lay = w.model.layout
    line = next(ln for ln in lay.lines if ln.text == "python main")
    assert (line.depth, line.shown) == (30, MAX_ROWS)
    base = w.model.index.row_base[line.lane]
    tops = lay.row_top[base:base + 30]
    assert np.all(tops[MAX_ROWS - 1:] == tops[MAX_ROWS - 1])  # deeper rows merged
    assert lay.row_shared[base + MAX_ROWS - 1] and not lay.row_shared[base]
    gpu = next(ln for ln in lay.lines if ln.text == "stream 0")
    assert gpu.top < 20  # the GPU lane stays near the top
    # clicking the lane label shows all rows
    pos = w.graphics_view().mapFromScene(w.view_box().mapViewToScene(
        QtCore.QPointF(0, line.top + 0.5)))
    pos.setX(40)
    QTest.mouseClick(w.graphics_view().viewport(), QtCore.Qt.MouseButton.LeftButton,
                     QtCore.Qt.KeyboardModifier.NoModifier, pos)
    line = next(ln for ln in w.model.layout.lines if ln.text == "python main")
    assert line.shown == 30
    w._toggle_lane(line.lane)
    assert next(ln for ln in w.model.layout.lines if ln.text == "python main").shown == MAX_ROWS
    # selecting a slice in a merged row expands its lane
    deepest = int(np.flatnonzero(trace.slices.depth == 25)[0])
    with qtbot.waitSignal(w.slice_selected):
        w.select_slice(deepest)
    assert next(ln for ln in w.model.layout.lines if ln.text == "python main").shown == 30


def test_time_axis_labels_adapt_to_the_zoom():
    from sofa_gui.core.units import format_time
    from sofa_gui.qt.timeline.time_axis import tick_labels, tick_steps

    assert tick_labels([0.0, 5e8, 1e9], 5e8) == ["0", "0.5 s", "1.0 s"]
    assert tick_labels([2e6, 4e6], 2e6) == ["2 ms", "4 ms"]
    assert tick_labels([1500.0, 1750.0], 250.0) == ["1.50 µs", "1.75 µs"]
    assert tick_labels([10.0, 20.0], 10.0) == ["10 ns", "20 ns"]
    deep = tick_labels([1_234_560_000.0, 1_234_560_010.0], 10.0)  # 10 ns steps at 1.23 s
    assert deep == ["1.23456000 s", "+10 ns"]
    assert format_time(1_250_000) == "1.25 ms"
    major, minor = tick_steps(1e9, 1000)
    assert major in (1e8, 2e8) and minor < major
    assert tick_steps(3.0, 1000)[0] == 1.0  # never below 1 ns


def test_empty_and_counter_only_traces(make_timeline):
    from sofa_gui.core.builder import TraceBuilder
    from sofa_gui.core.trace import LaneKind

    w = make_timeline(TraceBuilder("empty", "test").finish())
    _grab(w)
    assert w.drawn_block_count() == 0
    b = TraceBuilder("counters", "test")
    lane = b.lane("mem", "memory", LaneKind.COUNTER, "GPU 0")
    b.add_counter("used", "bytes", lane, BASE + np.arange(1000) * US, np.arange(1000.0))
    trace = b.finish()
    w.set_trace(trace)
    img = _grab(w)
    assert w.visible_range() == (trace.start_ns, trace.end_ns)
    line = w.model.layout.lines[-1]
    assert _pixel(img, w.view_point(BASE + 990 * US, line.top + 0.4)) != _pixel(
        img, w.view_point(BASE + 10 * US, line.top + 0.4))


def test_a_sub_pixel_copy_among_kernels_stays_visible(make_timeline):
    from sofa_gui.core.builder import TraceBuilder
    from sofa_gui.core.trace import CopyKind, LaneKind

    b = TraceBuilder("copy", "test")
    lane = b.lane("s", "stream 7", LaneKind.GPU, "GPU 0", device=0, stream=7)
    n = 20_000
    start = BASE + np.arange(n) * 1000
    kind = np.full(n, int(Kind.KERNEL))
    kind[n // 2] = int(Kind.MEMCPY)
    ck = np.zeros(n, np.int64)
    ck[n // 2] = int(CopyKind.H2D)
    b.add_slices(start, np.full(n, 600), lane, ["k"] * n, kind=kind, copy_kind=ck)
    w = make_timeline(b.finish(), size=(800, 300))
    img = _grab(w)
    assert _count(img, colors.RESERVED["memcpy_h2d"]) >= 4  # the marker
    assert _count(img, colors.CATEGORIES[Kind.KERNEL]) > 50 * _count(
        img, colors.RESERVED["memcpy_h2d"])  # proportions stay honest
