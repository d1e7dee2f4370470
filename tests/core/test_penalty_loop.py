"""An L2 penalty summed in Python over the parameters (``sum(p.pow(2.0).sum() for p in
model.parameters())`` added to the loss) is a loop of tiny ops on the parameters' shapes:
the op-overhead finding offers the optimizer's ``weight_decay`` for it, with its own
estimate, and the run stays compute-bound where the model's matmuls are the step.  A
moving average of the weights, per-parameter gradient norms, a clipped step and a
training step with no penalty show no penalty.  Real captures of the diagnosis corpus; a
test is skipped when the corpus is not checked out."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from tracedata import corpus_case

from sofa_gui.core.analysis.findings.batch_estimate import large_matmuls
from sofa_gui.core.analysis.findings.penalty_loop import PENALTY_FIX
from sofa_gui.core.analysis.findings.work import input_dims
from sofa_gui.core.analysis.pipeline import analyze
from sofa_gui.core.importers import load_trace
from sofa_gui.core.trace import Kind

WITHIN = 0.25


def test_the_l2_penalty_loop_gets_weight_decay_and_the_run_stays_compute_bound():
    """17 Linear layers of 128 on batches of 64, 34 parameter tensors: a pow, a sum and an
    add per tensor forward and their backward each step.  ``SGD(weight_decay=...)`` is
    measured 1.31x; the 64-row matmuls (2.1 MFLOP each) are the step's math, so the
    verdict is compute on both captures (compute 0.67, host overhead 0.25 measured)."""
    truth, captures = corpus_case("pt_train_l2_param_loop")
    measured = truth["fix"]["speedup"]
    for capture in captures:
        a = analyze(load_trace(capture, use_cache=False))
        assert a.verdict.bound == "compute"
        f = next(f for f in a.findings if f.id == "op_overhead_bound")
        fix = next(x for x in f.fixes if x.name == PENALTY_FIX)
        assert "weight_decay" in fix.text
        assert abs(fix.estimate / measured - 1) <= WITHIN, fix.estimate
        assert "pow, sum and add per parameter" in fix.estimate_why


@pytest.mark.parametrize("case", ["pt_train_ema_param_loop", "pt_train_grad_norms_item",
                                  "pt_train_clip_onecycle", "pt_train_adamw_foreach"])
def test_no_penalty_no_weight_decay(case):
    _, captures = corpus_case(case)
    a = analyze(load_trace(captures[0], use_cache=False))
    for f in a.findings:
        assert PENALTY_FIX not in {x.name for x in f.fixes}, f.id
        hidden = {x.name: why for x, why in f.hidden_fixes}
        if f.id == "op_overhead_bound" and PENALTY_FIX in hidden:
            assert "no L2 penalty" in hidden[PENALTY_FIX]


def test_a_large_matmul_is_no_tiny_op():
    """The L2 case's hidden ``aten::linear`` calls (64x128 by 128x128, 2.1 MFLOP) are
    large matmuls; its output layer's (128 to 10, 0.16 MFLOP) and its ``aten::pow`` calls
    are not."""
    _, captures = corpus_case("pt_train_l2_param_loop")
    trace = load_trace(captures[1], use_cache=False)
    s = trace.slices
    ops = np.flatnonzero(s.kind == int(Kind.CPU_OP))
    names = np.array([trace.name_of(int(j)) for j in ops])
    large = large_matmuls(SimpleNamespace(trace=trace), ops)
    linear = np.flatnonzero(names == "aten::linear")
    square = np.array([input_dims(SimpleNamespace(trace=trace), int(ops[k]))[1] == [128, 128]
                       for k in linear])
    assert square.any() and (~square).any()
    assert large[linear[square]].all() and not large[linear[~square]].any()
    assert not large[names == "aten::pow"].any() and (names == "aten::pow").any()
