"""A dtype conversion the program calls is a copy into a new buffer: a surrogate model
whose float64 weights are cast with ``v.float()`` on every request (8 MB a matrix)
spends most of its step converting, memory traffic the copies' finding holds and the
small-batch reading no longer claims as the calls' fixed cost.  Autocast's casts, inside
the op they feed, and the casts of a bf16 run made by hand stay their ops' compute."""

from __future__ import annotations

import pytest
from tracedata import corpus_analysis, findings_by_id


@pytest.mark.parametrize("k", [0, 1])
def test_weights_cast_every_request_are_memory_copies(k):
    _, a = corpus_analysis("pt_infer_float64_weights_cast_per_call", k)
    assert a.verdict.bound == "memory_copies"  # measured: 0.58, the cast once at load 5.76x
    f = findings_by_id(a)["memory_copy_bound"]
    assert any("aten::to" in c.label for c in f.causes)
    small = findings_by_id(a).get("op_overhead_bound")
    assert small is None or small.share < f.share


@pytest.mark.parametrize("case", ["pt_train_autocast_bf16", "pt_train_bf16_manual_casts",
                                  "pt_infer_bf16", "pt_infer_float64_mlp"])
def test_casts_inside_ops_or_small_ones_are_no_copies(case):
    _, a = corpus_analysis(case, 0)
    assert a.verdict.bound == "compute"
    assert "memory_copy_bound" not in findings_by_id(a)
