"""Device-side windows when the device lags its host (real HTA / TraceLens traces).

HTA ``ns_resolution_trace``: every step has ~95 ms of GPU work, but the host
windows read 35/72/96/96/185 ms. TraceLens MI300: the last host window is
53.8 ms against ~19 ms of device work per step.
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
    assert host.max() / host.min() > 4  # the host clock says the steps differ 5x
    assert np.all(np.abs(dev - 96) < 3), dev  # the device did the same work each step
    assert np.all(it.device_starts[1:] > it.starts[1:])  # started after its host step
    items = it.to_dict()["items"]
    assert all(x["device_end_us"] > x["device_start_us"] for x in items)


def test_mi300_last_window_is_long_on_the_host_only():
    it = detect_iterations(load_trace(shared_trace(MI300)), "annotations")
    dev = (it.device_ends - it.device_starts) / 1e6
    assert it.durations[-1] / 1e6 > 50 and np.all(np.abs(dev - 19) < 1), dev


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
