"""Device-side windows when the device lags its host (real HTA / TraceLens traces).

HTA ``ns_resolution_trace``: every step has ~95 ms of GPU work, but the host
steps (ProfilerStep annotations) read 35/72/96/96/96 ms. TraceLens MI300: the
last step is its 15.9 ms annotation, though its device work runs on past it.
"""

from __future__ import annotations

import numpy as np
import pytest
from tracedata import shared_trace

from sofa_gui.core.analysis.iterations import detect_iterations
from sofa_gui.core.importers import load_trace

NS = "holistic-trace-analysis/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"
MI300 = "tracelens/mi300/resnet_act_checkpoint.json.gz"


@pytest.mark.parametrize("mode", ["annotations", "pattern"])
def test_lagging_gpu_gets_device_windows_of_equal_work(mode):
    it = detect_iterations(load_trace(shared_trace(NS)), mode)
    assert it.device_lags and len(it) == 5
    host = it.durations / 1e6
    dev = (it.device_ends - it.device_starts) / 1e6
    assert host.max() / host.min() > 2.5  # the host clock says the steps differ ~3x
    assert np.all(np.abs(dev - 96) < 3), dev  # the device did the same work each step
    assert np.all(it.device_starts[1:] > it.starts[1:])  # started after its host step
    items = it.to_dict()["items"]
    assert all(x["device_end_us"] > x["device_start_us"] for x in items)


def test_mi300_last_step_is_its_annotation_and_its_device_work_a_window():
    trace = load_trace(shared_trace(MI300))
    it = detect_iterations(trace, "annotations")
    dev = (it.device_ends - it.device_starts) / 1e6
    last = int(np.flatnonzero(np.array(trace.names)[trace.slices.name] == it.labels[-1])[0])
    assert it.ends[-1] == trace.slices.end[last] and it.starts[-1] == trace.slices.start[last]
    assert np.all(np.abs(dev - 19) < 1), dev
    assert it.device_ends[-1] > it.ends[-1]  # the device runs on past the step


def test_cpu_only_capture_has_no_device_windows():
    from loop_truth import LOOPS_DIR
    it = detect_iterations(load_trace(LOOPS_DIR / "grad_accum.json.gz", use_cache=False))
    assert it.device_starts is None and not it.device_lags
    assert all(x["device_start_us"] is None for x in it.to_dict()["items"])


@pytest.mark.parametrize("rel", [NS, MI300])
def test_no_jitter_finding_from_host_device_skew_alone(rel):
    from sofa_gui.core.analysis.pipeline import analyze

    a = analyze(load_trace(shared_trace(rel)))
    steps = a.iterations.device_step_times()
    assert steps is not None and steps.max() / steps.min() < 1.1  # the device ran evenly
    assert "iteration_jitter" not in [f.id for f in a.findings]


@pytest.mark.parametrize("rel, work_ms", [(NS, 94.5), (MI300, 18.7)])
def test_device_breakdown_uses_device_windows_and_is_even_per_step(rel, work_ms):
    """Device rows cover each step's device work finish to finish: busy and idle agree
    step to step; host rows keep the host windows (each row sums to its own window)."""
    from sofa_gui.core.analysis.pipeline import analyze

    a = analyze(load_trace(shared_trace(rel)))
    bd, it = a.breakdown, a.iterations
    d, h = bd.device, bd.host
    assert bd.device_clock and bd.window_clock == "device"
    assert np.array_equal(d.ends, it.device_ends)
    assert np.array_equal(d.starts[1:], it.device_ends[:-1])
    assert it.starts[0] <= d.starts[0] <= it.device_starts[0]
    assert np.array_equal(d.times.sum(axis=1), d.ends - d.starts)
    assert np.array_equal(h.starts, it.starts) and np.array_equal(bd.starts, it.starts)
    assert np.array_equal(h.times.sum(axis=1), h.ends - h.starts)
    busy = d.busy / 1e6
    assert np.all(np.abs(busy - work_ms) < 0.03 * work_ms), busy  # host windows: 29..183 ms
    idle = (d.times.sum(axis=1) - d.busy) / 1e6  # the first step also waits for its launches
    assert idle[1:].max() < 0.05 * work_ms and idle[0] < 0.1 * work_ms, idle


def test_json_says_which_clock_the_device_windows_use():
    from sofa_gui.core.analysis.pipeline import analyze

    a = analyze(load_trace(shared_trace(NS)))
    j = a.breakdown.to_dict()
    assert j["device_window_clock"] == "device" and len(j["device_windows"]) == 5
    assert j["windows"][0]["start_us"] == a.iterations.to_dict()["items"][0]["start_us"]
    items = a.iterations.to_dict()["items"]
    a.breakdown.annotate_items(items)
    first = items[0]
    assert first["device_window"]["clock"] == "device"
    assert first["device_window"]["end_us"] == first["device_end_us"]
    assert items[1]["device_window"]["start_us"] == first["device_end_us"]
    dev = {k: v for k, v in first["breakdown"].items() if not k.startswith("host_")}
    span = first["device_window"]["end_us"] - first["device_window"]["start_us"]
    assert abs(sum(dev.values()) - span) < 0.01 * span
    host = {k: v for k, v in first["breakdown"].items() if k.startswith("host_")}
    assert abs(sum(host.values()) - first["duration_us"]) < 0.01 * first["duration_us"]


def test_host_clock_kept_when_the_device_keeps_up():
    from sofa_gui.core.analysis.pipeline import analyze

    rel = "holistic-trace-analysis/trace_diff/control/control.json.gz"
    a = analyze(load_trace(shared_trace(rel)))
    assert not a.iterations.device_lags
    assert not a.breakdown.device_clock
    assert a.breakdown.to_dict()["device_window_clock"] == "host"
    assert np.array_equal(a.breakdown.device.starts, a.breakdown.starts)
