"""Per-call iterations whose cycle opens with a compiled call of its own, on real captures
of the diagnosis corpus (``tests/data/corpus``): a decoder step called once per output
token, a request's encoder call every 32 of them that also opens the profiled window, is
each request's own start (no periodic extra); an evaluation's compiled function every few
training steps, not called before the first, stays extra work.  A test is skipped when the
corpus is not checked out."""

from __future__ import annotations

import pytest
from tracedata import corpus_analysis


def analyzed(case: str, k: int = 0):
    """The analysis of the ``k``-th capture of a corpus case."""
    return corpus_analysis(case, k)[1]


@pytest.mark.parametrize("k", [0, 1])
def test_a_requests_encoder_call_opening_each_cycle_is_no_extra(k):
    """The request's encoder call, the rarest compiled call between decoder steps, marks
    each request's step (3 captured); nothing of it reads as periodic extra work."""
    a = analyzed("tf_infer_seq2seq_token_calls", k)
    assert len(a.iterations) == 3
    assert not any(x for x in a.iterations.periodic_extras if not x.per_call)
    assert not any(f.id == "periodic_extra" for f in a.findings)
    assert a.verdict.bound == "host_overhead"


def test_an_evaluation_every_few_steps_stays_extra():
    a = analyzed("tf_fit_validation_epochs")
    assert a.iterations.periodic_extras and not a.iterations.periodic_extras[0].per_call
    f = next(f for f in a.findings if f.id == "periodic_extra")
    assert f.confidence >= 0.5
