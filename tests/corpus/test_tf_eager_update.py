"""TensorFlow variables updated eagerly beside a compiled step, read on corpus captures: a
``tf.function`` GradientTape step, then a moving average of the 14 weights kept by hand in
Python (``ema.assign(decay * ema + (1 - decay) * w)``, about nine eager dispatches a
variable).  The ops are nearly all elementwise arithmetic on variables and their reads
and writes: one loop that ``tf.function`` over the update removes whole, so it counts from
as few ops as an eager step's (126 a step, under the 200 a model's tiny-op loop needs).
The Python numbers converted into those expressions (``decay``, ``1 - decay``) set state:
they are no batch built in Python, so the time before them is no input.  Measured without
the profiler: host overhead 0.66, 2.71x for the update in one ``tf.function``."""

from __future__ import annotations

import pytest
from tracedata import corpus_analysis, corpus_context, corpus_fix_speedup, findings_by_id

from sofa_gui.core.analysis import host_side as H
from sofa_gui.core.analysis.findings.eager_ops import tf_eager_update

EMA = "tf_tape_ema_weights_by_hand"


def _update(case: str, k: int = 0) -> bool:
    _, _, ctx = corpus_context(case, k)
    return tf_eager_update(ctx, ctx.bd.host)


def _conversions(case: str, k: int = 0) -> int:
    """The main thread's conversions read as a batch built in Python."""
    t, _, ctx = corpus_context(case, k)
    return len(H._batch_conversions(t, t.lane_slices(ctx.bd.host.lane))[0])


@pytest.mark.parametrize("k", [0, 1])
def test_an_ema_kept_by_hand_in_eager_python_is_host_overhead(k):
    _, a = corpus_analysis(EMA, k)
    assert a.verdict.bound == "host_overhead" and a.verdict.share >= 0.5
    f = findings_by_id(a)["op_overhead_bound"]
    assert "beside the step's compiled function" in f.summary
    assert "Batching them" not in f.summary
    measured = corpus_fix_speedup(EMA)
    assert measured / 1.25 <= f.estimated_speedup <= measured * 1.25
    assert _update(EMA, k)


@pytest.mark.parametrize("k", [0, 1])
def test_python_numbers_in_a_variable_update_are_no_batch(k):
    """Each variable's ``decay * ema + (1 - decay) * w`` converts a Python number that
    only arithmetic on variables' reads separates from the ``AssignVariableOp``: not a
    batch built in Python (it read 10.7% input, 0.04 measured)."""
    _, a = corpus_analysis(EMA, k)
    assert _conversions(EMA, k) == 0
    assert "input_pipeline_bound" not in findings_by_id(a)
    assert a.verdict.shares["input"] < 0.02


@pytest.mark.parametrize("case", ["tf_infer_eager_model_call", "tf_tape_numpy_convert"])
def test_a_batch_converted_for_the_model_stays_input(case):
    """The converted tensor goes into a matmul (a model called eagerly) or a compiled
    step: a batch."""
    assert _conversions(case) > 0


def test_a_hand_written_momentum_update_reads_the_same_way():
    """Layer-wise learning rates applied variable by variable (``m.assign(0.9 * m + g)``,
    ``v.assign_sub(lr * m)``): the same kind of loop, its fix the same."""
    assert _update("tf_tape_layerwise_lr_eager")
    f = findings_by_id(corpus_analysis("tf_tape_layerwise_lr_eager")[1])["op_overhead_bound"]
    assert "beside the step's compiled function" in f.summary


@pytest.mark.parametrize("case", ["tf_tape_per_sample_readback", "tf_tape_summary_every_step",
                                  "tf_fit_sample_weight_imbalanced", "tf_infer_labels_readback",
                                  "tf_infer_eager_model_call"])
def test_other_eager_ops_are_no_state_update(case):
    """Eager reads of results, summaries written, Keras' own ops between steps, a model
    run eagerly (no compiled function, and inference)."""
    assert not _update(case)


def test_keras_fit_that_names_no_gradient_op_is_training():
    """Keras 3 runs ``fit`` as ``multi_step_on_iterator``, as it runs ``evaluate``; an
    embedding's gradient is an ``UnsortedSegmentSum``: only the optimizer's
    ``AssignSubVariableOp`` on the weights says the run trains."""
    for k in (0, 1):
        mode = corpus_analysis("tf_fit_generator_tokenized_text", k)[1].run.get("mode")
        assert mode.value == "training" and "AssignSubVariableOp" in mode.proof


@pytest.mark.parametrize("case", ["tf_infer", "tf_infer_text_vectorize_map",
                                  "tf_infer_savedmodel_per_request"])
def test_inference_decrements_no_variable(case):
    mode = corpus_analysis(case)[1].run.get("mode")
    assert mode.value == "inference"
