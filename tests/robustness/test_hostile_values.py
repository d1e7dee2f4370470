"""Values out of range or of the wrong type are checked where they enter: the file still
loads, the odd value is kept as text or ignored, and a note says so."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from hostile import ROOT, run_cli

from sofa_gui.core.importers import load_trace


def _events(n=30):
    return [{"ph": "X", "name": "aten::mm", "cat": "cpu_op", "ts": i * 10.0, "dur": 5.0,
             "pid": 1, "tid": 1, "args": {"a": "b"}} for i in range(n)]


def test_memory_event_with_a_huge_device_id_keeps_the_file(tmp_path):
    mem = {"ph": "i", "s": "t", "name": "[memory]", "ts": 3.0, "pid": 1, "tid": 1,
           "args": {"Device Id": 2 ** 40, "Device Type": 1, "Bytes": 1024, "Addr": 1,
                    "Total Allocated": 1024, "Total Reserved": 2048}}
    path = tmp_path / "memory.json"
    path.write_text(json.dumps({"traceEvents": [*_events(), mem]}))
    trace = load_trace(path, use_cache=False)
    assert trace.events == 31
    names = trace.lanes.name
    assert f"GPU {2 ** 40} memory allocated" in names
    assert any("Device Id 1099511627776 is out of range" in n for n in trace.meta.load_stats.notes)


BASE = json.dumps({"schemaVersion": 1, "deviceProperties": [{"name": "GPU"}],
                   "traceEvents": _events(), "traceName": "x"})


@pytest.mark.parametrize("where, old", [
    ("event name", '"aten::mm"'), ("args value", '"b"'), ("args key", '{"a"'),
    ("header value", '"GPU"'), ("header key", '"schemaVersion"'),
    ("value after the events", '"x"'),
])
def test_lone_surrogate_escape_is_replaced_not_rejected(tmp_path, where, old):
    new = old.replace(old.strip('{"'), "\\ud83d")
    path = tmp_path / "surrogate.json"
    path.write_text(BASE.replace(old, new, 1))
    assert "\\ud83d" in path.read_text()
    trace = load_trace(path, use_cache=False)
    assert trace.events == 30
    if where == "event name":
        assert any("\ufffd" in trace.name_of(i) for i in range(trace.events))
    proc = run_cli(["analyze", "--no-cache", str(path)])
    assert proc.returncode == 0, proc.stderr


DATA = ROOT / "tests" / "data"
WRONG = ['"many"', '"nan"', "1e999", "NaN", "-3", "2.5", "true"]


def _strict(text: str):
    def refuse(name):
        raise AssertionError(f"{name} in --json output")
    return json.loads(text, parse_constant=refuse)


def _analyze_both(path):
    """analyze text and --json: exit 0, no traceback; returns (text, parsed json)."""
    text = run_cli(["analyze", "--no-cache", str(path)])
    doc = run_cli(["analyze", "--json", "--no-cache", str(path)])
    for proc in (text, doc):
        assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-1500:]
    return text.stdout, _strict(doc.stdout)


@pytest.mark.parametrize("value", WRONG)
def test_trace_metadata_of_the_wrong_type_is_ignored_and_noted(tmp_path, value):
    keys = ("cpu_cores", "cpu_busy_other_cores", "cpu_core_interference",
            "cpu_batch_handover_us")
    head = ", ".join(f'"{k}": {value}' for k in keys)
    path = tmp_path / "meta.json"
    path.write_text("{" + head + ', "traceEvents": ' + json.dumps(_events()) + "}")
    text, doc = _analyze_both(path)
    if value not in ("2.5",):  # 2.5 is a fine number of busy cores / µs, not a core count
        assert "cpu_cores" in doc["run"] and doc["run"]["cpu_cores"]["value"] is None
    assert "trace metadata: cpu_cores" in text and "ignored" in text


def _copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


@pytest.mark.parametrize("value", ['"two"', "1e999", "0"])
def test_manifest_core_counts_of_the_wrong_type(tmp_path, value):
    rec = _copy(DATA / "recording-torch-pyspy", tmp_path / "rec")
    m = (rec / "manifest.json").read_text()
    m = m.replace('"logical_cores": 2', f'"logical_cores": {value}')
    (rec / "manifest.json").write_text(m.replace('"duration_s": ', f'"duration_s": {value}, "x": '))
    text, doc = _analyze_both(rec)
    assert doc["run"]["cpu_cores"]["value"] is None
    assert "manifest.json host: logical_cores" in text


@pytest.mark.parametrize("line", ["vcores lots", "vcores nan", "cores many"])
def test_sofa_misc_of_the_wrong_type(tmp_path, line):
    logdir = _copy(DATA / "sofa-demo-sofalog", tmp_path / "sofa")
    key = line.split()[0]
    lines = [ln for ln in (logdir / "misc.txt").read_text().splitlines()
             if ln.split()[0] != key]
    (logdir / "misc.txt").write_text("\n".join([*lines, line]) + "\n")
    text, _doc = _analyze_both(logdir)
    assert f"misc.txt: {key}" in text and "ignored" in text


def test_screenshot_of_a_recording_with_wrong_metadata(tmp_path):
    rec = _copy(DATA / "recording-torch-pyspy", tmp_path / "rec")
    m = (rec / "manifest.json").read_text().replace('"logical_cores": 2', '"logical_cores": "two"')
    (rec / "manifest.json").write_text(m)
    out = tmp_path / "shot.png"
    proc = run_cli(["view", str(rec), "--screenshot", str(out), "--size", "800x500"],
                   env={"QT_QPA_PLATFORM": "offscreen"}, timeout=180)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-1500:]
    assert out.stat().st_size > 1000
