"""Run diff on synthetic before/after pairs with known answers, and on the real ResNet pair."""

from __future__ import annotations

import json

import numpy as np
import pytest

from sofa_gui.core.analysis.breakdown import compute_breakdown
from sofa_gui.core.analysis.diff import diff_analyses, diff_text
from sofa_gui.core.analysis.findings import find_bottlenecks
from sofa_gui.core.analysis.pipeline import Analysis
from sofa_gui.core.analysis.results import Iterations
from sofa_gui.core.builder import TraceBuilder
from sofa_gui.core.trace import Kind, LaneKind

US = 1000
DL = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"


def synthetic_run(loader_us: int, n: int = 4, kernel: str = "gemm"):
    """Each iteration: the DataLoader (if any), then a 560 µs kernel 20 µs later."""
    b = TraceBuilder(f"run-{loader_us}", "test")
    b.meta.source = f"run-{loader_us}.json"
    cpu = b.lane(("cpu",), "main", LaneKind.CPU, pid=1, tid=1)
    gpu = b.lane(("gpu",), "stream 7", LaneKind.GPU, device=0, stream=7)
    period = loader_us + 600
    for i in range(n):
        t = i * period * US
        if loader_us:
            b.add_slices([t], [loader_us * US], cpu, [DL], kind=Kind.CPU_OP)
        b.add_slices([t + (loader_us + 20) * US], [560 * US], gpu, [kernel], kind=Kind.KERNEL,
                     device=0)
    trace = b.finish()
    starts = np.arange(n, dtype=np.int64) * period * US
    iters = Iterations("annotations", "test", starts, starts + period * US, 1.0)
    bd = compute_breakdown(trace, iters)
    return trace, Analysis(iters, bd, find_bottlenecks(trace, iters, bd))


def test_fixing_the_loader_shows_gain_and_resolved_finding():
    r = diff_analyses(synthetic_run(400), synthetic_run(0))
    assert r["speedup"] == pytest.approx(1000 / 600, abs=1e-3)
    assert r["median_iteration_ratio"] == pytest.approx(0.6)
    dev = {c["category"]: c for c in r["categories"]["device"]}
    assert dev["idle_input"]["delta_us"] == -400.0
    assert dev["compute"]["delta_us"] == 0.0
    host = {c["category"]: c for c in r["categories"]["host"]}
    assert host["data_loading"]["before_us"] == 400.0
    resolved = {f["id"]: f for f in r["findings"]["resolved"]}
    f = resolved["input_pipeline_bound"]
    assert f["share_before"] == pytest.approx(0.4) and f["share_after"] == 0.0
    assert f["saved_per_iteration_us"] == 400.0
    assert f["predicted_speedup"] == pytest.approx(1 / 0.6, abs=1e-3)
    assert r["findings"]["measured_speedup"] == pytest.approx(1.667, abs=1e-3)
    assert r["findings"]["explained_speedup"] == pytest.approx(1.667, abs=1e-3)
    top = r["top_changes"][0]
    assert top["kind"] == "op" and top["name"] == DL and top["delta_us"] == -400.0
    json.dumps(r, allow_nan=False)
    text = "\n".join(diff_text(r))
    assert "1.67x faster" in text and "Resolved: input_pipeline_bound" in text


def test_regression_and_renamed_kernels():
    r = diff_analyses(synthetic_run(0, kernel="old_kernel"),
                      synthetic_run(400, kernel="new_kernel"))
    assert r["speedup"] == pytest.approx(0.6)
    assert [f["id"] for f in r["findings"]["new"]] == ["input_pipeline_bound"]
    names = {(c["name"], c["delta_us"]) for c in r["top_changes"]}
    assert ("old_kernel", -560.0) in names and ("new_kernel", 560.0) in names
    assert "1.67x slower" in "\n".join(diff_text(r))


def test_whole_trace_runs_are_compared_with_a_note():
    a, b = synthetic_run(400), synthetic_run(0)
    ta, aa = a
    none = Iterations.none("test", "no pattern")
    bd = compute_breakdown(ta, none)
    r = diff_analyses((ta, Analysis(none, bd, find_bottlenecks(ta, none, bd))), b)
    assert r["before"]["scope"] == "whole_trace"
    assert "whole-trace span" in "\n".join(diff_text(r))


def test_resnet_workers_diff_shows_the_gain():
    from tracedata import shared_trace

    from sofa_gui.core.analysis.pipeline import analyze
    from sofa_gui.core.importers import load_trace

    runs = []
    for w, stamp in ((0, "1623143089861"), (4, "1623212756351")):
        t = load_trace(shared_trace(
            f"kineto-tb-plugin/resnet50_num_workers_{w}/worker0.{stamp}.pt.trace.json.gz"))
        runs.append((t, analyze(t)))
    r = diff_analyses(*runs)
    # medians 176.7 ms -> 126.5 ms
    assert r["speedup"] == pytest.approx(1.396, abs=0.01)
    resolved = {f["id"]: f for f in r["findings"]["resolved"]}
    f = resolved["input_pipeline_bound"]
    assert f["share_before"] > 0.3 and f["share_after"] < 0.02
    # predicted (the loader plan on the step without the profiler's cost per event: its
    # loading and its rest each less what their events cost, the host-paced part slowed
    # 1.15x beside the workers, the assumed hand-over of each batch) vs
    # 1.40x measured (median), 1.26x (mean); the rest of the step the fix does not touch
    # grew 31% in the second run: as in the first, 1.63x
    assert f["predicted_speedup"] == pytest.approx(1.576, abs=0.02)
    dev = {c["category"]: c for c in r["categories"]["device"]}
    assert dev["idle_input"]["delta_us"] < -50_000
    host = {c["category"]: c for c in r["categories"]["host"]}
    assert host["data_loading"]["delta_us"] < -60_000
    top = r["top_changes"][0]
    assert "DataLoader" in top["name"] and top["delta_us"] < -60_000


def test_ops_pair_by_normalised_name_and_new_or_removed_are_marked():
    from sofa_gui.core.analysis.diff_pairs import pair_key, paired_changes

    single = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"
    multi = "enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__"
    assert pair_key(single) == pair_key(multi)
    assert pair_key("void k<float>(int)") == pair_key("void k<double>(int)")
    before = {("op", single): 69_300.0, ("kernel", "old_kernel"): 50.0,
              ("kernel", "same"): 10.0}
    after = {("op", multi): 1_400.0, ("kernel", "new_kernel"): 3.0, ("kernel", "same"): 10.0}
    rows = {r["name"]: r for r in paired_changes(before, after, top=1)}
    loader = rows[f"{single} → {multi}"]
    assert loader["status"] == "changed" and loader["delta"] == -67_900.0
    # beyond the top one, the removed and the new kernel are still listed
    assert rows["old_kernel"]["status"] == "removed" and rows["new_kernel"]["status"] == "new"
    assert "same" not in rows
