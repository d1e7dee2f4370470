"""``sofa-gui report`` and ``sofa-gui diff`` end to end on the real ResNet-50 pair."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET

import pytest
from tracedata import shared_trace

from sofa_gui.cli import main

NW0 = "kineto-tb-plugin/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz"
NW4 = "kineto-tb-plugin/resnet50_num_workers_4/worker0.1623212756351.pt.trace.json.gz"


def test_report_html(tmp_path, capsys):
    out = tmp_path / "sub" / "report.html"
    assert main(["report", str(shared_trace(NW0)), "-o", str(out)]) == 0
    assert f"wrote {out}" in capsys.readouterr().out
    html = out.read_text(encoding="utf-8")
    assert html.startswith("<!DOCTYPE html>")
    assert "input_pipeline_bound" in html and "num_workers" in html
    svgs = re.findall(r"<svg.*?</svg>", html, re.S)
    assert len(svgs) == 3
    for svg in svgs:
        ET.fromstring(svg)
    assert "&lt;float" in html  # cudnn template kernel names are escaped
    assert [p.name for p in out.parent.iterdir()] == ["report.html"]  # no temp file left


def test_report_markdown(tmp_path):
    out = tmp_path / "report.md"
    assert main(["report", str(shared_trace(NW0)), "-o", str(out)]) == 0
    md = out.read_text(encoding="utf-8")
    assert "## Findings" in md and "`input_pipeline_bound`" in md
    assert md.count("\n| ") >= 6  # the per-iteration table


def test_report_bad_suffix_is_a_usage_error(tmp_path, capsys):
    out = tmp_path / "report.pdf"
    assert main(["report", str(shared_trace(NW0)), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert "use .html or .md" in err and "Traceback" not in err
    assert not out.exists()


def test_report_unwritable_target(tmp_path, capsys):
    target = tmp_path / "file"
    target.write_text("x")
    assert main(["report", str(shared_trace(NW0)), "-o", str(target / "r.html")]) == 2
    assert "cannot write" in capsys.readouterr().err


def test_diff_json_shows_gain_and_resolved_input_bottleneck(capsys):
    assert main(["diff", str(shared_trace(NW0)), str(shared_trace(NW4)), "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["speedup"] == pytest.approx(1.396, abs=0.01)
    assert "input_pipeline_bound" in {f["id"] for f in r["findings"]["resolved"]}
    assert r["before"]["median_iteration_us"] > r["after"]["median_iteration_us"]


def test_diff_text(capsys):
    assert main(["diff", str(shared_trace(NW0)), str(shared_trace(NW4))]) == 0
    out = capsys.readouterr().out
    assert "1.39x faster" in out
    assert "Resolved: input_pipeline_bound" in out
    assert "Largest changes per iteration:" in out


def test_analyze_json_fills_item_breakdowns(capsys):
    assert main(["analyze", str(shared_trace(NW0)), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    item = doc["iterations"]["items"][0]
    dev = {k: v for k, v in item["breakdown"].items() if not k.startswith("host_")}
    win = item["device_window"]  # the device lags its host here: device-clock windows
    assert win["clock"] == doc["breakdown"]["device_window_clock"] == "device"
    assert abs(sum(dev.values()) - (win["end_us"] - win["start_us"])) <= 1.0
    host = {k: v for k, v in item["breakdown"].items() if k.startswith("host_")}
    assert abs(sum(host.values()) - item["duration_us"]) <= 1.0
    assert item["breakdown"]["host_data_loading"] > 50_000
    assert doc["findings"][0]["id"] == "input_pipeline_bound"
    assert doc["breakdown"]["devices"][0]["copies"]["h2d"]["pageable_bytes"] > 0


RANK_KEYS = {"ranks", "iteration_us", "median_iteration_us", "busy_us", "communication_us",
             "communication_total_us", "communication_overlap_us", "work_us", "overlap_fraction",
             "straggler", "straggler_lag_us", "slowest_iteration_rank"}


def test_analyze_rank_folder_json_and_text_show_ranks(data_dir, capsys):
    folder = str(data_dir / "ranks")
    assert main(["analyze", folder, "--json"]) == 0
    r = json.loads(capsys.readouterr().out)["breakdown"]["ranks"]
    assert set(r) == RANK_KEYS and r["ranks"] == [0, 1]
    for rank in ("0", "1"):
        assert len(r["iteration_us"][rank]) == 2
        tot, ov = r["communication_total_us"][rank], r["communication_overlap_us"][rank]
        exposed = r["communication_us"][rank]
        assert all(abs(t - o - e) <= 1 for t, o, e in zip(tot, ov, exposed))
        assert r["overlap_fraction"][rank] == pytest.approx(sum(ov) / sum(tot), abs=1e-4)
    assert r["straggler"] == [1, 1]
    assert main(["analyze", folder]) == 0
    out = capsys.readouterr().out
    assert "rank 0: iterations 607 ms, 623 ms" in out
    assert "rank 1: iterations 608 ms, 631 ms" in out
    assert re.search(r"rank 0: .*communication 198 ms/iteration, 15% overlapped", out)
    assert "straggler (most busy rank) per iteration: 0: rank 1" in out
