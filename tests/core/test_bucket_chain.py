"""The bucket-size fix of the communication finding: a bucket size sends the same bytes,
so it gains at most the time by which the collectives' chain ends later than its own
length after DDP's first gradient copy."""

from __future__ import annotations

import pytest
from tracedata import corpus_capture, corpus_fix_speedup

from sofa_gui.core.analysis.findings.bucket_chain import BACK_TO_BACK, FIX_NAME
from sofa_gui.core.analysis.pipeline import analyze
from sofa_gui.core.importers import load_trace


def _communication(case: str, k: int):
    res = analyze(load_trace(corpus_capture(case, k), use_cache=False))
    f = next(f for f in res.findings if f.id == "communication_bound")
    return f, next(x for x in f.fixes if x.name == FIX_NAME)


@pytest.mark.parametrize("k", [0, 1])
def test_back_to_back_collectives_leave_a_bucket_size_nothing_to_gain(k):
    """1 MB buckets on gloo: the 9 all-reduces of each step run back to back from the
    first gradient on, so the default buckets (1.02x measured) cannot shorten the wait;
    the finding's own estimate, the wait removed, stays what fewer bytes would gain."""
    f, fix = _communication("pt_ddp_gloo_small_buckets", k)
    assert 1.0 <= fix.estimate < BACK_TO_BACK
    measured = corpus_fix_speedup("pt_ddp_gloo_small_buckets")
    assert fix.estimate == pytest.approx(measured, rel=0.25)
    assert f.estimated_speedup > 1.7
    assert "back to back" in f.summary and "at most" in fix.estimate_why


@pytest.mark.parametrize("k", [0, 1])
def test_a_bucket_filled_at_the_end_of_backward_leaves_the_chain_room(k):
    """One 84 MB bucket: its all-reduce starts only when backward has made every
    gradient, long after DDP's first copy, so the chain's start can move and the
    estimate says how much at most; the finding does not call the collectives back to
    back."""
    f, fix = _communication("pt_ddp_gloo_large_allreduce", k)
    assert fix.estimate > 1.3
    assert "back to back" not in f.summary
