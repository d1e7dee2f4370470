"""Inference made of calls of a compiled TensorFlow function that are mostly their fixed
cost (a SavedModel's ``serve`` called once per request), on real captures: the calls'
time with none of the model's ops running on the pool threads is per-request overhead,
with the batching fix; a batched call whose ops fill it, and a call whose work the pool
threads do not show (an XLA cluster), are not.

Cases of the diagnosis corpus (``tests/data/corpus``) are used; a test is skipped when the
corpus is not checked out.
"""

from __future__ import annotations

import numpy as np
import pytest
from tracedata import corpus_context as analyzed

from sofa_gui.core.analysis.findings.batching import small_batch
from sofa_gui.core.analysis.findings.compiled_calls import (
    FIXED_MAX_NS,
    FIXED_SHARE,
    compiled_calls,
)

SERVED = "tf_infer_savedmodel_per_request"


@pytest.mark.parametrize("k", [0, 1])
def test_a_saved_model_called_per_request_is_mostly_the_calls_fixed_cost(k):
    t, _, ctx = analyzed(SERVED, k)
    calls = compiled_calls(ctx, ctx.bd.host)
    assert calls is not None and calls.name == "restored_function_body"
    assert calls.per_step == pytest.approx(1.0)  # nothing in the trace groups the requests
    assert FIXED_SHARE * calls.call_ns < calls.fixed_ns <= FIXED_MAX_NS
    assert 0 < calls.work_ns < calls.fixed_ns / 4  # the model's ops: a few matmuls
    # of which what grows with the input is each op's time over its fastest calls'
    assert 0 < calls.grow_ns < 0.75 * calls.work_ns
    s = t.slices
    assert np.all(s.lane[calls.calls] == ctx.bd.host.lane)  # the caller's events


@pytest.mark.parametrize("k", [0, 1])
def test_per_request_calls_are_host_overhead_with_the_batching_fix(k):
    _, a, ctx = analyzed(SERVED, k)
    assert a.verdict.bound == "host_overhead" and a.verdict.share > 0.8
    sb = small_batch(ctx)
    assert sb is not None and sb.calls is not None and sb.models_requests(ctx)
    f = next(f for f in a.findings if f.id == "op_overhead_bound")
    assert f.confidence >= 0.5 and "compiled function restored_function_body" in f.summary
    assert "batched into one call" in f.summary and f.estimated_speedup > 2
    assert "that grows with the input" in f.summary
    # one serve call on a step's 16 requests measures 13.9x; the 64 calls captured are
    # merged (nothing groups a step's calls), their ops' growing part added per request
    assert 13.9 * 0.75 <= f.estimated_speedup <= 13.9 * 1.25
    assert f.fixes[0].text.startswith("Batch the requests")
    # compiling the step keeps the call's fixed cost: not offered
    assert any(fix.fact == "compiled" for fix, _ in f.hidden_fixes)
    assert not any(fix.fact == "compiled" for fix in f.fixes)


@pytest.mark.parametrize("case", ["tf_infer", "tf_infer_xla_jit", "tf_infer_labels_readback"])
def test_calls_whose_work_fills_them_or_lies_elsewhere_are_not_per_call_cost(case):
    """A batched predict's ops fill its calls; an XLA cluster's work is not on the pool
    threads (its uncovered time is far over a call's fixed cost); a step that is mostly
    reads of its result is not made of calls."""
    _, _, ctx = analyzed(case)
    assert compiled_calls(ctx, ctx.bd.host) is None
