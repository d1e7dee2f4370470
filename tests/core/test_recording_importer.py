"""Recording folders: the real one in tests/data, plus hand-made edge cases."""

from __future__ import annotations

import importlib.util
import json
import shutil

import numpy as np
import pytest

from sofa_gui.core.errors import TraceFormatError
from sofa_gui.core.importers import load_trace, pick_importer
from sofa_gui.core.importers.recording import contract as schema
from sofa_gui.core.importers.recording.folder import IMPORTER, pyspy_slices
from sofa_gui.core.trace import Kind, LaneKind
from sofa_gui.recorder.parts import PartWriter

has_kineto_importer = importlib.util.find_spec("sofa_gui.core.importers.chrome.trace") is not None


@pytest.fixture
def real(data_dir, tmp_path):
    """A copy of the real recording (the cache keys on path + mtime, so copy per test)."""
    dst = tmp_path / "recording"
    shutil.copytree(data_dir / "recording-torch-pyspy", dst)
    return dst


def _manifest(folder):
    return json.loads((folder / "manifest.json").read_text())


def test_sniffs_by_manifest_format(real, tmp_path):
    assert IMPORTER.can_open(real) == 1.0
    assert IMPORTER.can_open(real / "manifest.json") == 1.0
    assert pick_importer(real).name == "recording"
    other = tmp_path / "other"
    other.mkdir()
    (other / "manifest.json").write_text('{"format": "something else"}')
    assert IMPORTER.can_open(other) == 0.0
    (other / "manifest.json").write_text("not json")
    assert IMPORTER.can_open(other) == 0.0
    assert IMPORTER.can_open(tmp_path) == 0.0


def test_real_recording_counters_on_the_epoch_clock(real):
    m = _manifest(real)
    t = load_trace(real)
    assert t.meta.format == "recording" and t.meta.epoch_offset_ns == 0
    names = t.counters.table.name
    cores = m["host"]["logical_cores"]
    assert {f"CPU{i} util %" for i in range(cores)} <= set(names)
    assert {"CPU busy %", "memory used", "disk read", "context switches", "lo tx"} <= set(names)
    assert any(n.endswith("] RSS") for n in names) and any(n.endswith("] CPU %") for n in names)
    by_lane = {t.lanes.name[i]: t.lanes.group[i] for i in range(len(t.lanes))}
    assert by_lane["CPU cores"] == "Host" and by_lane["Process RSS"] == "Processes"
    assert all(t.lanes.kind[t.counters.table.lane[s]] == LaneKind.COUNTER
               for s in range(len(names)))
    lo, hi = m["start"]["epoch_ns"], m["end"]["epoch_ns"]
    assert lo - 10**9 <= int(t.counters.time.min()) and int(t.counters.time.max()) <= hi + 10**9
    units = dict(zip(names, t.counters.table.unit))
    assert units["CPU0 util %"] == "%" and units["memory used"] == "B"
    rec = t.meta.extra["recording"]
    assert rec["exit"]["code"] == 0 and rec["status"] == "complete"
    rep = t.meta.load_stats
    assert rep.read == rep.loaded + rep.skipped_total and not rep.skipped
    assert rec["sources"]["gpu"]["recorded"] is False and rec["sources"]["gpu"]["reason"]
    assert any(n.startswith("gpu not recorded") for n in t.meta.load_stats.notes)
    order = [t.lanes.name[i] for i in t.lanes.display_order()
             if t.lanes.kind[i] == LaneKind.COUNTER]
    assert order.index("CPU") < order.index("CPU cores") < order.index("Memory") \
        < order.index("Process CPU")


def test_real_recording_pyspy_lane(real):
    m = _manifest(real)
    t = load_trace(real)
    py = t.slices.kind == Kind.PYTHON
    assert py.sum() > 100
    lanes = np.unique(t.slices.lane[py])
    assert all(t.lanes.group[i].startswith("py-spy: python") for i in lanes)
    assert t.slices.start[py].min() >= m["start"]["epoch_ns"]
    assert t.slices.end[py].max() <= m["end"]["epoch_ns"] + 100_000_000
    assert "<module>" in {t.names[i] for i in np.unique(t.slices.name[py])}


@pytest.mark.skipif(not has_kineto_importer, reason="Kineto importer not present yet")
def test_real_recording_kineto_merged_on_the_same_clock(real):
    m = _manifest(real)
    t = load_trace(real)
    ops = t.slices.kind == Kind.CPU_OP
    assert ops.sum() > 500
    status = m["sources"]["torch"]["processes"][0]
    assert abs(int(t.slices.start[ops].min()) - status["started_epoch_ns"]) < 100_000_000
    assert t.slices.end[ops].max() <= status["stopped_epoch_ns"] + 10_000_000
    # the Kineto CPU ops overlap the py-spy samples of the same training steps
    py = t.slices.kind == Kind.PYTHON
    assert t.slices.start[py].min() < t.slices.start[ops].min() < t.slices.end[py].max()
    assert any("baseTime" in n or "epoch offset" in n for n in t.meta.load_stats.notes)


def _synthetic(folder, status="running", version=1, nan=False):
    folder.mkdir()
    doc = {"format": "sofa_gui.recording", "format_version": version, "status": status,
           "start": {"epoch_ns": 1_000}, "sources": {}, "host": {"gpus": [
               {"index": 0, "name": "Fake GPU"}]}}
    (folder / "manifest.json").write_text(json.dumps(doc))
    w = PartWriter(folder / "counters", schema.COUNTERS)
    for k in range(2):
        w.add(time_ns=[k * 100, k * 100, k * 100, k * 100], lane=["CPU", "Network", "Network",
                                                                  "GPU0 utilization"],
              series=["CPU busy %", "lo tx", "lo rx", "GPU0 SM util %"],
              unit=["%", "B/s", "B/s", "%"], device=[-1, -1, -1, 0],
              value=[float("nan") if nan and k else 50.0 + k, 0.0, 0.0, 90.0])
        w.flush()
    return folder


def test_unfinished_recording_loads_its_parts(tmp_path):
    folder = _synthetic(tmp_path / "unfinished", nan=True)
    (folder / "counters" / "part-000003.parquet").write_bytes(b"PAR1 truncated")
    t = load_trace(folder, use_cache=False)
    names = t.counters.table.name
    assert set(names) == {"CPU busy %", "GPU0 SM util %", "lo tx", "lo rx"}
    notes = " ".join(t.meta.load_stats.notes)
    assert "incomplete" in notes and "part-000003.parquet unreadable" in notes
    sk = t.meta.load_stats.skipped
    assert dict(sk) == {"counter sample is not a number": 1, "unreadable part file": 1}
    gpu_lane = t.counters.table.lane[names.index("GPU0 SM util %")]
    assert t.lanes.group[gpu_lane] == "GPU 0" and t.lanes.device[gpu_lane] == 0
    assert t.meta.devices[0]["name"] == "Fake GPU"
    rep = t.meta.load_stats
    assert rep.read == 9 and rep.loaded == 7 and rep.read == rep.loaded + rep.skipped_total


def test_bad_manifests_are_format_errors(tmp_path):
    folder = _synthetic(tmp_path / "newer", version=99)
    with pytest.raises(TraceFormatError, match="newer"):
        IMPORTER.load(folder)
    (folder / "manifest.json").write_text('{"format": "sofa_gui.recording", "format_version": 1')
    with pytest.raises(TraceFormatError, match="not valid JSON"):
        IMPORTER.load(folder)


def test_pyspy_edges_become_slices_and_name_their_lanes(tmp_path):
    from sofa_gui.core.builder import TraceBuilder

    ev = [
        {"ph": "B", "name": 'process 7:"python\ntrain.py"', "pid": 7, "tid": 1, "ts": 0},
        {"ph": "B", "name": "thread (70): MainThread", "pid": 7, "tid": 1, "ts": 0},
        {"ph": "B", "name": "<module>", "pid": 7, "tid": 1, "ts": 0},
        {"ph": "B", "name": "step", "pid": 7, "tid": 1, "ts": 10},
        {"ph": "E", "name": "step", "pid": 7, "tid": 1, "ts": 30},
        {"ph": "E", "name": "<module>", "pid": 7, "tid": 1, "ts": 40},
        {"ph": "E", "name": "thread (70): MainThread", "pid": 7, "tid": 1, "ts": 40},
        {"ph": "E", "name": 'process 7:"python\ntrain.py"', "pid": 7, "tid": 1, "ts": 40},
        {"ph": "E", "name": "stray", "pid": 7, "tid": 1, "ts": 41},
        {"ph": "M", "name": "thread_name", "pid": 7, "tid": 1},
        {"ph": "B", "name": "open", "pid": 7, "tid": 2, "ts": 5},
    ]
    b = TraceBuilder("x", "recording")
    pyspy_slices(b, ev, 1_000_000)
    t = b.finish()
    got = sorted((t.name_of(i), int(t.slices.start[i]), int(t.slices.dur[i]))
                 for i in range(len(t.slices)))
    assert got == [("<module>", 1_000_000, 40_000), ("open", 1_005_000, 36_000),
                   ("step", 1_010_000, 20_000)]
    assert all(k == Kind.PYTHON for k in t.slices.kind)
    lanes = {t.lanes.name[i]: t.lanes.group[i] for i in range(len(t.lanes))}
    assert lanes["py-spy MainThread 70"] == "py-spy: python train.py [7]"
    rep = t.meta.load_stats
    assert rep.read == 5 and rep.loaded == 3 and dict(rep.skipped) == {
        "py-spy end without a begin": 1, "py-spy event that is not a B/E sample edge": 1}
