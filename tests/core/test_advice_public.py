"""The advisor on public traces (HTA, Kineto, TraceLens, JAX, vLLM, SOFA): causes named,
fixes that fit the run, one-off work kept apart from per-step gains."""

from __future__ import annotations

import json

import pytest
from advice_checks import analyzed, by_id, fits_facts, no_gain_from_one_off
from tracedata import shared_trace

from sofa_gui.core.analysis.diff import diff_analyses

# -- public traces ------------------------------------------------------------------------------
HTA = "holistic-trace-analysis/"


def test_alexnet_one_off_setup_is_startup_not_launch_overhead():
    _, a = analyzed(shared_trace(HTA + "critical_path/alexnet/"
                             "benchmark_result_2869224_1695835535_trace.json.gz"))
    top = a.findings[0]
    assert top.id == "startup_cost" and top.estimated_speedup is None
    assert {"cudaFree", "cudaMalloc", "cudaLaunchKernel"} <= {c.label for c in top.causes}
    for f in a.findings[1:]:  # one steady iteration: anything per-step is low confidence
        assert f.confidence < 0.2
    no_gain_from_one_off(a)
    fits_facts(a)


def test_amd_minitoy_two_steps_no_per_step_gain_from_the_first():
    _, a = analyzed(shared_trace(HTA + "amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz"))
    assert a.run.value("device") == "rocm"
    assert [f.id for f in a.findings] == ["startup_cost"]


def test_negative_queue_blocking_readback_in_sparse_data_dist():
    _, a = analyzed(shared_trace(HTA + "negative_queue_length_values_check/rank0.json.gz"))
    top = a.findings[0]
    assert top.id == "blocking_readback"
    c = top.causes[0]
    assert "## sparse_data_dist ##" in c.label and "704 B" in c.label
    assert c.count == 5 and c.share > 0.9
    assert "blocks the host" in top.evidence[0].label
    sync = by_id(a).get("synchronization_stalls")
    assert sync is None or sync.share < top.share  # the read-back is not counted twice
    fits_facts(a)


def test_resnet_nw0_fixes_name_the_facts():
    _, a = analyzed(shared_trace("kineto-tb-plugin/resnet50_num_workers_0/"
                             "worker0.1623143089861.pt.trace.json.gz"))
    top = a.findings[0]
    assert top.id == "input_pipeline_bound"
    assert top.confidence < 1  # cores unknown: said so
    assert "does not say how many cores" in top.summary
    because = {x.because for x in top.fixes}
    assert any(b.startswith("num_workers is 0 here: `enumerate(DataLoader)#_SingleProcess")
               for b in because)
    assert {c.label for c in top.causes} >= {"aten::copy_"}
    fits_facts(a)


def test_resnet_pair_diff_reports_mean_median_p90_and_hidden_slow_iterations():
    def run(w, stamp):
        return analyzed(shared_trace(f"kineto-tb-plugin/resnet50_num_workers_{w}/"
                                 f"worker0.{stamp}.pt.trace.json.gz"))
    r = diff_analyses(run(0, "1623143089861"), run(4, "1623212756351"))
    sp = r["iteration_time"]["speedup"]
    assert sp["median_us"] == pytest.approx(1.40, abs=0.01)
    assert sp["mean_us"] == pytest.approx(1.26, abs=0.01)
    assert len(r["hidden_slow_iterations"]["after"]) == 2
    assert r["prediction"]["finding"] == "input_pipeline_bound"
    assert r["prediction"]["measured_speedup"] == sp["mean_us"]


def test_vllm_inference_gets_no_training_fixes():
    _, a = analyzed(shared_trace("tracelens/b200/eager_trace.json.gz"))
    assert a.run.value("mode") == "inference"
    for f in a.findings:
        for x in f.fixes:
            assert "optimizer" not in x.text.lower() and "DistributedDataParallel" not in x.text
    no_gain_from_one_off(a)
    fits_facts(a)


def test_jax_xplane_gets_jax_fixes_and_compile_as_startup():
    _, a = analyzed(shared_trace("tracelens/mi300/jax_conv_minimal_08/tw003.xplane.pb"))
    assert a.run.value("framework") == "jax" and a.run.value("compiled") == "xla"
    ids = by_id(a)
    assert "host_dispatch_bound" in ids and ids["host_dispatch_bound"].causes
    for f in a.findings:
        assert all(x.framework in ("jax", "tensorflow/jax", "any") for x in f.fixes)
        assert not any("jax.jit the whole step" in x.text for x in f.fixes)  # already jitted
    no_gain_from_one_off(a)


def test_jax_xplane_waits_with_idle_gpus_are_not_dispatch_and_not_sure():
    """Each block_until_ready waits up to 44 ms while the GPUs (~3% busy) have nothing
    queued and the PjRt threads sit in BufferSequencingEvent::Execute with nothing inside:
    that wait is not host dispatch (the runtime threads' waits are not counted as work),
    its cause is not in the trace (half confidence, an upper bound); the dispatch itself is
    one finding (launch overhead folded in), the first call's allocation is start-up."""
    _, a = analyzed(shared_trace("tracelens/mi300/jax_conv_minimal_08/tw003.xplane.pb"))
    ids = by_id(a)
    assert "launch_overhead_bound" not in ids  # host_dispatch_bound measures it for XLA
    sync = ids["synchronization_stalls"]
    assert "has nothing left to do" in sync.summary and "BufferSequencingEvent" in sync.summary
    assert sync.confidence <= 0.5 * a.iterations.confidence + 1e-9
    assert sync.causes[0].label.endswith("block_until_ready with the device idle")
    assert "waits 43.8 ms" in sync.evidence[0].label
    dispatch = ids["host_dispatch_bound"]
    assert dispatch.share < 0.3  # was 94% while waits counted as dispatch work
    assert not any(c.label.startswith("BufferSequencingEvent::Execute") for c in dispatch.causes)
    start = ids["startup_cost"]
    labels = " ".join(c.label for c in start.causes)
    assert "Build buffer allocations" in labels and "DeviceMemAllocator::Alloc" in labels
    assert a.findings[0].id in ("synchronization_stalls", "startup_cost")
    no_gain_from_one_off(a)


def test_jax_xplane_findings_say_what_the_trace_shows_inside_the_waits():
    """Read by hand: each of the 4 steady block_until_ready waits (11-44 ms) starts with
    the 8 GPUs' last kernels, which end within 0.43 ms; then no GPU and no host thread does
    anything but one PjRt thread waiting in BufferSequencingEvent::Execute until the wait
    returns.  So the waits lead, with their cause honestly unknown; the first call's
    buffer allocation (Build buffer allocations on the 8 py_xla_execute threads at once,
    DeviceMemAllocator::Alloc) is one-off work; dispatch is the 16% left."""
    _, a = analyzed(shared_trace("tracelens/mi300/jax_conv_minimal_08/tw003.xplane.pb"))
    assert [f.id for f in a.findings[:3]] == ["synchronization_stalls", "startup_cost",
                                              "host_dispatch_bound"]
    sync = a.findings[0]
    assert "Inside these waits the trace shows no work: the last device work (all 8 " \
           "devices) ends at most 429 µs after a wait begins, and the other host threads " \
           "work 0.0% of the wait time" in sync.summary
    start = a.findings[1]
    assert start.estimated_speedup is None and not start.tentative  # proven one-off work
    build = next(c for c in start.causes if c.label.startswith("Build buffer allocations"))
    assert build.label.endswith("summed over 8 threads")
    assert "(python and " in a.findings[2].summary  # the runtime threads, their waits not


def test_nccl_data_host_bound_counts_the_autograd_thread():
    """nccl_data's long gaps: the main thread runs ops in 52% of them, the autograd thread
    (backward) in 34% more: together the host is in traced ops 86% of the time the GPU
    waits for it, so host-bound (framework overhead: DDP's per-step buffer broadcast
    unflatten, batch_norm, AccumulateGrad) is the right reading."""
    _, a = analyzed(shared_trace(HTA + "nccl_parser_config/nccl_data.json.gz"))
    top = a.findings[0]
    assert top.id == "launch_overhead_bound"
    assert "In the long gaps the host (pt_main_thread, pt_autograd_0" in top.summary
    assert "runs 85.7% of the time" in top.summary
    labels = [c.label for c in top.causes]
    assert "aten::unflatten_dense_tensors" in labels
    assert any(x.startswith("autograd::engine::evaluate_function") for x in labels)


def test_uncertain_iterations_travel_into_every_finding_that_rests_on_them():
    """With iterations found at confidence 0.15, every per-step finding (and start-up's
    warm-up excess) says so in its text and is at most that sure."""
    from sofa_gui.core.analysis.findings import find_bottlenecks
    trace, a = analyzed(shared_trace("tracelens/mi300/jax_conv_minimal_08/tw003.xplane.pb"))
    a.iterations.confidence = 0.15
    found = find_bottlenecks(trace, a.iterations, a.breakdown, a.run)
    assert found
    for f in found:
        assert f.confidence <= 0.15 + 1e-9, (f.id, f.confidence)
        assert "iterations found with confidence 0.15" in f.confidence_why
        if f.estimated_speedup is not None:
            assert f.summary.startswith("Iterations uncertain (found with confidence 0.15)")


def test_sofa_2017_gputrace_unexplained_idle_is_the_top_finding():
    _, a = analyzed(shared_trace("sofa-deepprof-gputrace/gputrace.csv"))
    top = a.findings[0]
    assert top.id == "gpu_idle_unexplained" and top.share > 0.6
    assert top.causes[0].label.startswith("idle after ")
    assert a.run.value("framework") is None  # nothing in the file says which framework


@pytest.mark.parametrize("rel", [
    HTA + "nccl_parser_config/nccl_data.json.gz",
    HTA + "ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz",
    HTA + "trace_diff/control/control.json.gz",
    HTA + "trace_diff/test/test.json.gz",
    HTA + "trace_filter/sampled_rank-0.json.gz",
    "kineto-tb-plugin/resnet50_num_workers_4/worker0.1623212756351.pt.trace.json.gz",
    "tracelens/mi300/resnet_act_checkpoint.json.gz",
])
def test_every_public_trace_causes_and_fitting_fixes(rel):
    _, a = analyzed(shared_trace(rel))
    no_gain_from_one_off(a)
    fits_facts(a)


def test_other_frameworks_fixes_only_on_request(tmp_path):
    """`analyze --all-fixes` lists TF/JAX fixes for a PyTorch run; by default they are in
    fixes_not_shown with the reason."""
    import subprocess
    import sys

    path = shared_trace("kineto-tb-plugin/resnet50_num_workers_0/"
                        "worker0.1623143089861.pt.trace.json.gz")

    def top(*extra):
        out = subprocess.run([sys.executable, "-m", "sofa_gui", "analyze", str(path), "--json",
                              *extra], capture_output=True, text=True, check=True).stdout
        return json.loads(out)["findings"][0]

    plain, every = top(), top("--all-fixes")
    assert {x["framework"] for x in plain["fixes"]} == {"pytorch", "any"}
    assert any(x["why"].startswith("for tensorflow; this run is pytorch")
               for x in plain["fixes_not_shown"])
    assert {"tensorflow", "jax"} <= {x["framework"] for x in every["fixes"]}
    assert [x["framework"] for x in every["fixes"]][0] == "pytorch"  # the run's first
