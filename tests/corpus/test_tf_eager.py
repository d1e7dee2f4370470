"""TensorFlow run eagerly, read on its corpus captures: a scorer calling a Keras MLP with
``model(x, training=False)`` and no ``tf.function`` dispatches every op from Python, its
kernel run inside the dispatch; the step is a loop of tiny ops that ``tf.function``
removes whole, however few of them one call makes (about 60 a call, where a loop of a
model's tiny ops otherwise needs 200 a step).  A step that calls a compiled function is
no such loop: its eager ops around the call stay under the usual count.  An eager
dispatch is timed as the op it runs (``EagerLocalExecute: MaxPoolGrad`` inside a
``TFE_Py_FastPathExecute_C``): a Keras ``fit`` run eagerly for a NumPy metric dispatches
convolution and pooling gradients of milliseconds, math that ``tf.function`` keeps, among
its tiny ops."""

from __future__ import annotations

import json

import pytest
from tracedata import CORPUS, corpus_analysis, findings_by_id

from sofa_gui.core.analysis.findings import make_context
from sofa_gui.core.analysis.findings.eager_ops import tf_eager_step
from sofa_gui.core.analysis.findings.run_rules import MIN_TINY_PER_STEP


def truth(case: str) -> dict:
    return json.loads((CORPUS / case / "truth.json").read_text())


def _eager_step(case: str, k: int = 0) -> bool:
    t, a = corpus_analysis(case, k)
    ctx = make_context(t, a.iterations, a.breakdown)
    return tf_eager_step(ctx, ctx.bd.host)


@pytest.mark.parametrize("k", [0, 1])
def test_a_keras_model_called_eagerly_is_host_overhead_fixed_by_tf_function(k):
    """Each step is 4 calls (grouped by what the step releases after its last call): the
    thread returns to the loop after each call, so the removed ops keep it away one call
    at a time; measured without the profiler, per-call overhead 0.82 and 5.7x for the
    call wrapped in ``tf.function``."""
    t = truth("tf_infer_eager_model_call")
    _, a = corpus_analysis("tf_infer_eager_model_call", k)
    assert a.verdict.bound == "host_overhead"
    f = findings_by_id(a)["op_overhead_bound"]
    assert f.share >= 0.5 and f.confidence >= 0.5
    assert "TensorFlow ops run eagerly" in f.summary and "Batching them" not in f.summary
    assert "under 200" not in f.summary
    measured = t["fix"]["speedup"]
    assert measured / 1.25 <= f.estimated_speedup <= measured * 1.25
    assert any("tf.function" in x.text for x in f.fixes)


@pytest.mark.parametrize("k", [0, 1])
def test_one_call_makes_too_few_tiny_ops_for_the_usual_loop(k):
    """What the eager reading changes: one call's ops (a step of one call) are a loop only
    because ``tf.function`` removes them all at once; this scorer's step makes 4 calls."""
    _, a = corpus_analysis("tf_infer_eager_model_call", k)
    f = findings_by_id(a)["op_overhead_bound"]
    per_step = int(f.summary.split(" tiny framework ops")[0].replace(",", ""))
    calls = a.iterations.pattern["calls_per_step"]
    assert calls == 4 and per_step / calls < MIN_TINY_PER_STEP
    assert _eager_step("tf_infer_eager_model_call", k)


def test_keras_fit_run_eagerly_reads_the_same_way():
    """``compile(run_eagerly=True)``: the fit's step runs op by op too (measured: 27.3x for
    ``run_eagerly=False``)."""
    _, a = corpus_analysis("tf_fit_run_eagerly")
    assert a.verdict.bound == "host_overhead" and _eager_step("tf_fit_run_eagerly")
    f = findings_by_id(a)["op_overhead_bound"]
    assert "TensorFlow ops run eagerly" in f.summary
    measured = truth("tf_fit_run_eagerly")["fix"]["speedup"]
    assert measured / 1.25 <= f.estimated_speedup <= measured * 1.25


@pytest.mark.parametrize("case", ["tf_tape_per_sample_readback", "tf_infer_labels_readback"])
def test_eager_ops_beside_a_compiled_step_are_no_eager_step(case):
    """A ``tf.function`` step with eager reads after it (hundreds of eager dispatches a
    step): the step is compiled, and the reads are sync."""
    _, a = corpus_analysis(case)
    assert not _eager_step(case)
    assert a.verdict.bound == "sync"
    assert "op_overhead_bound" not in findings_by_id(a)


@pytest.mark.parametrize("k", [0, 1])
def test_an_eager_dispatch_of_a_long_kernel_is_math_not_a_tiny_op_held(k):
    """Measured without the profiler: the metric in TF ops and ``run_eagerly=False``,
    5.60x; host overhead 0.82 by what it saves."""
    _, a = corpus_analysis("tf_fit_numpy_metric_eager", k)
    assert a.verdict.bound == "host_overhead"
    f = findings_by_id(a)["op_overhead_bound"]
    assert 5.60 * 0.75 <= f.estimated_speedup <= 5.60 * 1.25  # 23x, its kernels "held" tiny ops
    assert "descheduled" not in f.summary
    assert a.verdict.shares["compute"] > 0.25  # the convolutions' kernels stay math
