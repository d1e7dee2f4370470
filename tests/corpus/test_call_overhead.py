"""A compiled step too small for its call, read on real captures: a small jitted JAX step
called once per batch pays a dispatch and a hand-back per call around a program of a
fraction of a millisecond (host overhead, with several steps per call as the fix), and one
called once per item of a Python loop with each result read (an ensemble trained member by
member) pays them per item (host overhead, with one call over the items as the fix, no read
loop), and Keras's train function called once per small batch pays them, its Optional
result read after each call, per batch (host overhead, with ``steps_per_execution``),
while compiled steps whose programs do far more per call than their calls cost,
calls through JAX's Python dispatch (a host callback's) and requests answered one call at
a time (the small-batch check's) are not read so, nor reads after a single call.

Cases of the diagnosis corpus (``tests/data/corpus``) are used; a test is skipped when the
corpus is not checked out.
"""

from __future__ import annotations

import pytest
from tracedata import corpus_capture
from tracedata import corpus_context as analyzed

from sofa_gui.core.analysis.findings import make_context
from sofa_gui.core.analysis.findings.call_overhead import (
    FIXED_SHARE,
    SMALL_WORK,
    compiled_call_costs,
)
from sofa_gui.core.analysis.findings.read_rules import read_loops
from sofa_gui.core.analysis.pipeline import analyze
from sofa_gui.core.importers import load_trace

SCAN = "jax_train_scan_steps"
#: Compute-bound compiled steps (JAX and TF, training and inference) whose calls' fixed
#: cost is small beside their programs' work.
COMPUTE = ["jax_train_jit", "jax_infer_jit", "jax_train_adam_mlp", "jax_train_pickle_checkpoint",
           "jax_train_device_put_float64", "tf_jit_step_noise", "tf_infer_xla_jit",
           "tf_fit_steps_per_execution", "tf_keras_fit_cached", "tf_gradient_tape",
           "tf_fit_tfrecord_interleave", "tf_tape_tfrecord_cache", "tf_infer",
           "tf_fit_multi_output_loss_weights", "tf_fit_checkpoint_save_freq",
           "tf_fit_jit_compile_cnn", "tf_fit_frozen_base_transfer"]
#: Keras 3 ``fit`` on NumPy arrays at ``batch_size=16``: one call of the train function a
#: batch around well under a millisecond of math.
NUMPY_FIT = "tf_fit_numpy_small_batch"


def finding(a, fid: str):
    return next((f for f in a.findings if f.id == fid), None)


@pytest.mark.parametrize("k, fixed, work", [(0, 0.39, 0.70), (1, 0.42, 0.81)])
def test_a_small_jitted_step_pays_a_dispatch_and_a_hand_back_per_call(k, fixed, work):
    """The calls' fixed cost is 0.39-0.42 of the step and 0.70-0.81 of their programs'
    run, over the check's 0.25 and 0.5."""
    _, _, ctx = analyzed(SCAN, k)
    sc = compiled_call_costs(ctx)
    assert sc is not None and sc.name.startswith("PjitFunction(")
    assert sc.per_step == pytest.approx(1.0)
    assert sc.dispatch > 0 and sc.handback > 0 and sc.python > 0
    assert sc.fixed / sc.wall == pytest.approx(fixed, abs=0.005) and fixed > FIXED_SHARE
    assert sc.fixed / sc.program == pytest.approx(work, abs=0.005) and work > SMALL_WORK
    assert sc.program < 0.6 * sc.wall  # about half the step: the program's own work


@pytest.mark.parametrize("k", [0, 1])
def test_the_calls_fixed_cost_is_host_overhead_with_several_steps_per_call(k):
    """The verdict reads the calls' fixed cost as host overhead (on the first capture beside
    a warm-up step, whose steady part has the steps' make-up); the estimate is the step as
    its program alone (its per-op work without the profiler's cost), within 25% of the
    2.04x that 8 steps in one lax.scan measure."""
    _, a, _ = analyzed(SCAN, k)
    assert a.verdict.bound == "host_overhead"
    f = finding(a, "call_overhead_bound")
    assert f is not None and f.confidence >= 0.5
    assert 2.04 * 0.75 <= f.estimated_speedup <= 2.04 * 1.25
    assert "PjitFunction(<lambda>)" in f.summary and "several steps in one call" in f.summary
    assert any(x.name == "several steps per call" and "lax.scan" in x.text for x in f.fixes)
    assert not any("steps_per_execution" in x.text for x in f.fixes)  # a TF fix


@pytest.mark.parametrize("k", [0, 1])
def test_keras_reads_each_calls_optional_result_as_its_hand_back(k):
    """Keras's train function returns its outputs as an Optional, read after every call
    with two eager ops (``has_value()``, ``get_value()``): that read is the call's
    hand-back, and with it the calls' fixed cost is over the check's 0.25 of the step and
    0.5 of the programs' run (0.23-0.25 and 0.49-0.50 on the dispatch alone)."""
    _, _, ctx = analyzed(NUMPY_FIT, k)
    sc = compiled_call_costs(ctx)
    assert sc is not None and sc.name == "multi_step_on_iterator"
    assert sc.per_step == pytest.approx(1.0) and not sc.per_item
    assert 0.03 * sc.wall < sc.handback < 0.08 * sc.wall  # no wait: the Optional's reads
    assert sc.dispatch < FIXED_SHARE * sc.wall or sc.dispatch < SMALL_WORK * sc.program
    assert sc.fixed > FIXED_SHARE * sc.wall and sc.fixed > SMALL_WORK * sc.program
    # the loop's work between the calls (its Python, the callbacks' eager ops) is outside
    # the programs too: about half the step
    assert 0.45 < sc.outside / sc.wall < 0.6


@pytest.mark.parametrize("k", [0, 1])
def test_a_keras_fit_of_small_batches_is_host_overhead_with_steps_per_execution(k):
    """The verdict reads the time outside the train function's programs as host overhead
    (0.61 measured by what steps_per_execution=16 saves); the estimate is the step as its
    programs alone, without the profiler's per-op cost, within 25% of the 2.76x measured."""
    _, a, _ = analyzed(NUMPY_FIT, k)
    assert a.verdict.bound == "host_overhead"
    f = finding(a, "call_overhead_bound")
    assert f is not None and f.confidence >= 0.5 and 0.45 < f.share < 0.6
    assert 2.76 * 0.75 <= f.estimated_speedup <= 2.76 * 1.25 and not f.estimate_floor
    assert "multi_step_on_iterator" in f.summary
    assert any(x.name == "several steps per call" and "steps_per_execution" in x.text
               for x in f.fixes)
    assert not any("lax.scan" in x.text for x in f.fixes)  # a JAX fix


@pytest.mark.parametrize("case", ["tf_keras_fit_cached", "tf_fit_multi_output_loss_weights"])
def test_a_keras_fit_whose_programs_do_much_per_call_reads_its_results_and_stays_compute(case):
    """The same Optional reads after each call of a fit whose programs take several
    milliseconds: counted in the calls' fixed cost, which stays under a third of them."""
    _, a, ctx = analyzed(case)
    sc = compiled_call_costs(ctx)
    assert sc is not None and sc.name == "multi_step_on_iterator" and sc.handback > 0
    assert sc.fixed < SMALL_WORK * sc.program
    assert finding(a, "call_overhead_bound") is None and a.verdict.bound == "compute"


@pytest.mark.parametrize("case", COMPUTE)
def test_compiled_steps_that_do_much_per_call_stay_compute(case):
    _, a, ctx = analyzed(case)
    sc = compiled_call_costs(ctx)
    assert sc is None or sc.fixed < SMALL_WORK * sc.program
    assert finding(a, "call_overhead_bound") is None
    assert a.verdict.bound == "compute"


def test_calls_through_jaxs_python_dispatch_are_the_callbacks_round_trip():
    """A jitted step with a host callback goes through JAX's Python dispatch every call:
    that time is the callback's (host_callback_round_trip), not the call's fixed cost."""
    _, a, ctx = analyzed("jax_train_metrics_callback")
    assert compiled_call_costs(ctx) is None
    assert finding(a, "call_overhead_bound") is None
    assert finding(a, "host_callback_round_trip") is not None


@pytest.mark.parametrize("case", ["tf_infer_savedmodel_per_request", "jax_infer_per_sample_jit"])
def test_requests_answered_a_call_each_are_batched_not_merged_as_steps(case):
    """A call per request is the small-batch check's (batch the requests) or more calls a
    step than a compiled step makes."""
    _, a, _ = analyzed(case)
    assert finding(a, "call_overhead_bound") is None
    assert finding(a, "op_overhead_bound") is not None


ENSEMBLE = "jax_train_ensemble_loop"


@pytest.mark.parametrize("k", [0, 1])
def test_one_programs_call_per_item_with_each_result_read_is_batched_into_one_call(k):
    """An ensemble trained member by member: 16 calls of one jitted step a step, each
    member's loss read with float before the next call.  The reads sit in a loop of one
    program's calls, so they are no read loop: the calls' fixed cost (the waits among it)
    is host overhead, the fix one call over the members (jax.vmap), its estimate a lower
    bound within 25% of the 2.75x measured (the losses read once after the loop: 1.99x)."""
    _, a, ctx = analyzed(ENSEMBLE, k)
    assert not len(read_loops(ctx).starts)
    sc = compiled_call_costs(ctx)
    assert sc.per_item and sc.per_step == pytest.approx(16.0)
    assert a.verdict.bound == "host_overhead"
    assert a.verdict.shares["sync"] == 0.0
    assert finding(a, "host_reads_in_loop") is None
    assert finding(a, "op_overhead_bound") is None  # the runtime's waits are the calls'
    f = finding(a, "call_overhead_bound")
    assert f is not None and f.confidence >= 0.5 and f.estimate_floor
    assert 2.75 * 0.75 <= f.estimated_speedup <= 2.75
    assert "loop over 16 items" in f.summary and "jax.vmap" in f.summary
    assert [x.name for x in f.fixes] == ["one call over the items"]
    assert "jax.vmap" in f.fixes[0].text


@pytest.mark.parametrize("k", [0, 1])
def test_one_call_a_step_is_no_loop_over_items(k):
    """One jitted call a step (its loss read after it) merges steps, not items."""
    _, a, ctx = analyzed(SCAN, k)
    assert not compiled_call_costs(ctx).per_item
    f = finding(a, "call_overhead_bound")
    assert not f.estimate_floor
    assert "one call over the items" not in [x.name for x in f.fixes]


@pytest.mark.parametrize("k", [0, 1])
def test_reads_after_one_jitted_step_stay_a_read_loop(k):
    """One jitted step, then a loop of per-example loss reads with no call between them:
    a read loop (sync), however many reads a step."""
    _, a, ctx = analyzed("jax_train_loss_readback", k)
    assert len(read_loops(ctx).starts)
    sc = compiled_call_costs(ctx)
    assert sc is None or not sc.per_item
    assert a.verdict.bound == "sync"
    assert finding(a, "host_reads_in_loop") is not None
    assert finding(a, "call_overhead_bound") is None


@pytest.mark.parametrize("k", [0, 1])
def test_a_wait_while_the_pool_threads_still_work_is_no_hand_back(k):
    """A ``jax.pmap`` step over two CPU devices returns once both devices' programs are
    handed to their threads; the read of the first replica's loss (``loss[0]``, an eager
    gather) then waits some 10 ms while both devices still run their parts and the
    all-reduce. That wait is for the programs' work, not the result's hand-back: only its
    tail after the pool threads' last work counts, and the step stays compute."""
    _, a, ctx = analyzed("jax_train_pmap_pmean_two_devices", k)
    sc = compiled_call_costs(ctx)
    assert sc is not None and sc.handback < 0.02 * sc.wall
    assert sc.fixed < FIXED_SHARE * sc.wall
    assert finding(a, "call_overhead_bound") is None
    assert a.verdict.bound == "compute"


def _fit_with_fetches_between_calls():
    """(analysis, context) of the Keras fit of small batches with each conversion of a
    batch between the train function's calls (``convert_to_tensor``, its ``tf.constant``
    inside) named as a tf.data fetch (``IteratorGetNext``): main-thread waits between the
    calls that the breakdown holds as input."""
    t = load_trace(corpus_capture(NUMPY_FIT, 0), use_cache=False)
    s = t.slices
    fetch = len(t.names)
    t.names.append("IteratorGetNext")
    s.name[s.name == t.names.index("convert_to_tensor")] = fetch
    a = analyze(t)
    return a, make_context(t, a.iterations, a.breakdown, a.run)


def test_waits_between_the_calls_that_another_category_holds_are_not_moved_again():
    """Fetches between the calls are input in the breakdown: the finding's share, which
    the verdict moves from compute to host overhead, leaves them out (else the verdict
    counts them twice, as input and as host overhead), and so does the estimate (several
    steps per call still fetch every batch); without them (the capture as it is) the
    share is all the time outside the programs."""
    a, ctx = _fit_with_fetches_between_calls()
    sc = compiled_call_costs(ctx)
    assert sc is not None and 0.04 * sc.wall < sc.kept <= sc.held
    f = finding(a, "call_overhead_bound")
    assert f is not None and a.verdict.bound == "host_overhead"
    assert f.share == pytest.approx((sc.outside - sc.held) / sc.wall)
    assert a.verdict.shares["input"] >= sc.kept / sc.wall  # held as input, and kept there
    _, plain, pctx = analyzed(NUMPY_FIT, 0)
    psc = compiled_call_costs(pctx)
    assert psc.held == psc.kept == 0
    p = finding(plain, "call_overhead_bound")
    assert p.share == pytest.approx(psc.outside / psc.wall)
    assert f.estimated_speedup < p.estimated_speedup  # the fetches stay in the step
