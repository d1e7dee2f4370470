"""The main window on the real ResNet-50 sample (DataLoader num_workers=0, input-bound)."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from PySide6.QtCore import QEvent, QMimeData, QObject, QPointF, Qt, QUrl
from PySide6.QtGui import QDropEvent
from PySide6.QtWidgets import QMessageBox

from sofa_gui.core.samples import demo_trace_path
from sofa_gui.core.trace import Kind
from sofa_gui.qt import sliced
from sofa_gui.qt.panels.iterations import COLUMNS
from sofa_gui.view.search import SearchQuery

EXPECTED_ITERATIONS = 6  # ProfilerStep#5..#10
#: Generous: the first open of the sample decodes 35 MB of JSON on a shared 2-core box.
LOAD_TIMEOUT_MS = 120_000


@pytest.fixture
def settings(tmp_path):
    from PySide6.QtCore import QSettings

    return QSettings(str(tmp_path / "settings.ini"), QSettings.Format.IniFormat)


@pytest.fixture
def window(qtbot, settings):
    from sofa_gui.qt.main_window import MainWindow

    win = MainWindow(settings, restore_state=False)
    qtbot.addWidget(win)
    win.resize(1400, 900)
    win.show()
    qtbot.waitExposed(win)
    yield win
    win.session.shutdown()


def open_and_wait(qtbot, win, path, timeout=LOAD_TIMEOUT_MS):
    """Open ``path`` and wait until every analysis step is done (fail fast on errors)."""
    s = win.session
    win.open_path(path)
    assert s.busy
    qtbot.waitUntil(lambda: not s.busy, timeout=timeout)
    assert s.analysis_done, f"open failed: {s.last_error}"
    qtbot.waitUntil(lambda: not sliced.pending(), timeout=timeout)  # panels built in slices
    return s


@pytest.fixture
def demo_path():
    return demo_trace_path()


@pytest.fixture
def fresh_copy(tmp_path, demo_path):
    """A copy of the sample that is not in the cache yet (forces a real decode)."""
    p = tmp_path / "copy.pt.trace.json.gz"
    shutil.copyfile(demo_path, p)
    return p


def test_open_fills_iterations_findings_and_header(qtbot, window, demo_path):
    s = open_and_wait(qtbot, window, demo_path)
    assert window.panels["iterations"].model.rowCount() == EXPECTED_ITERATIONS
    cards = window.panels["findings"].cards
    assert cards and cards[0].finding.id == "input_pipeline_bound"
    measured = [c.finding.rank_key for c in cards if c.finding.id != "compute_bound"]
    assert measured == sorted(measured, reverse=True)  # gain x confidence, hypotheses last
    assert cards[-1].finding.id == "compute_bound"
    assert "Input pipeline" in cards[0].title.text()
    # the best fix that fits names the estimate (cores unknown: workers rest on a guess)
    assert "with cache pre-processed data · confidence 0.90" in cards[0].numbers.text()
    assert "this fix alone" in cards[0].fixes_text()
    header = window.summary
    assert header.text_of("Iterations").startswith(f"{EXPECTED_ITERATIONS} (annotations)")
    assert header.text_of("Format") == s.trace.meta.format
    assert header.text_of("Device busy").endswith("%")
    assert window.stack.currentWidget() is window.timeline
    assert window.windowTitle().startswith(demo_path.name)


def test_clicking_an_iteration_row_updates_breakdown_and_zooms(qtbot, window, demo_path):
    s = open_and_wait(qtbot, window, demo_path)
    table = window.panels["iterations"].table
    row = window.panels["iterations"].row_of(3)
    rect = table.visualRect(table.model().index(row, 3))
    qtbot.mouseClick(table.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    assert s.selected_iteration == 3
    bars = window.panels["breakdown"].bars.rows
    assert bars[0][0] == "Iteration 3 · device" and bars[1][0].startswith("Median")
    total = sum(ns for _c, ns in bars[0][1])
    it = s.iterations
    dev = s.breakdown.device  # its own windows (device clock: the GPU lags its host here)
    assert total == int(dev.ends[3] - dev.starts[3])
    assert s.breakdown.host.times[3].sum() == int(it.ends[3] - it.starts[3])
    assert window.panels["breakdown"].table.rowCount() > 3
    lo, hi = window.timeline.visible_range()
    span = int(it.ends[3] - it.starts[3])
    assert abs(lo - int(it.starts[3])) < 0.1 * span and abs(hi - int(it.ends[3])) < 0.1 * span
    assert window.timeline.model.selected_iteration == 3
    # Enter on another row selects it too
    table.setCurrentIndex(table.model().index(window.panels["iterations"].row_of(1), 0))
    qtbot.keyClick(table, Qt.Key.Key_Return)
    assert s.selected_iteration == 1
    assert window.panels["breakdown"].bars.rows[0][0] == "Iteration 1 · device"


def test_finding_evidence_link_zooms_there(qtbot, window, demo_path):
    s = open_and_wait(qtbot, window, demo_path)
    card = window.panels["findings"].cards[0]
    ev = card.finding.evidence[1]
    card.evidence.linkActivated.emit("ev:1")
    lo, hi = window.timeline.visible_range()
    span = ev.end_ns - ev.start_ns
    assert lo <= ev.start_ns and hi >= ev.end_ns
    assert hi - lo < 1.3 * span
    if ev.iteration is not None:
        assert s.selected_iteration == ev.iteration


def test_finding_cause_link_zooms_to_its_instance_and_header_shows_run_facts(
        qtbot, window, demo_path):
    open_and_wait(qtbot, window, demo_path)
    card = window.panels["findings"].cards[0]
    fixes = card.fixes_text()
    assert "aten::copy_" in card.causes.text() and "num_workers is 0 here" in fixes
    c = card.finding.causes[0]
    card.causes.linkActivated.emit("cause:0")
    lo, hi = window.timeline.visible_range()
    assert lo <= c.instance.start_ns and hi >= c.instance.end_ns
    assert hi - lo < 1.3 * max(c.instance.end_ns - c.instance.start_ns, 1) + 2
    line = window.summary.run_line
    assert line.isVisible() and line.text().startswith("Run: framework pytorch")
    assert "dataloader single_process (num_workers is 0)" in line.text()
    assert "_SingleProcessDataLoaderIter" in line.toolTip()


def test_search_finds_steps_and_highlights(qtbot, window, demo_path):
    s = open_and_wait(qtbot, window, demo_path)
    trace = s.trace
    expected = [i for i in range(len(trace.slices)) if "dataloader" in trace.name_of(i).lower()]
    assert expected
    qtbot.keyClick(window, Qt.Key.Key_F, Qt.KeyboardModifier.ControlModifier)
    bar = window.search_bar
    assert bar.isVisible()
    qtbot.keyClicks(bar.edit, "DataLoader")
    qtbot.waitUntil(lambda: len(s.matches) == len(expected), timeout=3000)
    assert s.matches.tolist() == expected
    assert bar.count.text() == f"{len(expected):,} matches"
    assert window.timeline.model.highlight is not None
    qtbot.keyClick(bar.edit, Qt.Key.Key_Return)
    assert s.selected_slice == expected[0]
    bar.next_btn.click()
    assert s.selected_slice == expected[1]
    assert bar.count.text() == f"2 of {len(expected):,}"
    bar.prev_btn.click()
    bar.prev_btn.click()
    assert s.selected_slice == expected[-1]  # wraps around
    lo, hi = window.timeline.visible_range()
    assert lo <= int(trace.slices.start[expected[-1]]) <= hi
    # regex over the whole trace, not only the visible window
    s.search(SearchQuery(r"^aten::(conv2d|add_)$", regex=True))
    names = [trace.name_of(i) for i in s.matches]
    assert names and set(names) <= {"aten::conv2d", "aten::add_"}
    assert int(trace.slices.start[s.matches[-1]]) > hi or int(trace.slices.start[s.matches[0]]) < lo
    s.search(SearchQuery("(", regex=True))
    assert "regular expression" in bar.count.text() and len(s.matches) == 0
    bar.close_bar()
    assert window.timeline.model.highlight is None


def test_corrupt_file_shows_error_and_window_stays_usable(qtbot, window, tmp_path, demo_path):
    bad = tmp_path / "broken <b>trace<i>.json"
    bad.write_text('{"traceEvents": [{"ph": "X", "name": "a", "ts": 1, ')
    with qtbot.waitSignal(window.session.load_failed, timeout=30000):
        window.open_path(bad)
    boxes = [b for b in window.findChildren(QMessageBox) if b.isVisible()]
    assert len(boxes) == 1
    box = boxes[0]
    assert str(bad) in box.text() and box.textFormat() == Qt.TextFormat.PlainText
    assert window.session.trace is None
    box.close()
    open_and_wait(qtbot, window, demo_path)
    assert window.panels["iterations"].model.rowCount() == EXPECTED_ITERATIONS


def test_cancel_stops_a_load(qtbot, window, fresh_copy):
    s = window.session
    s.load_mode = "process"
    changed = []
    s.trace_changed.connect(lambda: changed.append(1))
    window.open_path(fresh_copy)
    assert window.progress_widget.isVisibleTo(window)
    qtbot.waitUntil(lambda: bool(_loader_children()), timeout=10000)  # decoding in the child
    with qtbot.waitSignal(s.job_cancelled, timeout=5000):
        window.progress_widget.cancel_button.click()
    assert not s.busy and not window.progress_widget.isVisibleTo(window)
    assert s.worker.wait_idle(10)
    qtbot.wait(100)
    assert changed == [] and s.trace is None
    assert not _loader_children()


def _loader_children():
    import multiprocessing

    return [p for p in multiprocessing.active_children() if p.name == "sofa-gui-loader"]


def test_newer_open_replaces_older_one(qtbot, window, fresh_copy, demo_path, tmp_path):
    s = window.session
    s.load_mode = "process"
    paths = []
    s.trace_changed.connect(lambda: paths.append(s.path))
    window.open_path(fresh_copy)  # slow: decoded in a child
    open_and_wait(qtbot, window, demo_path)
    assert s.worker.wait_idle(30)
    qtbot.wait(100)
    assert paths == [str(demo_path)]
    assert s.path == str(demo_path)


def test_child_process_load_matches_thread_load(qtbot, window, fresh_copy, monkeypatch):
    # the child decodes and then analyzes (while this process indexes the timeline):
    # an analysis in this process would hit the refusing stub below
    from sofa_gui.core.analysis import iterations

    def refuse(*_a, **_k):
        raise AssertionError("analyzed in the GUI process, not in the loader child")

    monkeypatch.setattr(iterations, "detect_iterations", refuse)
    s = window.session
    s.load_mode = "process"
    open_and_wait(qtbot, window, fresh_copy)
    assert len(s.iterations) == EXPECTED_ITERATIONS
    assert s.findings[0].id == "input_pipeline_bound"
    assert window.panels["iterations"].model.rowCount() == EXPECTED_ITERATIONS


def test_details_show_slice_and_flow_partner_links(qtbot, window, demo_path):
    s = open_and_wait(qtbot, window, demo_path)
    t = s.trace
    launch = int(t.flows.src[0])
    s.select_slice(launch)
    d = window.panels["details"]
    assert d.name.text() == t.name_of(launch)
    assert d.name.textFormat() == Qt.TextFormat.PlainText
    assert "Flow partners" in d.partners.text()
    partner = int(t.flows.dst[0])
    d.partners.linkActivated.emit(f"slice:{partner}")
    assert s.selected_slice == partner and d.name.text() == t.name_of(partner)
    assert window.timeline.model.selected == partner
    lo, hi = window.timeline.visible_range()
    assert lo <= int(t.slices.start[partner]) <= hi
    with_args = int(np.flatnonzero(t.slices.args >= 0)[0])
    s.select_slice(with_args)
    assert d.args.topLevelItemCount() == len(t.args.get(int(t.slices.args[with_args])))


def test_drop_opens_the_file(qtbot, window, demo_path):
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(demo_path))])
    ev = QDropEvent(QPointF(100, 100), Qt.DropAction.CopyAction, mime,
                    Qt.MouseButton.NoButton, Qt.KeyboardModifier.NoModifier)
    with qtbot.waitSignal(window.session.analysis_finished, timeout=120000):
        window.dropEvent(ev)
    assert window.session.path == str(demo_path)


def test_recent_files_and_window_state_are_remembered(qtbot, window, settings, demo_path):
    from sofa_gui.qt.main_window import MainWindow

    open_and_wait(qtbot, window, demo_path)
    window.docks["findings"].hide()
    window.resize(780, 560)  # within the offscreen screen (800x600)
    assert (window.width(), window.height()) == (780, 560)  # no dock content forces more
    window.close()
    assert str(demo_path.resolve()) in settings.value("recent/paths")
    again = MainWindow(settings)
    qtbot.addWidget(again)
    assert again.recent_menu.actions()[0].text() == str(demo_path.resolve())
    assert (again.width(), again.height()) == (780, 560)
    assert again.docks["findings"].isHidden()
    again.session.shutdown()


class _SaveSpy(QObject):
    """Counts the save requests Qt delivers to a QSettings (its auto-sync)."""

    def __init__(self, target):
        super().__init__()
        self.saves = 0
        target.installEventFilter(self)

    def eventFilter(self, obj, event):  # noqa: N802
        if event.type() == QEvent.Type.UpdateRequest:
            self.saves += 1
        return False


def test_opening_a_trace_saves_no_settings_on_the_gui_thread(qtbot, window, settings,
                                                             demo_path):
    """QSettings saves with fdatasync: on the GUI thread, right after the loader wrote
    the trace cache, that stalled the first open ~200 ms (settings_writer.py)."""
    spy = _SaveSpy(settings)
    settings.setValue("probe", 1)  # the spy sees Qt's save request for a GUI-thread write
    qtbot.waitUntil(lambda: spy.saves == 1)
    open_and_wait(qtbot, window, demo_path)
    window.timeline.tracks_changed.emit()  # the track state is remembered as well
    qtbot.wait(50)
    assert spy.saves == 1  # none during the open: the recent list went through prefs
    assert window.prefs.flush()
    on_disk = Path(settings.fileName()).read_text()
    assert str(demo_path.resolve()) in on_disk and "[tracks]" in on_disk
    assert str(demo_path.resolve()) in settings.value("recent/paths")  # the window reads it


def test_an_open_writes_the_view_state_once(qtbot, window, demo_path):
    """One owner: the session, not also the timeline's model, writes the trace extent and
    the iterations into the view state (each was written, cleared and notified twice)."""
    from sofa_gui.view.state import Change

    view = window.session.view
    changes, iteration_writes = [], []
    view.subscribe(changes.append)
    real = view.set_iterations
    view.set_iterations = lambda *a: (iteration_writes.append(a), real(*a))
    open_and_wait(qtbot, window, demo_path)
    assert changes.count(Change.TRACE) == 1
    assert len(iteration_writes) == 1 and len(iteration_writes[0][0]) == EXPECTED_ITERATIONS
    assert len(window.timeline.model.iter_marks.warmup) == EXPECTED_ITERATIONS
    assert window.timeline.model.iter_labels == list(window.session.iterations.labels)


def test_standard_shortcuts_exist(window):
    keys = {a.text().replace("&", ""): [k.toString() for k in a.shortcuts()]
            for a in window.findChildren(type(window.cancel_action))}
    assert "Ctrl+O" in keys["Open File…"]
    assert "Ctrl+F" in keys["Find…"]
    assert "Ctrl+Q" in keys["Quit"]
    assert "F11" in keys["Full Screen"]


def test_trace_names_are_never_rich_text(qtbot, window):
    from sofa_gui.core.builder import TraceBuilder
    from sofa_gui.core.trace import Kind, LaneKind

    b = TraceBuilder("x", "test")
    lane = b.lane("l", "<i>lane</i>", LaneKind.CPU, "<b>group</b>")
    b.add_slices([0], [10], lane, ["<b>bold</b><img src=x>"], kind=[Kind.CPU_OP])
    trace = b.finish()
    s = window.session
    s._set_trace(trace)
    s.select_slice(0)
    d = window.panels["details"]
    assert d.name.text() == "<b>bold</b><img src=x>"
    assert d.fields["Lane"].text() == "<b>group</b> / <i>lane</i>"
    assert d.fields["Lane"].textFormat() == Qt.TextFormat.PlainText


def test_finding_cards_escape_trace_text(qtbot, window):
    from sofa_gui.core.analysis.results import Evidence, Finding, Fix
    from sofa_gui.qt.panels.findings import FindingCard

    f = Finding("x", "<script>t</script>", "high", 0.5, 2.0, "<b>s</b>",
                [Evidence("<img src=y> kernel", 0, 10)], [Fix("pytorch", "<a href=z>fix</a>")])
    card = FindingCard(f, 1, 0)
    qtbot.addWidget(card)
    assert card.title.text() == "<script>t</script>"
    assert card.title.textFormat() == Qt.TextFormat.PlainText
    assert "&lt;img src=y&gt;" in card.evidence.text()
    assert "&lt;a href=z&gt;" in card.fix_labels[0].text()


def test_record_dialog_opens_and_its_recording_is_loaded(qtbot, window, demo_path):
    from sofa_gui.qt.record_dialog import RecordDialog

    window.record_action.trigger()
    dlg = window.record_dialog
    assert isinstance(dlg, RecordDialog) and dlg.isVisible()
    s = window.session
    dlg.recording_finished.emit(str(demo_path))
    assert s.busy and s.pending_path == str(demo_path)
    qtbot.waitUntil(lambda: not s.busy, timeout=120000)
    assert s.path == str(demo_path)
    dlg.close()


def test_file_dialog_and_recent_menu_open(qtbot, window, demo_path, monkeypatch):
    from PySide6.QtWidgets import QFileDialog

    monkeypatch.setattr(QFileDialog, "getOpenFileName",
                        staticmethod(lambda *a, **k: (str(demo_path), "")))
    window.open_file_dialog()
    s = window.session
    qtbot.waitUntil(lambda: not s.busy, timeout=120000)
    assert s.path == str(demo_path)
    window.session.open(demo_path.parent / "nope.json")  # a failing open keeps the old trace
    qtbot.waitUntil(lambda: not s.busy, timeout=30000)
    assert s.path == str(demo_path) and s.last_error is not None
    for box in window.findChildren(QMessageBox):
        box.close()
    recent = [a for a in window.recent_menu.actions() if a.text() == str(demo_path.resolve())]
    assert len(recent) == 1
    recent[0].trigger()
    assert s.busy and s.pending_path == str(demo_path.resolve())
    qtbot.waitUntil(lambda: not s.busy, timeout=120000)


def test_load_report_dialog_lists_skipped_events(qtbot, window, demo_path):
    from sofa_gui.qt.panels.load_report import LoadReportDialog

    s = open_and_wait(qtbot, window, demo_path)
    rep = s.trace.meta.load_stats
    qtbot.mouseClick(window.load_stats_link, Qt.MouseButton.LeftButton)
    dlg = window.findChild(LoadReportDialog)
    assert dlg is not None and dlg.isVisible()
    assert dlg.table.rowCount() == len(rep.skipped)
    reasons = {dlg.table.item(r, 0).text() for r in range(dlg.table.rowCount())}
    assert reasons == set(rep.skipped)
    dlg.close()


def test_iteration_mode_can_be_switched(qtbot, window, demo_path):
    s = open_and_wait(qtbot, window, demo_path)
    assert s.iterations.method == "annotations"
    window.mode_actions["pattern"].trigger()
    qtbot.waitUntil(lambda: not s.busy, timeout=60000)
    assert s.analysis_done and s.iterations.method == "pattern"
    assert abs(len(s.iterations) - EXPECTED_ITERATIONS) <= 1
    assert window.panels["iterations"].model.rowCount() == len(s.iterations)


def test_run_from_args_opens_the_path_and_runs_the_loop(qtbot, qapp, demo_path, tmp_path,
                                                        monkeypatch):
    import argparse

    from sofa_gui.app.background_load import stop_spares
    from sofa_gui.qt import app as app_mod
    from sofa_gui.qt.main_window import MainWindow

    monkeypatch.setenv("SOFA_GUI_SETTINGS", str(tmp_path / "s.ini"))
    seen = {}

    def fake_exec(*_a):
        win = next(w for w in qapp.topLevelWidgets()
                   if isinstance(w, MainWindow) and w.isVisible())
        qtbot.waitUntil(lambda: win.session.analysis_done, timeout=120000)
        seen["path"], seen["size"] = win.session.path, (win.width(), win.height())
        win.close()
        win.deleteLater()
        return 0

    monkeypatch.setattr(type(qapp), "exec", fake_exec)
    args = argparse.Namespace(command="view", path=str(demo_path), screenshot=None,
                              iteration=None, size="780x560", iterations="auto")
    try:
        assert app_mod.run_from_args(args) == 0
    finally:
        stop_spares()  # run_window started a spare loader for the next open
    assert seen == {"path": str(demo_path), "size": (780, 560)}


def test_sorting_the_iterations_table_keeps_rows_mapped(qtbot, window, demo_path):
    s = open_and_wait(qtbot, window, demo_path)
    panel = window.panels["iterations"]
    panel.table.sortByColumn(COLUMNS.index("Duration"), Qt.SortOrder.DescendingOrder)
    longest = int(np.argmax(s.iterations.durations))
    assert panel.model.iteration_at(0) == longest
    assert panel.model.data(panel.model.index(0, 0)) == str(longest)
    rect = panel.table.visualRect(panel.model.index(0, 1))
    qtbot.mouseClick(panel.table.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    assert s.selected_iteration == longest
    s.select_iteration(0, zoom=False)  # from elsewhere (e.g. the timeline)
    assert panel.table.currentIndex().row() == panel.row_of(0)


def test_broad_search_highlights_only_the_visible_matches(qtbot, window, demo_path, monkeypatch):
    from sofa_gui.qt.panels import search_bar

    monkeypatch.setattr(search_bar, "HIGHLIGHT_LIMIT", 200)
    s = open_and_wait(qtbot, window, demo_path)
    s.search(SearchQuery("aten::"))
    hl = window.highlighter
    assert len(s.matches) > 200
    assert hl.shown == 0 and window.timeline.model.highlight is None  # zoomed out: too many
    assert "zoom in" in window.search_bar.count.text()
    t = s.trace
    mid = int(s.matches[len(s.matches) // 2])
    a = int(t.slices.start[mid])
    s.zoom_to(a - 200_000, a + 200_000)
    qtbot.waitUntil(lambda: hl.shown > 0, timeout=3000)
    lo, hi = window.timeline.visible_range()
    visible = [i for i in s.matches if t.slices.start[i] < hi and t.slices.end[i] > lo]
    assert hl.shown == len(visible) and window.timeline.model.highlight is not None


def test_one_dock_table_builds_docks_view_menu_and_reset_layout(qtbot, settings, monkeypatch):
    from PySide6.QtWidgets import QLabel

    from sofa_gui.qt import main_window
    from sofa_gui.qt.docks import DockSpec, dock_specs

    assert [d.key for d in dock_specs()] == ["findings", "details", "iterations", "breakdown",
                                            "statistics", "tfdata", "ranks", "markers",
                                            "compare", "query", "calltree"]
    extra = DockSpec("extra", "Extra panel", "bottom", 30, 200, lambda s: QLabel("extra"))
    monkeypatch.setattr(main_window, "dock_specs", lambda: [*dock_specs(), extra])
    win = main_window.MainWindow(settings, restore_state=False)
    qtbot.addWidget(win)
    assert win.docks["extra"].objectName() == "extraDock"
    assert win.panels["extra"].text() == "extra"
    view = next(a.menu() for a in win.menuBar().actions() if a.text() == "&View")
    titles = [a.text() for a in view.actions()]
    for spec in [*dock_specs(), extra]:
        assert spec.title in titles
    win.show()
    win.docks["extra"].hide()
    win.docks["details"].hide()
    win.reset_layout()
    assert not win.docks["extra"].isHidden() and not win.docks["details"].isHidden()
    win.session.shutdown()


def test_cached_reopen_shows_every_panel_without_analysing(qtbot, window, fresh_copy,
                                                           monkeypatch):
    s = open_and_wait(qtbot, window, fresh_copy)
    first = (s.iterations.starts.tolist(), [f.id for f in s.findings],
             window.panels["iterations"].model.rowCount(), len(window.panels["findings"].cards))
    from sofa_gui.core.analysis import iterations

    def refuse(*_a, **_k):
        raise AssertionError("analyzed again although the results are cached")

    monkeypatch.setattr(iterations, "detect_iterations", refuse)
    s = open_and_wait(qtbot, window, fresh_copy)
    again = (s.iterations.starts.tolist(), [f.id for f in s.findings],
             window.panels["iterations"].model.rowCount(), len(window.panels["findings"].cards))
    assert again == first
    assert s.breakdown is not None and window.panels["breakdown"].isEnabled()


def test_details_show_args_read_on_demand_from_a_plain_file(qtbot, window, demo_path, tmp_path,
                                                             monkeypatch):
    """Without a usable cache a plain JSON file's args stay in the file
    (importers/source_args.py): clicking a slice reads and shows all of them."""
    import gzip

    from sofa_gui.core import store
    from sofa_gui.core.trace import ArgSegments

    monkeypatch.setenv("SOFA_GUI_LAZY_ARGS_MIN_BYTES", "0")
    monkeypatch.setattr(store, "try_entry_dir", lambda path: None)  # no cache
    plain = tmp_path / "plain.pt.trace.json"
    plain.write_bytes(gzip.decompress(demo_path.read_bytes()))
    window.session.load_mode = "thread"
    s = open_and_wait(qtbot, window, plain)
    t = s.trace
    assert isinstance(t.args.backing, ArgSegments)
    kernel = int(np.flatnonzero(t.slices.kind == int(Kind.KERNEL))[0])  # grid, stream, ...
    s.select_slice(kernel)
    d = window.panels["details"]
    args = t.args.get(int(t.slices.args[kernel]))
    assert "stream" in args and "grid" in args
    shown = {d.args.topLevelItem(k).text(0): d.args.topLevelItem(k).text(1)
             for k in range(d.args.topLevelItemCount())}
    assert set(shown) == set(args) and shown["stream"] == str(args["stream"])
