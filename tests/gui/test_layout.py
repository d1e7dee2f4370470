"""A layout that never breaks: huge and mangled names, 1280x800, docks that fit."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QAbstractScrollArea

from sofa_gui.core.names import demangle
from sofa_gui.core.samples import demo_trace_path
from sofa_gui.core.trace import MAX_NAME_CHARS
from sofa_gui.qt.panels.common import WrapLabel

MANGLED = "_ZN19cutlass_cudnn_train6KernelINS_4gemm6kernel4GemmEEEvNT_6ParamsE"
HUGE = "_ZN19cutlass_cudnn_train" + "x" * 1_000_000


@pytest.fixture
def named_trace(tmp_path, data_dir):
    """The real MI250 minitoy trace with one kernel renamed to 1 MB and one mangled."""
    with gzip.open(data_dir / "kineto" / "mi250_minitoy_train_ROCm6_2_kineto.json.gz") as f:
        doc = json.load(f)
    kernels = [e for e in doc["traceEvents"] if e.get("cat") == "kernel"]
    kernels[0]["name"] = HUGE
    kernels[1]["name"] = MANGLED
    out = tmp_path / "names.json"
    out.write_text(json.dumps(doc))
    return out


def _fits(w) -> None:
    assert (w.width(), w.height()) == (1280, 800)
    for dock in w.docks.values():
        assert dock.width() <= 1280 and dock.minimumSizeHint().width() < 640


def test_a_1mb_name_leaves_the_window_size_alone(qtbot, open_window, named_trace):
    w = open_window(named_trace, (1280, 800))
    s = w.session
    huge = next(i for i in range(len(s.trace.slices)) if s.trace.full_name(i) == HUGE)
    s.select_slice(huge, reveal=True)
    qtbot.wait(50)
    assert not w.docks["details"].visibleRegion().isEmpty()  # raised on selection
    # the string table holds it cut, with its length; the full text is
    # kept once in the args store
    shown = w.panels["details"].name.text()
    assert shown == s.trace.name_of(huge) and len(shown) <= MAX_NAME_CHARS
    assert shown.startswith(HUGE[:1000]) and f"[{len(HUGE):,} characters" in shown
    assert w.panels["details"].name.width() <= w.docks["details"].width()
    # the full text is one click away: Copy full name
    button = w.panels["details"].copy_full
    assert button.isVisible()
    QGuiApplication.clipboard().clear()
    qtbot.mouseClick(button, Qt.MouseButton.LeftButton)
    assert QGuiApplication.clipboard().text() == HUGE
    s.select_slice(huge + 1 if huge + 1 < len(s.trace.slices) else huge - 1)
    assert not button.isVisible()  # only for a cut name
    w.panels["statistics"].show_table("kernel", "trace")
    w.docks["statistics"].raise_()
    names = [r.name for r in w.panels["statistics"].model.table.rows]
    assert f"[{len(HUGE):,} characters" in " ".join(names)  # grouped, shown elided
    w.search_bar.open_bar()
    w.search_bar.edit.setText("cutlass_cudnn_train")
    w.search_bar.run_search()
    qtbot.wait(50)
    _fits(w)


def test_mangled_names_are_demangled_for_display_and_kept_raw(open_window, named_trace):
    assert demangle(MANGLED) == ("void cutlass_cudnn_train::Kernel<cutlass_cudnn_train::gemm::"
                                 "kernel::Gemm>(cutlass_cudnn_train::gemm::kernel::Gemm::Params)")
    assert demangle("aten::conv2d") == "aten::conv2d" and demangle("_Zbad") == "_Zbad"
    w = open_window(named_trace, (1280, 800))
    s = w.session
    i = next(i for i in range(len(s.trace.slices)) if s.trace.name_of(i) == MANGLED)
    s.select_slice(i)
    d = w.panels["details"]
    assert d.name.text() == demangle(MANGLED)
    assert d.fields["Raw name"].text() == MANGLED
    assert w.timeline.model.label_of(i) == "cutlass_cudnn_train::Kernel"  # demangled, short


def _text_fits(lab) -> None:
    """The label's rich text laid out at the label's width needs no more width (a long
    unbreakable word would be painted past the label's edge and cut)."""
    from PySide6.QtCore import Qt
    from PySide6.QtGui import QTextDocument, QTextOption

    if lab.textFormat() != Qt.TextFormat.RichText or not lab.isVisible():
        return
    doc = QTextDocument()
    doc.setDefaultFont(lab.font())
    doc.setDocumentMargin(0)
    opt = doc.defaultTextOption()
    opt.setWrapMode(QTextOption.WrapMode.WordWrap)  # as a word-wrapping QLabel lays out
    doc.setDefaultTextOption(opt)
    doc.setHtml(lab.text())
    width = lab.contentsRect().width()
    doc.setTextWidth(width)
    assert doc.idealWidth() <= width + 1, lab.text()[:200]


def test_1280x800_nothing_is_clipped(qtbot, open_window):
    w = open_window(demo_trace_path(), (1280, 800))
    s = w.session
    s.select_iteration(2)
    qtbot.wait(100)
    img = w.grab().toImage()
    assert (img.width(), img.height()) == (1280, 800)
    _fits(w)
    fp = w.panels["findings"]
    area = fp.findChild(QAbstractScrollArea)
    assert fp.cards and all(c.width() <= area.viewport().width() for c in fp.cards)
    for card in fp.cards:  # every label of an opened card wraps inside it
        card.set_expanded(True)
        qtbot.wait(20)
        for lab in (x for x in card.findChildren(WrapLabel) if x.isVisible()):
            assert lab.geometry().right() <= card.width()
            _text_fits(lab)
    it = w.panels["iterations"].table
    shown = [c for c in range(it.model().columnCount()) if not it.isColumnHidden(c)]
    assert 5 <= len(shown) and it.horizontalHeader().length() <= it.viewport().width() + 1
    assert all(it.columnWidth(c) >= 40 for c in shown if c)  # Dominant included
    fm = it.fontMetrics()  # "#" is as wide as its header (and sort arrow) and indices need
    last = str(it.model().rowCount() - 1)
    assert it.columnWidth(0) >= max(fm.horizontalAdvance(last) + 8, fm.horizontalAdvance("#") + 20)
    # Details shares the right column as a tab: all of it goes to Bottlenecks until
    # a slice is selected
    assert w.docks["details"] in w.tabifiedDockWidgets(w.docks["findings"])
    assert w.docks["details"].visibleRegion().isEmpty()
    assert not w.docks["findings"].visibleRegion().isEmpty()
    assert w.docks["findings"].height() > 600
    assert w.width() - w.docks["findings"].width() > 800  # the timeline keeps most width


def test_docks_take_no_minimum_size_from_content(qtbot, open_window):
    """Every dock (tabs included, with their widest content shown) can be made small; the
    window with a trace open shrinks to 640x480 exactly."""
    w = open_window(demo_trace_path(), (1280, 800))
    w.session.select_iteration(2)
    w.panels["statistics"].show_table("copy", "steady")  # the widest table
    for key, dock in w.docks.items():
        dock.show()
        dock.raise_()
        qtbot.wait(10)
        hint = dock.minimumSizeHint()
        assert hint.width() <= 120 and hint.height() <= 120, (key, hint)
    w.resize(640, 480)
    qtbot.wait(50)
    assert (w.width(), w.height()) == (640, 480)


def test_details_show_the_whole_lane_title_stream_and_args(qtbot, open_window):
    from sofa_gui.core.units import lane_title

    w = open_window(demo_trace_path(), (1280, 800))
    s, t = w.session, w.session.trace
    d = w.panels["details"]
    threads = np.flatnonzero(np.char.startswith(np.asarray(t.lanes.name, str), "thread"))
    cpu = int(np.flatnonzero(np.isin(t.slices.lane, threads) & (t.slices.args >= 0))[0])
    s.select_slice(cpu)
    qtbot.wait(50)
    lane = int(t.slices.lane[cpu])
    want = lane_title(t.lanes.name[lane], t.lanes.group[lane])
    assert "thread" in want and "(" in want  # "process python (pid) / thread tid (python)"
    lab = d.fields["Lane"]
    assert lab.text() == want
    assert lab.heightForWidth(lab.width()) <= lab.height()  # wrapped, not cut
    assert lab.geometry().right() <= d.width()
    gpu = int(np.flatnonzero((t.slices.device >= 0) & (t.slices.stream >= 0)
                             & (t.slices.args >= 0))[0])
    s.select_slice(gpu)
    qtbot.wait(50)
    dev = d.fields["Device"]
    assert f"stream {int(t.slices.stream[gpu])}" in dev.text()
    assert dev.heightForWidth(dev.width()) <= dev.height()
    n_args = d.args.topLevelItemCount()
    row_h = d.args.sizeHintForRow(0)
    assert n_args >= 5 and d.args.viewport().height() >= min(n_args, 10) * row_h


def test_one_event_count_one_median_and_both_iteration_numbers(qtbot, open_window):
    from test_app_window import open_and_wait

    from sofa_gui.core.units import fmt_ns
    from sofa_gui.qt.panels.iterations import COLUMNS
    from sofa_gui.qt.panels.summary import events_loaded

    w = open_window(None, (1280, 800))
    said = []
    w.statusBar().messageChanged.connect(said.append)
    s = open_and_wait(qtbot, w, demo_trace_path())
    n = f"{events_loaded(s.trace):,}"
    assert w.summary.text_of("Events") == n
    counts = [m for m in said if "events" in m]
    assert counts and all(n in m for m in counts)  # the status bar says the same number
    s.select_iteration(2)
    it, med = s.iterations, s.iterations.median_index
    model = w.panels["iterations"].model
    row = w.panels["iterations"].row_of(2)
    cell = lambda col: model.index(row, COLUMNS.index(col)).data()  # noqa: E731
    assert cell("#") == "2" and cell("Step") == it.labels[2] == "ProfilerStep#7"
    delta = fmt_ns(abs(int(it.durations[2]) - int(it.durations[med])))
    bp = w.panels["breakdown"]
    assert f"median #{med}" in w.panels["iterations"].status.text()
    assert f"median #{med}" in bp.status.text()  # the same median iteration everywhere
    assert delta in cell("Δ vs median")
    # on the host clock (the table's) the breakdown says the same difference; a device
    # side on the device clock says which clock it uses
    if bp.current_side().clock == "device":
        assert "device clock" in bp.status.text()
    host = next(k for k, side in enumerate(bp._sides) if side.kind == "host")
    bp.side_combo.setCurrentIndex(host)
    assert f"median #{med}" in bp.status.text() and delta in bp.status.text()


def test_search_hits_keep_their_labels(qtbot, open_window):
    from sofa_gui.view.search import SearchQuery

    w = open_window(demo_trace_path(), (1280, 800))
    s = w.session
    s.search(SearchQuery("convolution_backward"))
    assert len(s.matches) > 10
    t = s.trace
    hit = int(s.matches[np.argmax(t.slices.dur[s.matches])])
    s.select_slice(hit, reveal=True)
    qtbot.wait(100)
    w.timeline.grab()  # paint a frame
    frame = w.timeline._lanes._frame
    texts = [st.text() for _c, _pos, st in frame.hl_labels]
    assert frame.dim is not None and any("convolution_backward" in x for x in texts)


def test_loading_says_what_it_opens_and_shows_activity(qtbot, open_window, tmp_path):
    import shutil

    from test_app_window import loader_children

    w = open_window(None, (1280, 800))
    fresh = tmp_path / "fresh.pt.trace.json.gz"  # not cached: a real decode in a child
    shutil.copyfile(demo_trace_path(), fresh)
    s = w.session
    s.load_mode = "process"
    w.open_path(fresh)
    assert w.summary.title.text() == "Opening fresh.pt.trace.json.gz…"
    assert w.panels["findings"].status.text() == "Loading fresh.pt.trace.json.gz…"
    assert w.panels["breakdown"].status.text() == "Loading fresh.pt.trace.json.gz…"
    assert w.progress_widget.bar.indeterminate  # moving before the first fraction
    qtbot.waitUntil(lambda: bool(loader_children()), timeout=20000)
    with qtbot.waitSignal(s.job_cancelled, timeout=10000):
        w.progress_widget.cancel_button.click()
    assert not w.progress_widget.bar.indeterminate
    qtbot.wait(50)
    assert w.summary.title.text().startswith("No trace open")
    assert w.panels["findings"].status.text() == "No trace open"
