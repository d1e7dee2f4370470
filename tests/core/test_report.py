"""HTML/Markdown reports: content, escaping, valid SVG, atomic writes."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from sofa_gui.core.analysis import report as report_mod
from sofa_gui.core.analysis.breakdown import compute_breakdown
from sofa_gui.core.analysis.findings import find_bottlenecks
from sofa_gui.core.analysis.palette import CATEGORY_COLORS
from sofa_gui.core.analysis.pipeline import Analysis
from sofa_gui.core.analysis.report import write_report
from sofa_gui.core.analysis.results import Iterations
from sofa_gui.core.builder import TraceBuilder
from sofa_gui.core.trace import Kind, LaneKind

US = 1000
EVIL = '<script>alert("x")</script>|*_```&amp;'


def _analysis(n=5, with_iterations=True):
    b = TraceBuilder("/data/" + EVIL + ".json", "test")
    b.meta.source = "/data/" + EVIL + ".json"
    cpu = b.lane(("cpu",), "main " + EVIL, LaneKind.CPU, "proc", pid=1, tid=1)
    gpu = b.lane(("gpu",), "stream 7", LaneKind.GPU, "GPU 0", device=0, stream=7)
    for i in range(n):
        t = i * 1000 * US
        b.add_slices([t], [400 * US], cpu, ["DataLoader.__next__ " + EVIL], kind=Kind.CPU_OP)
        b.add_slices([t + 420 * US], [500 * US], gpu, ["kernel " + EVIL], kind=Kind.KERNEL,
                     device=0)
    trace = b.finish()
    starts = np.arange(n, dtype=np.int64) * 1000 * US
    iters = (Iterations("annotations", "test", starts, starts + 1000 * US, 1.0)
             if with_iterations else Iterations.none("test", "too short"))
    bd = compute_breakdown(trace, iters)
    return trace, Analysis(iters, bd, find_bottlenecks(trace, iters, bd))


def test_html_is_self_contained_escaped_and_has_charts(tmp_path):
    trace, analysis = _analysis()
    out = write_report(trace, analysis, tmp_path / "r.html")
    html = out.read_text(encoding="utf-8")
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert "http://" not in html.replace('xmlns="http://www.w3.org/2000/svg"', "")
    svgs = re.findall(r"<svg.*?</svg>", html, re.S)
    assert len(svgs) == 3  # iteration times, device and host breakdown
    for svg in svgs:
        ET.fromstring(svg)  # well-formed XML: every trace string was escaped
    assert "input_pipeline_bound" in html and "Fixes" in html and "pytorch" in html
    assert CATEGORY_COLORS["idle_input"] in svgs[1]  # the stacked chart shows the idle cause
    assert html.count("<rect") > 5 * 3


def test_markdown_report(tmp_path):
    trace, analysis = _analysis()
    md = write_report(trace, analysis, tmp_path / "r.md").read_text(encoding="utf-8")
    assert md.startswith("# sofa-gui report")
    assert "## Findings" in md and "`input_pipeline_bound`" in md
    assert "| iteration | duration | dominant |" in md
    fence = re.search(r"^(`{3,})$", md, re.M).group(1)
    assert len(fence) == 4  # longer than the backtick run in the names
    outside = re.sub(rf"^{fence}$.*?^{fence}$", "", md, flags=re.S | re.M)
    assert "<script>" not in outside and r"\|" in outside  # no HTML, pipes cannot break a table


def test_report_without_iterations(tmp_path):
    trace, analysis = _analysis(with_iterations=False)
    html = write_report(trace, analysis, tmp_path / "r.html").read_text(encoding="utf-8")
    assert "whole trace" in html and "too short" in html
    assert len(re.findall(r"<svg", html)) == 2  # no iteration-time chart


def test_unknown_suffix_is_refused_without_writing(tmp_path):
    trace, analysis = _analysis()
    with pytest.raises(ValueError, match="use .html or .md"):
        write_report(trace, analysis, tmp_path / "r.pdf")
    assert list(tmp_path.iterdir()) == []


def test_failed_write_leaves_previous_report_and_no_temp(tmp_path, monkeypatch):
    trace, analysis = _analysis()
    target = tmp_path / "r.html"
    target.write_text("old report")

    def boom(*a, **k):
        raise OSError("disk full")

    monkeypatch.setattr(report_mod.os, "replace", boom)
    with pytest.raises(OSError):
        write_report(trace, analysis, target)
    assert target.read_text() == "old report"
    assert [p.name for p in tmp_path.iterdir()] == ["r.html"]


def test_every_category_has_its_own_color():
    from sofa_gui.core.analysis.device_side import DEVICE_CATEGORIES
    from sofa_gui.core.analysis.host_side import HOST_CATEGORIES

    assert set(DEVICE_CATEGORIES) | set(HOST_CATEGORIES) <= set(CATEGORY_COLORS)
    dev = [CATEGORY_COLORS[c] for c in DEVICE_CATEGORIES]
    assert len(set(dev)) == len(dev)


def test_report_file_mode_follows_umask(tmp_path):
    import os

    trace, analysis = _analysis()
    old = os.umask(0o022)
    try:
        out = write_report(trace, analysis, tmp_path / "r.md")
    finally:
        os.umask(old)
    assert out.stat().st_mode & 0o777 == 0o644


@pytest.mark.parametrize("case", ["empty", "counters only", "device only", "zero durations"])
def test_degenerate_traces_give_valid_outputs(case, tmp_path):
    import json

    from sofa_gui.core.analysis.diff import diff_analyses, diff_text
    from sofa_gui.core.analysis.pipeline import analyze
    from sofa_gui.core.analysis.text import analysis_text

    b = TraceBuilder(case, "test")
    if case == "counters only":
        b.add_counter("GPU util", "%", b.lane(("c",), "util", LaneKind.COUNTER), [0, 9], [1, 2])
    elif case == "device only":
        gpu = b.lane(("g",), "s", LaneKind.GPU, device=0)
        b.add_slices([0, 100], [50, 50], gpu, ["k", "k"], kind=Kind.KERNEL, device=0)
    elif case == "zero durations":
        b.add_slices([5, 5], [0, 0], b.lane(("c",), "main", LaneKind.CPU), ["a", "b"],
                     kind=Kind.CPU_OP)
    trace = b.finish()
    analysis = analyze(trace)
    json.dumps(analysis.to_dict(), allow_nan=False)
    assert analysis_text(trace, analysis)
    write_report(trace, analysis, tmp_path / "r.html")
    write_report(trace, analysis, tmp_path / "r.md")
    d = diff_analyses((trace, analysis), (trace, analysis))
    json.dumps(d, allow_nan=False)
    assert diff_text(d)
    for f in analysis.findings:
        assert f.evidence


def _real_report(folder, tmp_path, name):
    from sofa_gui.core.analysis.pipeline import analyze
    from sofa_gui.core.importers import load_trace

    trace = load_trace(folder)
    return write_report(trace, analyze(trace), tmp_path / name).read_text(encoding="utf-8")


def test_html_report_of_two_ranks_has_a_rank_table(data_dir, tmp_path):
    html = _real_report(data_dir / "ranks", tmp_path, "ranks.html")
    i = html.index("<h2>Ranks</h2>")
    table = html[i:html.index("</table>", i)]
    rows = re.findall(r"<tr><td>(\d+)</td>(.*?)</tr>", table)
    assert [r for r, _ in rows] == ["0", "1"]
    assert "607 ms" in rows[0][1] and "631 ms" in rows[1][1]
    assert "15%" in rows[0][1] and "20%" in rows[1][1]  # communication hidden behind compute
    assert "<th>straggler</th><td class='num'>1 (+15.6 ms)</td>" in table
    # per-device details say which device they belong to
    assert "<li>rank 0 / GPU 0: communication per iteration: 198 ms" in html
    assert not re.search(r"<li>communication\s+\d", html)  # no stray table rows
    for svg in re.findall(r"<svg.*?</svg>", html, re.S):
        ET.fromstring(svg)


def test_html_report_of_a_recording_shows_counter_findings(data_dir, tmp_path):
    html = _real_report(data_dir / "recording-torch-pyspy", tmp_path, "rec.html")
    assert "<code>cpu_contention</code>" in html and "taskset" in html
    assert "<li>Counter CPU0 util %: mean 100 %" in html
    assert "py-spy MainThread" not in html  # the Kineto thread is the main thread
