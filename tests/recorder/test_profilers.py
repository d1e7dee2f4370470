"""``--torch`` (torch.profiler shim) and ``--py-spy`` on real children."""

from __future__ import annotations

import importlib.util
import json
import threading

import numpy as np
import pytest
from rec_workloads import (
    PY_HOT,
    SLEEPER,
    TORCH_LOOP,
    TORCH_UNTIL_WINDOW_DONE,
    TRAIN_TINY,
    manifest,
    py,
)

from sofa_gui.core.importers import load_trace
from sofa_gui.core.trace import Kind, LaneKind
from sofa_gui.recorder import pyspy as pyspy_mod
from sofa_gui.recorder.cli import main as record_main
from sofa_gui.recorder.config import RecordConfig
from sofa_gui.recorder.runner import Recorder

has_torch = importlib.util.find_spec("torch") is not None
needs_torch = pytest.mark.skipif(not has_torch, reason="torch is not installed")
needs_pyspy = pytest.mark.skipif(pyspy_mod.find_pyspy() is None, reason="py-spy not installed")


def _within_run(trace, kind, m):
    sel = trace.slices.kind == kind
    assert sel.any(), f"no {kind.name} slices"
    lo, hi = m["start"]["epoch_ns"], m["end"]["epoch_ns"]
    slack = 200_000_000  # 0.2 s: py-spy/Kineto anchoring and process start-up
    assert trace.slices.start[sel].min() >= lo - slack
    assert trace.slices.end[sel].max() <= hi + slack
    return sel


@needs_torch
@pytest.mark.slow
def test_torch_training_loop_gives_a_kineto_trace_with_iterations(tmp_path):
    out = tmp_path / "torch"
    assert record_main(["-o", str(out), "--torch", "--", *py(TRAIN_TINY, STEPS=16)]) == 0
    m = manifest(out)
    src = m["sources"]["torch"]
    assert src["recorded"], src
    (trace_file,) = src["traces"]
    data = (out / trace_file).read_bytes()
    assert b'"baseTimeNanoseconds"' in data[:4096] and b"ProfilerStep" not in data
    status = src["processes"][0]
    assert status["stop_reason"] == "exit" and status["activities"][0] == "CPU"
    trace = load_trace(out)
    if importlib.util.find_spec("sofa_gui.core.importers.chrome.trace") is None:
        pytest.skip("Kineto importer not present yet")
    _within_run(trace, Kind.CPU_OP, m)
    assert any("kineto" in n and "epoch" in n for n in trace.meta.load_stats.notes)
    names = {trace.names[i] for i in np.unique(trace.slices.name[trace.slices.kind == Kind.CPU_OP])}
    assert {"aten::addmm", "aten::mse_loss"} <= names
    try:
        from sofa_gui.core.analysis.iterations import detect_iterations
    except ImportError:
        pytest.skip("iteration detection not present yet")
    it = detect_iterations(trace, mode="pattern")
    assert it.method == "pattern", it.reason
    assert 14 <= len(it) <= 17


@needs_torch
@pytest.mark.slow
def test_torch_window_limits_profiling(tmp_path):
    out = tmp_path / "window"
    assert record_main(["-o", str(out), "--torch-window", "0:0.4", "--",
                        *py(TORCH_UNTIL_WINDOW_DONE)]) == 0
    m = manifest(out)
    (status,) = m["sources"]["torch"]["processes"]
    assert status["stop_reason"] == "window end", status
    profiled = (status["stopped_epoch_ns"] - status["started_epoch_ns"]) / 1e9
    assert 0.35 <= profiled < 1.5
    assert m["recorder"]["torch_window_s"] == [0.0, 0.4]
    kineto = json.loads((out / m["sources"]["torch"]["traces"][0]).read_text())
    base = kineto["baseTimeNanoseconds"]
    ts = [e["ts"] for e in kineto["traceEvents"] if e.get("ph") == "X" and "ts" in e]
    assert base + min(ts) * 1000 >= status["started_epoch_ns"] - 50_000_000
    assert base + max(ts) * 1000 <= status["stopped_epoch_ns"] + 50_000_000


@needs_torch
@pytest.mark.slow
def test_stop_still_exports_the_torch_trace(tmp_path):
    ready = threading.Event()
    cfg = RecordConfig(command=tuple(py(TORCH_LOOP, SECONDS=60)), output=tmp_path / "stop",
                       torch=True)
    rec = Recorder(cfg, on_output=lambda s, c: ready.set() if b"ready" in c else None)
    rec.start()
    assert ready.wait(60)
    rec.request_stop()
    res = rec.wait()
    assert res.exit_code == 130
    src = manifest(res.folder)["sources"]["torch"]
    assert src["recorded"] and src["processes"][0]["stop_reason"] == "exit"


def test_torch_requested_for_a_program_without_torch(tmp_path):
    out = tmp_path / "notorch"
    assert record_main(["-o", str(out), "--torch", "--", *py("print('no torch here')")]) == 0
    src = manifest(out)["sources"]["torch"]
    assert not src["recorded"] and "never imported torch" in src["reason"]
    assert "no torch here" in (out / "output.log").read_text()


@needs_pyspy
@pytest.mark.slow
def test_pyspy_samples_become_a_python_lane(tmp_path):
    out = tmp_path / "spy"
    assert record_main(["-o", str(out), "--py-spy", "--", *py(PY_HOT)]) == 0
    m = manifest(out)
    src = m["sources"]["py_spy"]
    if not src["recorded"]:  # e.g. no ptrace permission: the manifest must say so
        assert src["reason"].startswith("py-spy could not sample the child")
        pytest.skip(f"py-spy cannot attach here: {src['reason']}")
    # ~100 samples on an idle machine; a loaded 2-core CI box gives py-spy far fewer
    assert src["samples"] >= 5 and src["launch_epoch_ns"] >= m["start"]["epoch_ns"]
    trace = load_trace(out)
    sel = _within_run(trace, Kind.PYTHON, m)
    names = {trace.names[i] for i in np.unique(trace.slices.name[sel])}
    assert "hot_function_for_pyspy" in names
    lanes = np.unique(trace.slices.lane[sel])
    assert all(trace.lanes.kind[i] == LaneKind.CPU for i in lanes)
    assert any(trace.lanes.group[i].startswith("py-spy: python") for i in lanes)
    assert all(trace.lanes.name[i].startswith("py-spy ") for i in lanes)


@needs_pyspy
def test_pyspy_that_cannot_attach_says_why(tmp_path):
    """``sleep`` is not Python: py-spy fails to attach, the recording still completes."""
    out = tmp_path / "nospy"
    assert record_main(["-o", str(out), "--py-spy", "--", "sleep", "0.5"]) == 0
    src = manifest(out)["sources"]["py_spy"]
    assert not src["recorded"]
    assert "py-spy could not sample the child" in src["reason"]
    assert "No python processes found" in src["reason"]
    assert not (out / "pyspy" / "pyspy.json").exists()
    load_trace(out)


def test_pyspy_missing_binary_is_reported(tmp_path, monkeypatch):
    monkeypatch.setattr(pyspy_mod, "find_pyspy", lambda: None)
    res = Recorder(RecordConfig(command=tuple(py(SLEEPER.replace("while True", "while 0"))),
                                output=tmp_path / "r", py_spy=True)).run()
    src = manifest(res.folder)["sources"]["py_spy"]
    assert not src["recorded"] and "py-spy is not installed" in src["reason"]
