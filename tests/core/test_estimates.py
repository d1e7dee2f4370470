"""Estimates against measured fixes, and variation that is only the run's own noise, on
real captures of the diagnosis corpus (``tests/data/corpus``): the host-side fixes (a loop
of element reads, large copies) are estimated with the profiler's cost taken out and the
work that stays counted warm, within 25% of the fix measured without the profiler on the
tuned cases; per-tensor optimizer ops that only the profiler's cost makes count are no
finding; steps that make the same calls, slower, and do not stand apart from the other
steps are no confident jitter.  A test is skipped when the corpus is not checked out."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sofa_gui.core.analysis.findings import evaluate_rules
from sofa_gui.core.analysis.findings.host_estimate import (
    COLD_AFTER_COPIES,
    COLD_AFTER_NS,
    COLD_MATH,
    COLD_PER_OP,
    READ_LOOP_UNPROFILED,
    TF_UNPROFILED,
    TINY_LOOP_UNPROFILED,
    HostFix,
)
from sofa_gui.core.analysis.findings.read_rules import BULK_NS_PER_VALUE
from sofa_gui.core.analysis.pipeline import analyze
from sofa_gui.core.importers import load_trace

CORPUS = Path(__file__).resolve().parents[1] / "data" / "corpus"
WITHIN = 0.25


def truth(case: str) -> dict:
    path = CORPUS / case / "truth.json"
    if not path.exists():
        pytest.skip(f"corpus case {case} not in tests/data/corpus")
    return json.loads(path.read_text())


def trace_of(case: str, k: int):
    return load_trace(CORPUS / case / truth(case)["captures"][k], use_cache=False)


def analyzed(case: str, k: int):
    return analyze(trace_of(case, k))


def finding(a, fid: str):
    return next((f for f in a.findings if f.id == fid), None)


def test_a_bulk_read_still_costs_each_value():
    assert 10 <= BULK_NS_PER_VALUE <= 100  # .tolist() and the Python consuming it


def test_the_profiler_ratios_are_shares_and_the_cold_factors_slow_work_down():
    assert 0 < READ_LOOP_UNPROFILED < TINY_LOOP_UNPROFILED < TF_UNPROFILED < 1
    assert 1 < COLD_MATH < COLD_PER_OP < COLD_AFTER_COPIES


def test_what_stays_runs_warmer_by_how_long_the_loop_kept_it_away():
    """A loop that is most of the step leaves a short step: its math and per-op work run
    faster, the more so the longer the loop kept them away (up to the cold factors at
    COLD_AFTER_NS); a small loop leaves the step long and the rest keeps its unprofiled
    time, so the estimate is Amdahl on the unprofiled share."""
    long = HostFix(0.8, math=0.05, unprofiled=0.4, step_ns=4 * COLD_AFTER_NS)
    before, after = long.times()
    ops = 0.15 * TINY_LOOP_UNPROFILED
    assert before == pytest.approx(0.8 * 0.4 + 0.05 + ops)
    assert after == pytest.approx(0.05 / COLD_MATH + ops / COLD_PER_OP)
    short = HostFix(0.8, math=0.05, unprofiled=0.4, step_ns=COLD_AFTER_NS / 4)
    assert 1 / (1 - short.unprofiled_share()) < short.speedup() < long.speedup()
    replaced = HostFix(0.8, math=0.05, replacement=0.05, unprofiled=0.4,
                       step_ns=4 * COLD_AFTER_NS)  # the bulk read keeps it away 0.6 ms
    assert replaced.times()[1] > after + 0.05
    small = HostFix(0.3, math=0.05, unprofiled=0.4, step_ns=4 * COLD_AFTER_NS)
    share = small.unprofiled_share()
    assert small.speedup() == pytest.approx(1 / (1 - share))
    assert share < 0.3  # the profiler's cost made the loop look larger
    assert "warmer" in long.basis() and "keeps its time" in small.basis()


@pytest.mark.parametrize("case, fid", [("pt_train_item_sync", "host_reads_in_loop"),
                                       ("jax_infer_readback", "host_reads_in_loop"),
                                       ("tf_infer_labels_readback", "host_reads_in_loop"),
                                       ("pt_train_log_tensors", "host_reads_in_loop"),
                                       ("pt_train_memcopy", "memory_copy_bound")])
@pytest.mark.parametrize("k", [0, 1])
def test_a_host_fix_estimate_meets_the_measured_fix(case, fid, k):
    """A per-sample .item() metric and per-step re-layout copies (tuned cases): the step
    without the profiler over the step left by the fix, within a quarter of the fix
    measured without the profiler; the summary says what the estimate assumes."""
    measured = truth(case)["fix"]["speedup"]
    f = finding(analyzed(case, k), fid)
    assert f is not None
    assert abs(f.estimated_speedup / measured - 1) <= WITHIN, (f.estimated_speedup, measured)
    assert "without the profiler" in f.summary and "runs warmer" in f.summary


def test_a_graph_executors_per_op_work_is_per_op_work_not_math():
    """A ``tf.function`` training step of a small MLP, then a per-sample loop of eager
    reads: the step's runtime pool runs hundreds of kernels of a microsecond or two (variable
    reads, Adam's elementwise updates): per-op work, which runs warmer once the loop is
    gone, not math; the estimate meets the fix measured without the profiler."""
    measured = truth("tf_tape_per_sample_readback")["fix"]["speedup"]
    f = finding(analyzed("tf_tape_per_sample_readback", 0), "host_reads_in_loop")
    assert f is not None
    assert abs(f.estimated_speedup / measured - 1) <= WITHIN, (f.estimated_speedup, measured)


def test_untraced_python_after_the_reads_goes_with_them():
    """Tensors logged as text each step, with a numpy summary of a ``.numpy()`` copy: after
    the last read the main thread works with nothing recorded far longer than each step
    starts with (the text's assembly, the numpy work on the values read), and the fix
    takes that out with the loop; a loop whose step ends right after its reads (a
    ``.max().item()`` per row) has no such time."""
    f = finding(analyzed("pt_train_log_tensors", 0), "host_reads_in_loop")
    assert f is not None and "with nothing recorded" in f.summary
    assert "a loop of reads with the Python after it" in f.summary
    g = finding(analyzed("pt_infer_readback", 0), "host_reads_in_loop")
    assert g is not None and "with nothing recorded" not in g.summary


def test_a_slice_taken_once_bounds_what_the_loop_reads():
    """``str(out[:4])``: the formatting reads the 40 values of the slice, not the 2,560 of
    ``out``; the slice, taken once, is no pick of the loop's elements."""
    f = finding(analyzed("pt_train_log_tensors", 0), "host_reads_in_loop")
    assert f is not None and "2,560 values" not in f.summary


def test_a_python_traced_read_loop_takes_the_python_tracers_ratio():
    f = finding(analyzed("jax_infer_readback", 0), "host_reads_in_loop")
    assert f is not None and "55% of its captured time" in f.summary


def test_tensorflow_element_reads_take_tensorflows_ratio_and_cost_one_read_in_bulk():
    """TensorFlow's recorder costs less per eager op than torch.profiler: the loop of
    element picks and the rest's per-op work keep 75% of their captured time; the fix's
    one read of the whole result still costs one of the loop's reads (an eager call of
    about a hundred microseconds), most of its replacement's cost."""
    f = finding(analyzed("tf_infer_labels_readback", 0), "host_reads_in_loop")
    assert f is not None and "75% of its captured time" in f.summary
    assert "per-op work 75%" in f.summary and "costs one of the loop's reads" in f.summary


def test_the_bulk_read_converts_the_whole_result_each_loop_indexes():
    """``out[k].max().item()`` over the rows of a 512x8 result: each read hands over one
    value, but the fix's one read of the whole result converts all 4,096 (the rows'
    indexing op reads the whole result)."""
    f = finding(analyzed("pt_infer_readback", 0), "host_reads_in_loop")
    assert f is not None and "and converts its 4,096 values" in f.summary


def test_per_tensor_optimizer_ops_are_a_loop_of_their_own():
    """A transformer layer trained with AdamW's default per-tensor loop on a CPU: fused
    AdamW saves under 5% of the step (the truth's measured counterfactual).  The
    optimizer's 140 tiny ops per step and the model's 84 are each too few for a loop of
    tiny ops (one fix removes each part, none both): no finding, not even a weak one."""
    t = truth("pt_train_variable_length")
    assert t["shares"].get("host_overhead", 0.0) < 0.05
    assert set(t["variants"]) >= {"fused", "foreach"}
    for k in (0, 1):
        trace = trace_of("pt_train_variable_length", k)
        a = analyze(trace)
        assert not [f for f in evaluate_rules(trace, a.iterations, a.breakdown)
                    if f.id == "op_overhead_bound"]


def test_a_training_steps_own_few_tiny_ops_do_not_join_the_optimizers_loop():
    """Activation checkpointing of four feed-forward blocks, AdamW's default loop: its 260
    per-tensor ops per step make a loop, the backward's nodes per layer and parameter and
    the forward's residual adds (64 a step) do not, and are left out; the optimizer's loop
    alone, each op at its fixed cost, holds under 5% of the step once the profiler's cost
    per op is out (``AdamW(foreach=True)``, which removes only that cost, gains nothing
    measurable)."""
    t = truth("pt_train_activation_checkpointing")
    assert t["bound"] == "compute" and t["variants"]["foreach"]["speedup"] < 1.05
    for k in (0, 1):
        trace = trace_of("pt_train_activation_checkpointing", k)
        a = analyze(trace)
        assert finding(a, "op_overhead_bound") is None
        below = [f for f in evaluate_rules(trace, a.iterations, a.breakdown)
                 if f.id == "op_overhead_bound"]
        assert below and below[0].severity == "none"
        assert below[0].summary.startswith("Without the profiler's own cost per op")
        assert "the 64 other tiny ops per iteration, under 200, are no loop" in below[0].summary


def test_jitter_within_the_runs_own_noise_is_not_confident():
    """A compute-bound CNN on a loaded machine: its slow steps make the same calls, slower,
    and do not stand apart from the others' spread."""
    f = finding(analyzed("pt_train_compute_cnn", 0), "iteration_jitter")
    assert f is None or f.confidence < 0.5
    if f is not None:
        assert "step-to-step noise" in f.summary


def test_a_fix_promising_no_gain_or_no_number_keeps_no_confidence():
    from sofa_gui.core.analysis.findings.host_estimate import CLEAR_GAIN, clear_of_noise

    assert clear_of_noise(0.9) == 0.0 and clear_of_noise(1.0) == 0.0
    assert clear_of_noise(float("nan")) == 0.0
    assert clear_of_noise(1.0 / (1.0 - CLEAR_GAIN / 2)) == pytest.approx(0.5)
    assert clear_of_noise(2.0) == 1.0


@pytest.mark.parametrize("k", [0, 1])
def test_a_step_with_no_repeated_unit_batches_the_update_along(k):
    """A PINN's step (128 collocation points, the residual's second derivative through
    ``autograd.grad(create_graph=True)``) is 215 tiny ops a step, one per layer and per
    autograd node, with no unit repeating over half the step: they stack only across
    steps, a larger batch (4,096 points, 5.17x per point measured), which pays Adam's
    update once for all its points; the estimate takes the update out with the loop."""
    measured = truth("pt_train_pinn_burgers_autograd")["fix"]["speedup"]
    f = finding(analyzed("pt_train_pinn_burgers_autograd", k), "op_overhead_bound")
    assert f is not None
    assert abs(f.estimated_speedup / measured - 1) <= WITHIN, (f.estimated_speedup, measured)
    assert "pays the optimizer's update once" in f.summary


@pytest.mark.parametrize("k", [0, 1])
def test_a_loop_repeated_inside_the_step_leaves_the_update(k):
    """A loss computed box by box repeats its unit over most of the step: the loop is
    batched inside the step (the loss on the whole batch at once), the update stays."""
    measured = truth("pt_train_box_loss_loop")["fix"]["speedup"]
    f = finding(analyzed("pt_train_box_loss_loop", k), "op_overhead_bound")
    assert f is not None and "pays the optimizer's update once" not in f.summary
    assert abs(f.estimated_speedup / measured - 1) <= WITHIN, (f.estimated_speedup, measured)
