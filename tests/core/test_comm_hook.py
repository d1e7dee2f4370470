"""The communication hook of a DDP run: the trace shows it where DDP copies each
gradient into its bucket undivided, and the hook's ops before each bucket's collective
are what turning it off saves."""

from __future__ import annotations

import pytest
from tracedata import corpus_capture, corpus_fix_speedup

from sofa_gui.core.analysis.findings.comm_hook import FIX_NAME
from sofa_gui.core.analysis.pipeline import analyze
from sofa_gui.core.importers import load_trace


def _communication(case: str, k: int):
    res = analyze(load_trace(corpus_capture(case, k), use_cache=False))
    return next(f for f in res.findings if f.id == "communication_bound")


@pytest.mark.parametrize("k", [0, 1])
def test_a_compression_hook_off_gains_its_casts_not_the_wait(k):
    """fp16 compression on gloo: the hook casts and divides each bucket on the main
    thread before its all-reduce; turning it off (1.06x measured) saves those ops, not
    the wait the finding's own estimate removes, and the compression remedy is worded
    as already applied."""
    f = _communication("pt_ddp_gloo_fp16_compress_hook", k)
    fix = f.fixes[0]
    assert fix.name == FIX_NAME and fix.gain == "removes"
    assert fix.estimate == pytest.approx(
        corpus_fix_speedup("pt_ddp_gloo_fp16_compress_hook"), rel=0.25)
    assert 1.0 < fix.estimate < f.estimated_speedup
    assert "communication hook" in f.summary and "`aten::to`" in f.summary
    assert not any("hooks for FP16/BF16" in x.text for x in f.fixes)
    assert any("already runs" in x.text for x in f.fixes)


@pytest.mark.parametrize("case", ["pt_ddp_gloo_small_buckets", "pt_ddp_gloo_straggler"])
def test_ddp_without_a_hook_shows_none(case):
    """DDP dividing its gradients as it copies them (`reducer::mul_out`): no hook, so
    no hook fix, and compression stays advised."""
    f = _communication(case, 0)
    assert all(x.name != FIX_NAME for x in f.fixes)
    assert "communication hook" not in f.summary
    assert any("hooks for FP16/BF16" in x.text for x in f.fixes)
