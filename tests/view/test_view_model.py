"""The Qt-free view layer (sofa_gui.view), driven headless: no PySide6, no display."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from timeline_fixtures import US, small_trace

from sofa_gui.view import colors
from sofa_gui.view.layout import MAX_ROWS
from sofa_gui.view.model import TimelineModel, prepare
from sofa_gui.view.search import SearchQuery, find_matches
from sofa_gui.view.tooltip import counter_tooltip, slice_tooltip


def _index(trace, name: str) -> int:
    nid = trace.name_ids(lambda n: n == name)[0]
    return int(np.flatnonzero(trace.slices.name == nid)[0])


def _model(trace=None) -> TimelineModel:
    m = TimelineModel()
    m.set_prepared(prepare(trace or small_trace()))
    return m


def test_the_view_layer_imports_no_qt():
    code = ("import sys, sofa_gui.view.model, sofa_gui.view.search, sofa_gui.view.tooltip;"
            "from timeline_fixtures import small_trace;"
            "m = sofa_gui.view.model.TimelineModel();"
            "m.set_prepared(sofa_gui.view.model.prepare(small_trace()));"
            "bad = [k for k in sys.modules if k.split('.')[0] in "
            "('PySide6', 'pyqtgraph', 'shiboken6') or k.startswith('sofa_gui.qt')];"
            "print(bad); sys.exit(1 if bad else 0)")
    tests = str(__import__("pathlib").Path(__file__).parents[1])
    run = subprocess.run([sys.executable, "-c", code], cwd=tests, capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr


def test_layout_lists_groups_then_lanes_and_a_group_collapses():
    m = _model()
    texts = [ln.text for ln in m.layout.lines]
    # device groups first (GPU streams), then host processes with their threads
    assert texts.index("GPU 0") < texts.index("host 1") < texts.index("python main")
    m.state.toggle_group("host 1")
    assert "python main" not in [ln.text for ln in m.layout.lines]
    m.state.toggle_group("host 1")
    assert "python main" in [ln.text for ln in m.layout.lines]


def test_group_order_and_pins_live_in_the_view_state():
    from sofa_gui.view.state import Change

    m = _model()
    heard = []
    m.state.subscribe(heard.append)
    first = m.groups()
    assert first[0] == "GPU 0" and len(first) >= 2
    m.move_group(first[-1], first[0])  # drag the last header onto the first
    assert m.groups()[0] == first[-1] and m.state.group_order == m.groups()
    m.state.toggle_pin(first[1])
    assert m.groups()[0] == first[1] and m.state.pinned == [first[1]]
    m.state.toggle_pin(first[1])
    assert m.state.pinned == [] and m.groups()[0] == first[-1]
    assert heard == [Change.LAYOUT] * 3
    m.set_order(["no such group", *reversed(first)], ["nope"])  # unknown names dropped
    assert m.groups() == list(reversed(first)) and m.state.pinned == []
    m.set_prepared(prepare(small_trace()))  # a new trace starts from the default order
    assert m.groups() == first


def test_hit_testing_finds_the_slice_and_its_flow_partner():
    trace = small_trace()
    m = _model(trace)
    kernel = _index(trace, "void gemm_kernel<float>(float*)")
    launch = _index(trace, "cudaLaunchKernel")
    top, height = m.row_span(m.slice_row(kernel))
    assert m.slice_at(500.0 * US, top + height / 2, tol=0.0) == kernel
    assert m.slice_at(5000.0 * US, top + height / 2, tol=0.0) == -1
    m.state.select_slice(kernel)
    assert launch in m.partners.tolist()
    assert m.slice_extent(kernel) == (300.0 * US, 700.0 * US)


class _Iterations:
    """The three columns TimelineModel.set_iterations reads."""

    def __init__(self, starts, ends):
        self.starts, self.ends = starts, ends
        self.labels = [str(i) for i in range(len(starts))]

    def __len__(self):
        return len(self.starts)


def test_iterations_map_x_to_an_iteration():
    m = _model()
    t0 = m.t0
    m.set_iterations(_Iterations([t0, t0 + 400 * US], [t0 + 400 * US, t0 + 900 * US]))
    assert m.iteration_at(100.0 * US) == 0 and m.iteration_at(500.0 * US) == 1
    assert m.iteration_at(950.0 * US) == -1
    m.set_iterations(None)
    assert m.iteration_at(100.0 * US) == -1


def test_deep_lanes_are_capped_and_expand_on_request():
    from timeline_fixtures import deep_trace

    m = _model(deep_trace(MAX_ROWS + 10))
    line = next(ln for ln in m.layout.lines if ln.text == "python main")
    assert line.shown == MAX_ROWS
    m.state.toggle_lane(line.lane)
    assert next(ln for ln in m.layout.lines if ln.text == "python main").shown == MAX_ROWS + 10


def test_tooltips_are_plain_text_with_the_key_facts():
    trace = small_trace()
    m = _model(trace)
    text = slice_tooltip(m, _index(trace, "<b>not bold</b>"))
    assert text.splitlines()[0] == "<b>not bold</b>"
    assert "lane: host 1 / python main" in text
    assert "start: +500.000 µs" in text and "duration: 400 µs" in text
    copy = _index(trace, "Memcpy HtoD (Pageable -> Device)")
    assert "copy: H2D, 4.19 MB" in slice_tooltip(m, copy)
    line = next(ln for ln in m.layout.lines if ln.text == "memory")
    assert "memory: 5 GB" in counter_tooltip(m, line.lane, 700.0 * US)


def test_search_matches_whole_trace_plain_regex_and_rejects_bad_regex():
    trace = small_trace()
    conv = _index(trace, "aten::conv2d")
    assert find_matches(trace, SearchQuery("ATEN::")).tolist() == [conv]
    assert find_matches(trace, SearchQuery("ATEN::", case_sensitive=True)).tolist() == []
    assert len(find_matches(trace, SearchQuery(r"^cuda(Launch|Memcpy)", regex=True))) == 2
    assert find_matches(trace, SearchQuery("")).tolist() == []
    with pytest.raises(ValueError, match="bad regular expression"):
        find_matches(trace, SearchQuery("(", regex=True))


def test_colors_are_stable_per_name_and_reserved_for_copies():
    trace = small_trace()
    own, _ = colors.slice_color_ids(trace)
    kernel = _index(trace, "void gemm_kernel<float>(float*)")
    copy = _index(trace, "Memcpy HtoD (Pageable -> Device)")
    assert own[kernel] == colors.name_color_id("void gemm_kernel<float>(float*)")
    assert colors.PALETTE[own[copy]] == colors.RESERVED["memcpy_h2d"]
