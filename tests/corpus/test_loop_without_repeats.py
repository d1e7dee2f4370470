"""A loop of tiny ops that repeats no unit (a detection loss looping over images and each
image's boxes, 2 to 8 of them), batched: the batched code still runs each kind of the
loop's calls once a step, forward and backward, each at its fixed cost; and the rest of
the step's convolution gradients are math, which runs warmer once the loop is gone by the
math's factor, not by per-op work's.  Loops whose repeats give one repeat to cost, and
TensorFlow's eager ops (a graph still runs each op), take no such cost."""

from __future__ import annotations

import functools
import json

import numpy as np
import pytest
from tracedata import corpus_capture as capture

from sofa_gui.core.analysis.findings.causes import self_times
from sofa_gui.core.analysis.findings.host_estimate import rest_math
from sofa_gui.core.analysis.pipeline import analyze
from sofa_gui.core.importers import load_trace
from sofa_gui.core.trace import Kind

WITHIN = 0.25
ONCE = "runs each kind of the loop's calls once a step"


@functools.cache
def analyzed(case: str, k: int = 0):
    t = load_trace(capture(case, k), use_cache=False)
    return t, analyze(t)


def finding(a, fid: str):
    return next((f for f in a.findings if f.id == fid), None)


def measured(case: str) -> float:
    truth = capture(case, 0).parent / "truth.json"
    return json.loads(truth.read_text())["fix"]["speedup"]


@pytest.mark.parametrize("k", [0, 1])
def test_a_batched_loss_without_repeats_pays_each_kind_of_call_once(k):
    """The per-box detection loss (tuned): no unit repeats (each image has its own number of
    boxes), so the batched loss is costed at its data work and one call of each of the
    loop's 39 kinds of calls a step; with the convolutions' gradients read as math, the
    estimate meets the batched loss measured without the profiler (2.2x)."""
    _, a = analyzed("pt_train_box_loss_loop", k)
    f = finding(a, "op_overhead_bound")
    assert f is not None and f.confidence >= 0.5
    assert ONCE in f.summary
    want = measured("pt_train_box_loss_loop")
    assert abs(f.estimated_speedup / want - 1) <= WITHIN, (f.estimated_speedup, want)


@pytest.mark.parametrize("case", ["pt_train_tiny_ops", "pt_train_per_sample_loss_loop"])
def test_a_loop_of_repeats_costs_one_repeat_not_each_kind_once(case):
    """Loops whose calls repeat a unit are costed at one repeat and the other repeats'
    matmul FLOPs: no call is counted once more."""
    _, a = analyzed(case)
    f = finding(a, "op_overhead_bound")
    assert f is not None and ONCE not in f.summary


def test_tensorflows_eager_ops_take_no_batched_calls_cost():
    """A Keras model called eagerly: ``tf.function`` runs every op in its graph, so no
    batched call replaces the loop and none is counted."""
    _, a = analyzed("tf_infer_eager_model_call")
    f = finding(a, "op_overhead_bound")
    assert f is not None and ONCE not in f.summary


def _conv_grads(t, a) -> tuple[float, float]:
    """(ns of the rest's math over the steady steps, ns of own time of the convolutions'
    gradients there)."""
    from sofa_gui.core.analysis.findings import make_context

    ctx = make_context(t, a.iterations, a.breakdown)
    host, r = ctx.bd.host, ctx.rows
    none = np.zeros(0, np.int64)
    math = rest_math(ctx, host, host.starts[r], host.ends[r], none, none)
    s = t.slices
    mine = t.lane_slices(host.lane)
    grads = mine[(s.kind[mine] == int(Kind.CPU_OP))
                 & np.isin(s.name[mine], t.name_ids(lambda n: n == "aten::convolution_backward"))
                 & ctx.in_steady(s.start[mine], host.starts, host.ends)]
    return math, float(self_times(ctx, grads).sum()) if len(grads) else 0.0


def test_a_convolutions_gradients_are_the_rests_math():
    """The detector's backward: ``convolution_backward`` holds 2 ms a step of its own time,
    the convolutions' math, which counts in the rest's math beside the forward's."""
    math, grads = _conv_grads(*analyzed("pt_train_box_loss_loop"))
    assert grads > 0 and math >= grads


def test_inference_has_no_convolution_gradients_in_its_math():
    """A batch-1 conv net served: no backward, the rest's math is the forward's alone."""
    math, grads = _conv_grads(*analyzed("pt_infer_batch1_convnet"))
    assert grads == 0 and math > 0
