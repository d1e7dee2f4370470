"""Readings that one corpus case each proves, checked where their cause is absent: programs
close to that case (the same framework, the events the reading counts present) whose
captures show something else.  Each test names what makes its cases near misses and
asserts that the reading, and every word the advisor would say from it, stays away:

* a Keras mixed policy read from casts: float32 programs that cast as much (a tf.data map
  casting each record, fits and tape steps casting their input);
* anomaly detection: backwards of hundreds of node evaluations that check none for NaN;
* a TensorFlow step run eagerly: eager dispatches by the dozen a step beside a compiled
  function (a per-batch callback, per-sample predictions, a ``py_function`` map);
* JAX's training state updated op by op: a training run dispatching op by op between a
  compiled step's calls to make its batch (draws, slices, conversions: not arithmetic);
* a tf.data pipeline's new pass: repeated, uncached pipelines whose iterators are made
  without a pass starting in a step outside the steady state;
* a compiled step too small for its call: compiled steps whose calls' fixed cost is
  measured but belongs to another bound (retracing, conversions, read-backs, input);
* float64 compute: float64 ops beside float32 models (losses, metrics, schedules).

Cases of the diagnosis corpus (``tests/data/corpus``) are used; a test is skipped when the
corpus is not checked out.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from tracedata import CORPUS, corpus_analysis, corpus_context, findings_by_id

from sofa_gui.core.analysis.findings.anomaly_mode import nan_checks
from sofa_gui.core.analysis.findings.call_overhead import compiled_call_costs
from sofa_gui.core.analysis.findings.eager_ops import (
    MIN_DISPATCHES,
    TF_EAGER,
    measure,
    tf_eager_step,
)
from sofa_gui.core.analysis.findings.float64_compute import FIX_NAME as FLOAT32_FIX
from sofa_gui.core.analysis.findings.float64_compute import float64_ns
from sofa_gui.core.analysis.findings.input_estimate import pass_rows, pipeline_of
from sofa_gui.core.analysis.grad_facts import evaluations
from sofa_gui.core.analysis.precision_facts import _MIN_CASTS

CAPTURES = [0, 1]


def truth_bound(case: str) -> str:
    return json.loads((CORPUS / case / "truth.json").read_text())["bound"]


def said(a, words: str) -> bool:
    """Whether any finding's summary, or any of its fixes, says ``words``."""
    return any(words in f.summary or any(words in x.text or words == x.name for x in f.fixes)
               for f in a.findings)


#: Float32 TensorFlow programs with casts by the dozen: a tf.data map casting each record
#: (as many casts as variable reads, off the executor threads), fits and a tape step.
CASTING = ["tf_tape_serial_map", "tf_fit_validation_epochs", "tf_fit_steps_per_execution",
           "tf_tape_numpy_convert"]


@pytest.mark.parametrize("k", CAPTURES)
@pytest.mark.parametrize("case", CASTING)
def test_casts_of_a_float32_program_are_no_mixed_policy(case, k):
    t, a = corpus_analysis(case, k)
    casts = np.count_nonzero(np.isin(t.slices.name, t.name_ids("Cast".__eq__)))
    assert casts >= _MIN_CASTS  # enough casts to be read at all
    assert a.run.value("precision") != "low"


#: PyTorch training loops whose backward evaluates many nodes: tiny ops, a loss per
#: sample, variable lengths, a deep stack, per-parameter gradient norms read back.
BACKWARD_HEAVY = ["pt_train_tiny_ops", "pt_train_per_sample_loss_loop",
                  "pt_train_variable_length", "pt_train_deep_stack_batch8",
                  "pt_train_grad_norms_item"]


@pytest.mark.parametrize("k", CAPTURES)
@pytest.mark.parametrize("case", BACKWARD_HEAVY)
def test_a_backward_that_checks_nothing_is_no_anomaly_mode(case, k):
    t, a, ctx = corpus_context(case, k)
    assert len(evaluations(t)) >= 500  # node evaluations, as anomaly mode's run
    assert a.run.value("anomaly_detection") != "on"
    assert not len(nan_checks(ctx, ctx.bd.host))
    assert "anomaly_detection_on" not in findings_by_id(a)
    assert not any(by == "anomaly_detection_on" for by, *_ in a.verdict.moved)
    assert not said(a, "anomaly detection off")


#: TensorFlow steps that call a compiled function and dispatch eager ops beside it by the
#: dozen: a callback per batch, predictions per sample, a ``py_function`` map, a slow map.
EAGER_BESIDE_COMPILED = ["tf_fit_per_batch", "tf_predict_per_sample",
                         "tf_fit_pyfunc_parallel_map", "tf_keras_fit_slow_map"]


@pytest.mark.parametrize("k", CAPTURES)
@pytest.mark.parametrize("case", EAGER_BESIDE_COMPILED)
def test_eager_dispatches_beside_a_compiled_function_are_no_eager_step(case, k):
    t, a, ctx = corpus_context(case, k)
    host = ctx.bd.host
    eager = np.isin(t.slices.name, t.name_ids(TF_EAGER.match))
    assert eager.sum() >= MIN_DISPATCHES * len(ctx.rows)  # as many as an eager step's
    assert not tf_eager_step(ctx, host)
    assert not said(a, "TensorFlow ops run eagerly")
    assert a.verdict.bound == truth_bound(case)


@pytest.mark.parametrize("k", CAPTURES)
def test_a_batch_made_op_by_op_in_a_training_run_is_no_state_update(k):
    """Every other condition of the update reading holds (a training run, ops dispatched
    one at a time between the calls of a step compiled once a step): the programs, which
    draw, slice, convert and stack, are not nearly all elementwise arithmetic."""
    _, a, ctx = corpus_context("jax_train_jnp_augment", k)
    d = measure(ctx)
    assert a.run.value("mode") == "training"
    assert d is not None and d.compiled_step and d.per_step >= MIN_DISPATCHES
    assert not d.updates_state
    assert not said(a, "jit the update with the step")
    assert not said(a, "update of the state")


#: Repeated, uncached tf.data pipelines whose iterators the trace shows being made.
REPEATED_UNCACHED = ["tf_tape_serial_map", "tf_fit_pyfunc_parallel_map",
                     "tf_keras_fit_slow_map", "tf_fit_jpeg_directory", "tf_fit_validation_epochs"]


@pytest.mark.parametrize("k", CAPTURES)
@pytest.mark.parametrize("case", REPEATED_UNCACHED)
def test_a_repeated_uncached_pipeline_starts_no_pass_without_a_step_waiting_for_it(case, k):
    t, a, ctx = corpus_context(case, k)
    p = pipeline_of(ctx, ctx.bd.host)
    assert p is not None and not p.cache
    assert any("Repeat" in st.kind for st in p.stages.values())
    assert len(t.name_ids(lambda n: n.startswith("MakeIterator::")))
    assert not len(pass_rows(ctx))
    assert not said(a, "new pass over the data")


#: Compiled steps whose calls' fixed cost is measured but is another bound's time: a
#: function traced again every step, NumPy batches converted per call, read-backs after
#: each call, a JAX step recompiled for its learning rate, a generator's input.
CALLS_OF_OTHER_BOUNDS = ["tf_tape_retrace_python_lr", "tf_tape_numpy_convert",
                         "tf_infer_labels_readback", "jax_train_static_lr_recompile",
                         "jax_train_text_generator"]


@pytest.mark.parametrize("k", CAPTURES)
@pytest.mark.parametrize("case", CALLS_OF_OTHER_BOUNDS)
def test_a_compiled_calls_cost_beside_another_bound_is_no_call_overhead(case, k):
    _, a, ctx = corpus_context(case, k)
    assert compiled_call_costs(ctx) is not None  # the calls and their cost are measured
    assert "call_overhead_bound" not in findings_by_id(a)
    assert not any(by == "call_overhead_bound" for by, *_ in a.verdict.moved)
    assert not said(a, "several steps per call")
    assert a.verdict.bound == truth_bound(case)


#: Float32 PyTorch models beside float64 ops that take time (a loss or metric in double,
#: NumPy doubles turned into tensors, a schedule's arithmetic).
FLOAT64_ASIDE = ["pt_ddp_gloo_large_allreduce", "pt_ddp_gloo_straggler",
                 "pt_train_ema_param_loop", "pt_train_clip_onecycle", "pt_train_variable_length"]


@pytest.mark.parametrize("k", CAPTURES)
@pytest.mark.parametrize("case", FLOAT64_ASIDE)
def test_float64_ops_beside_a_float32_model_are_no_float64_compute(case, k):
    _, a, ctx = corpus_context(case, k)
    assert float64_ns(ctx, ctx.bd.host) > 0  # float64 ops in the steady steps
    assert a.run.value("precision") != "fp64"
    assert not said(a, FLOAT32_FIX)
