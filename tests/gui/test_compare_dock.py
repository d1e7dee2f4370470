"""File ▸ Compare with… on the real ResNet pair (num_workers 0 -> 4): the diff in the app."""

from __future__ import annotations

import pyqtgraph as pg
from tracedata import shared_trace

from sofa_gui.cli import main
from sofa_gui.core.samples import demo_trace_path

NW4 = "kineto-tb-plugin/resnet50_num_workers_4/worker0.1623212756351.pt.trace.json.gz"


def test_compare_shows_what_diff_shows_with_both_distributions(qtbot, open_window, capsys):
    other = shared_trace(NW4)
    w = open_window(demo_trace_path(), (1280, 800))
    panel = w.panels["compare"]
    with qtbot.waitSignal(panel.compared, timeout=180_000):
        w.compare_with(other)
    assert not w.docks["compare"].visibleRegion().isEmpty()
    assert main(["diff", str(demo_trace_path()), str(other), "--json"]) == 0
    import json

    want = json.loads(capsys.readouterr().out)
    d = panel.result
    assert d["speedup"] == want["speedup"] == 1.3944  # median iteration #0 vs #3
    assert "1.39x faster" in panel.summary.text()
    verdict = panel.verdict.toPlainText()  # what diff prints under the median line
    assert "Mean iteration: 175 ms -> 140 ms  (1.25x faster)" in verdict
    assert "after: 2 slow iteration(s) the median hides: #0 182 ms (1.44x)" in verdict
    assert "Predicted by BEFORE's input_pipeline_bound for the fix applied (loader workers" \
        in verdict and "1.58x; measured 1.25x (steady-state mean iteration), +26%" in verdict
    assert "repeat the pair and compare median runs" in verdict
    cats = [panel.categories.item(r, 0).text() for r in range(panel.categories.rowCount())]
    assert "Idle: waiting for input" in cats and "Compute kernels" in cats
    found = {(panel.findings.item(r, 0).text(), panel.findings.item(r, 1).text())
             for r in range(panel.findings.rowCount())}
    assert ("input pipeline bound", "resolved") in found
    # the estimate checked is that of the fix the other run applied (num_workers 0 -> 4)
    row = next(r for r in range(panel.findings.rowCount())
               if panel.findings.item(r, 0).text() == "input pipeline bound")
    assert panel.findings.item(row, 3).text() == "1.58x (loader workers)"
    assert panel.changes.item(0, 1).text() == want["top_changes"][0]["name"]
    times = panel.iteration_times()
    assert [len(t) for t in times] == [6, 6]
    dots = [i for i in panel.chart.getPlotItem().items if isinstance(i, pg.ScatterPlotItem)]
    assert sorted(len(i.data) for i in dots) == [6, 6]
    w.session.trace_changed.emit()  # another trace opened: the verdict goes with the rest
    assert panel.verdict.toPlainText() == "" and panel.findings.rowCount() == 0
    panel.shutdown()


def test_compare_before_the_analysis_says_so(open_window):
    w = open_window(None, (1280, 800))
    w.compare_with(demo_trace_path())
    assert "Open a trace" in w.panels["compare"].summary.text()
