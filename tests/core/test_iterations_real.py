"""Iteration detection on the real public traces (../shared/traces/public).

With ``pattern`` mode (annotations ignored) the detector must find the steps the
ProfilerStep annotations mark: the same count (+-1 for partial edge steps) and
every annotated step start within 5% of the median step of a detected start.
"""

from __future__ import annotations

from functools import cache

import numpy as np
import pytest
from tracedata import shared_trace

from sofa_gui.core.analysis.iterations import detect_iterations
from sofa_gui.core.importers import load_trace

HTA = "holistic-trace-analysis/"
ANNOTATED = [
    HTA + "nccl_parser_config/nccl_data.json.gz",
    HTA + "negative_queue_length_values_check/rank0.json.gz",
    HTA + "ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz",
    HTA + "trace_diff/control/control.json.gz",
    HTA + "trace_diff/test/test.json.gz",
    HTA + "trace_filter/sampled_rank-0.json.gz",
    HTA + "trace_filter/sampled_rank-1.json.gz",
    "kineto-tb-plugin/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz",
    "kineto-tb-plugin/resnet50_num_workers_4/worker0.1623212756351.pt.trace.json.gz",
    "tracelens/mi300/resnet_act_checkpoint.json.gz",
]
MINITOY = HTA + "amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz"
B200 = "tracelens/b200/eager_trace.json.gz"
ALEXNET = HTA + "critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz"
DEEPPROF = "sofa-deepprof-gputrace/gputrace.csv"


@cache
def _load(rel: str):
    return load_trace(shared_trace(rel), use_cache=False)


def trace(rel: str):
    shared_trace(rel)  # skip (outside the cache) when the file is absent
    return _load(rel)


def robust_cv(d: np.ndarray) -> float:
    med = float(np.median(d))
    return 1.4826 * float(np.median(np.abs(d - med))) / med


@pytest.mark.parametrize("rel", ANNOTATED, ids=lambda r: r.split("/")[-2])
def test_pattern_finds_the_annotated_steps(rel):
    t = trace(rel)
    ann = detect_iterations(t, "annotations")
    pat = detect_iterations(t, "pattern")
    assert ann.method == "annotations" and len(ann) >= 2
    assert pat.method == "pattern" and not pat.labels
    assert abs(len(pat) - len(ann)) <= 1
    tol = 0.05 * float(np.median(ann.durations))
    nearest = np.abs(pat.starts[None, :] - ann.starts[:, None]).min(axis=1)
    assert np.all(nearest <= tol), (nearest / 1e3, tol / 1e3)


@pytest.mark.parametrize("rel", ANNOTATED[:3] + ANNOTATED[7:8], ids=lambda r: r.split("/")[-2])
def test_auto_uses_annotations_with_agreement(rel):
    it = detect_iterations(trace(rel))
    assert it.method == "annotations"
    assert all(label.startswith("ProfilerStep#") for label in it.labels)
    assert it.agreement["fraction"] == 1.0


def test_minitoy_has_one_step_of_device_work_so_no_pattern():
    """ProfilerStep#2 is a 49 µs stub: the device ran one step, which cannot repeat."""
    t = trace(MINITOY)
    assert len(detect_iterations(t, "annotations")) == 2
    pat = detect_iterations(t, "pattern")
    assert pat.method == "none" and "no repeated pattern" in pat.reason
    auto = detect_iterations(t)
    assert auto.method == "annotations" and auto.agreement["detected"] == 0


def test_b200_eager_repeats_its_decoder_layer():
    """One vLLM MoE forward pass: the repeating unit the detector finds is the layer."""
    it = detect_iterations(trace(B200))
    assert it.method == "pattern" and it.pattern["evidence"] == "context"
    assert len(it) >= 15 and it.pattern["coverage"] >= 0.9
    assert robust_cv(it.durations.astype(float)) < 0.1
    assert 3.0e6 < np.median(it.durations) < 5.0e6


def test_alexnet_benchmark_warmup_and_measured_forward():
    it = detect_iterations(trace(ALEXNET))
    assert it.method == "pattern" and len(it) == 2
    warm, measured = it.durations
    assert warm > 20 * measured  # the warm-up forward includes cuDNN autotuning


def test_sofa_deepprof_trace_by_activity_rhythm():
    it = detect_iterations(trace(DEEPPROF))
    assert it.method == "pattern" and it.pattern["evidence"] == "activity"
    assert len(it) >= 25 and it.pattern["coverage"] >= 0.9
    d = it.durations.astype(float)
    assert 0.9e9 < np.median(d) < 1.1e9 and d.std() / d.mean() < 0.2
