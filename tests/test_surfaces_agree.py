"""Every headless surface prints the same numbers for one run: ``analyze`` text and
JSON, the HTML and Markdown report, ``diff`` and ``stats`` -- each step's duration (its
ProfilerStep annotation in the file), the median iteration, the event count and the
category labels.  The app's surfaces are checked in ``gui/test_surfaces_agree_app.py``."""

from __future__ import annotations

import contextlib
import io
import json
import re

import pytest
from surfaces import TRACES, file_steps, median_of, trace_path

from sofa_gui.cli import main
from sofa_gui.core.analysis.palette import CATEGORY_LABELS
from sofa_gui.core.units import fmt_ns, fmt_ns_exact

IDS = [c for c in CATEGORY_LABELS if "_" in c]  # ids that read unlike their labels


def _out(capsys, *argv) -> str:
    assert main(list(argv)) == 0
    return capsys.readouterr().out


@pytest.fixture(scope="module", params=list(TRACES))
def run(request):
    """(key, path, analyze --json document, analyze text) of one trace."""
    path = str(trace_path(request.param))
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(["analyze", path, "--json"]) == 0
    doc = json.loads(buf.getvalue())
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(["analyze", path]) == 0
    return request.param, path, doc, buf.getvalue()


def test_every_step_is_its_annotation_in_json_and_text(run):
    key, _path, doc, text = run
    steps = file_steps(key)
    items = doc["iterations"]["items"]
    assert [it["label"] for it in items] == [n for n, _d in steps]
    assert [round(it["duration_us"] * 1000) for it in items] == [d for _n, d in steps]
    for _name, d in steps:
        assert f"duration {fmt_ns_exact(d):>12s}" in text


def test_one_median_iteration_in_json_text_report_and_diff(run, capsys, tmp_path):
    key, path, doc, text = run
    k, med = median_of([d for _n, d in file_steps(key)])
    it = doc["iterations"]
    assert it["median_iteration"] == k and round(it["median_us"] * 1000) == med
    assert doc["breakdown"]["median_iteration"] == k
    assert f"median iteration #{k}: {fmt_ns_exact(med)}" in text
    assert f"Breakdown: {len(it['items'])} iterations, median iteration #{k}: {fmt_ns(med)}" \
        in text
    for suffix in ("md", "html"):
        out = tmp_path / f"r.{suffix}"
        _out(capsys, "report", path, "-o", str(out))
        body = out.read_text()
        assert f"#{k}: {fmt_ns(med)}" in body, suffix
    diff = _out(capsys, "diff", path, path)
    assert f"Median iteration: {fmt_ns(med)} (#{k}) -> {fmt_ns(med)} (#{k})" in diff
    d = json.loads(_out(capsys, "diff", path, path, "--json"))
    assert d["before"]["median_iteration"] == k
    assert round(d["before"]["median_iteration_us"] * 1000) == med


def test_one_event_count_in_json_text_and_report(run, capsys, tmp_path):
    _key, path, doc, text = run
    n = doc["trace"]["events"]
    assert n == doc["trace"]["load_report"]["loaded"] > 0
    assert f"Events:   {n:,} loaded of " in text
    out = tmp_path / "r.md"
    _out(capsys, "report", path, "-o", str(out))
    assert f"| Events | {n:,} |" in out.read_text()


def test_people_read_category_labels_and_json_keeps_ids(run, capsys, tmp_path):
    _key, path, doc, text = run
    bd = doc["breakdown"]
    assert bd["category_labels"]["idle_input"] == "Idle: waiting for input"
    shown = [c for c in bd["device_categories"] if bd["devices"]
             and bd["devices"][0]["total_us"].get(c)]
    assert shown and set(shown) <= set(doc["iterations"]["items"][0]["breakdown"])
    out = tmp_path / "r.md"
    _out(capsys, "report", path, "-o", str(out))
    html = tmp_path / "r.html"
    _out(capsys, "report", path, "-o", str(html))
    diff = _out(capsys, "diff", path, path)
    for surface in (text, out.read_text(), html.read_text(), diff):
        for c in shown:
            assert bd["category_labels"][c] in surface
        words = set(re.findall(r"[a-z0-9_]+", surface))
        assert not words & set(IDS), sorted(words & set(IDS))


def test_stats_scopes_count_the_same_slices(run, capsys):
    """``--iteration k``, ``--range abs:...`` over its window and ``--range`` from the trace
    start over the same window count the same kernels."""
    key, path, doc, _text = run
    item = doc["iterations"]["items"][1]
    t0 = doc["trace"]["start_us"]
    by_it = json.loads(_out(capsys, "stats", path, "--iteration", "1", "--top", "0", "--json"))
    name, dur = file_steps(key)[1]
    assert by_it["scope"] == f"iteration 1 ({name}), {fmt_ns(dur)}"
    a, b = item["start_us"], item["end_us"]
    by_abs = json.loads(_out(capsys, "stats", path, "--range", f"abs:{a}:{b}", "--top", "0",
                             "--json"))
    rel = f"{round((a - t0) * 1000)}ns:{round((b - t0) * 1000)}ns"
    by_rel = json.loads(_out(capsys, "stats", path, "--range", rel, "--top", "0", "--json"))
    counts = [sum(r["count"] for r in t["rows"]) for t in (by_it, by_abs, by_rel)]
    assert counts[0] == counts[1] == counts[2] > 0
