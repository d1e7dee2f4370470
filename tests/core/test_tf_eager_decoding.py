"""TensorFlow input made eagerly by the loop, on real captures of the diagnosis corpus
(``tests/data/corpus``): a constant TensorFlow converts for an op's own argument (a
reduction's axes, a fill's value) is no batch conversion, while a batch converted and
passed to the compiled step stays input; files decoded, resized and scaled eagerly one by
one before a compiled model call are that call's input, while eager model ops without a
decoding op stay host overhead.  A test is skipped when the corpus is not checked out."""

from __future__ import annotations

import pytest
from tracedata import corpus_analysis


def analyzed(case: str, k: int = 0):
    """The analysis of the ``k``-th capture of a corpus case."""
    return corpus_analysis(case, k)[1]


def finding(a, rule: str):
    return next((f for f in a.findings if f.id == rule), None)


@pytest.mark.parametrize("k", [0, 1])
def test_a_reductions_axes_constant_is_no_batch(k):
    """``tf.reduce_all(done)`` after each decoder call converts its axes (``tf.constant``
    then ``All``): no input is read."""
    a = analyzed("tf_infer_seq2seq_token_calls", k)
    assert a.verdict.shares["input"] < 0.01
    f = finding(a, "input_pipeline_bound")
    assert f is None or f.confidence < 0.5


@pytest.mark.parametrize("k", [0, 1])
def test_a_batch_converted_for_the_step_stays_input(k):
    a = analyzed("tf_tape_numpy_convert", k)
    assert a.verdict.bound == "input"
    assert finding(a, "input_pipeline_bound") is not None


@pytest.mark.parametrize("k", [0, 1])
def test_eager_decoding_before_the_compiled_call_is_input(k):
    """16 JPEGs decoded and resized eagerly, then one compiled model call: input 0.81."""
    a = analyzed("tf_infer_eager_image_preprocess", k)
    assert a.verdict.bound == "input"
    assert abs(a.verdict.shares["input"] / 0.805 - 1) <= 0.25
    f = finding(a, "input_pipeline_bound")
    assert f is not None and f.confidence >= 0.5
    g = finding(a, "op_overhead_bound")
    assert g is None or g.confidence < 0.5


@pytest.mark.parametrize("k", [0, 1])
def test_eager_decodings_tf_data_estimate_keeps_the_kernels(k):
    """In a parallel map the ops' kernels stay, their dispatch and Python go: 2.87x
    measured."""
    f = finding(analyzed("tf_infer_eager_image_preprocess", k), "input_pipeline_bound")
    fix = next(x for x in f.fixes if x.name == "parallel map")
    assert abs(fix.estimate / 2.872 - 1) <= 0.25, fix.estimate
    assert "kernels" in fix.estimate_why


@pytest.mark.parametrize("case", ["tf_infer_eager_model_call", "tf_tape_layerwise_lr_eager",
                                  "tf_infer_char_generation_eager"])
def test_eager_model_ops_without_decoding_stay_host_overhead(case):
    a = analyzed(case)
    assert a.verdict.bound == "host_overhead"
    assert a.verdict.shares["input"] < 0.05
