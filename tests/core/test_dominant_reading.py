"""Which breakdown categories the verdict reads as another bound (the Iterations table's
Dominant column names that bound): only where the verdict moved most of the category's
bound, and only on the side the verdict read."""

from __future__ import annotations

from sofa_gui.core.analysis.shares import read_as
from sofa_gui.core.analysis.verdict import Verdict

CATS = ("data_loading", "forward", "backward", "runtime")


def _verdict(moved: float, kept: float) -> Verdict:
    """Host overhead took ``moved`` of the profiled time from compute, which kept ``kept``."""
    return Verdict("host_overhead", moved, "", {"compute": kept, "host_overhead": moved},
                   [("op_overhead_bound", "host_overhead", moved, ("compute",))],
                   ("python", "host"))


def test_categories_of_a_bound_the_verdict_mostly_moved_read_as_where_it_went():
    assert read_as(_verdict(0.6, 0.3), "python", "host", CATS) == {
        "forward": "Host overhead", "backward": "Host overhead"}


def test_a_bound_that_keeps_most_of_its_time_keeps_its_categories():
    assert read_as(_verdict(0.2, 0.5), "python", "host", CATS) == {}


def test_another_side_or_no_verdict_reads_nothing():
    assert read_as(_verdict(0.6, 0.3), "GPU 0", "device", CATS) == {}
    assert read_as(None, "python", "host", CATS) == {}


def test_the_markdown_report_names_each_iteration_as_the_app_does():
    """The report's per-iteration "dominant" column and the app's Dominant column say the
    same for the same iteration: on a tiny-op loop both read Backward as host overhead."""
    from tracedata import corpus_capture

    from sofa_gui.core.analysis.pipeline import analyze
    from sofa_gui.core.analysis.report import markdown_report
    from sofa_gui.core.importers import load_trace
    from sofa_gui.view.breakdown import dominant_labels

    trace = load_trace(corpus_capture("pt_train_tiny_ops", 0))
    a = analyze(trace)
    n = len(a.breakdown)
    app, _tips = dominant_labels(a.breakdown, n, a.verdict, a.findings)
    text = markdown_report(trace, a)
    rows = text.split("## Iterations", 1)[1].strip().splitlines()[2:2 + n]
    report = [r.split("|")[3].strip() for r in rows]
    assert report == app and "Host overhead" in app
