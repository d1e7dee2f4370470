"""The Python a served request runs outside the framework calls that answer it (taking it
from a queue, handing its answer back), which batching the requests keeps paying once per
request: the batching estimate counts it and says the figure is a lower bound, where the
gap between requests stands out from the gaps between a request's own calls.

Cases of the diagnosis corpus (``tests/data/corpus``) are used; a test is skipped when the
corpus is not checked out.
"""

from __future__ import annotations

import json

import pytest
from tracedata import DATA
from tracedata import corpus_context as analyzed

from sofa_gui.core.analysis.findings import batch_estimate as B
from sofa_gui.core.analysis.findings.request_gaps import between_ns

CORPUS = DATA / "corpus"
US = 1000


def measured(case: str) -> float:
    return json.loads((CORPUS / case / "truth.json").read_text())["fix"]["speedup"]


def small_batch_finding(case: str, k: int):
    f = next(f for f in analyzed(case, k)[1].findings if f.id == "op_overhead_bound")
    assert f.title == "Framework overhead: small-batch inference"
    return f


@pytest.mark.parametrize("k", [0, 1])
def test_a_queue_fed_service_keeps_each_requests_python_between_its_calls(k):
    """A service takes 64 requests a step from a ``queue.Queue`` one at a time, each
    through its own MLP forward, its answer set on a ``Future``: 25-40 µs between one
    request's last call and the next one's first, against 4-6 µs between two of its
    calls.  Micro-batching still takes and answers every request, so that time stays per
    request; counted as gone, the estimate read 26-30x against 6.0x measured."""
    case = "pt_infer_queue_one_at_a_time"
    _, _, ctx = analyzed(case, k)
    fix = B.batch_fix(ctx, ctx.bd.host, served=True)
    assert fix is not None and fix.batch == 64 and fix.between > 15 * US
    f = small_batch_finding(case, k)
    assert f.estimate_floor and "a lower bound" in f.summary
    assert 3.0 < f.estimated_speedup <= measured(case)


def test_the_python_between_requests_is_counted_for_served_requests_only():
    """Repeats that are no requests served (training's per-sample loop, whose Python goes
    with the loop) keep nothing between them."""
    _, _, ctx = analyzed("pt_infer_queue_one_at_a_time")
    assert B.batch_fix(ctx, ctx.bd.host).between == 0.0


@pytest.mark.parametrize("case", ["pt_infer_online_requests", "pt_infer_decode_unbatched",
                                  "pt_infer_greedy_decode", "pt_infer_vit_batch1",
                                  "pt_infer_sliding_window_signal"])
def test_requests_whose_gap_is_one_more_call_gap_keep_nothing_between_them(case):
    """Requests read from a tensor, decodes and images one at a time: the gap between two
    requests is no longer than twice the gap between two calls of one (a loop's turn),
    so no Python of the request's own is counted and the estimate is no lower bound."""
    _, _, ctx = analyzed(case)
    host = ctx.bd.host
    b = B.repeated_blocks(ctx, host, B.median_row(ctx, host))[0]
    assert between_ns(ctx, b.ops, b.period, b.count) == 0.0
    assert B.batch_fix(ctx, host, served=True).between == 0.0
    assert not small_batch_finding(case, 0).estimate_floor


def test_a_request_made_from_python_numbers_counts_its_copy_not_its_gap():
    """A traced scorer fed ``torch.tensor([features])`` per request: the gap between
    requests is that list walked into a tensor, which the estimate already counts per
    input (the batched tensor copies every request's numbers), so it is not counted
    again."""
    _, _, ctx = analyzed("pt_infer_traced_per_request")
    host = ctx.bd.host
    b = B.repeated_blocks(ctx, host, B.median_row(ctx, host))[0]
    assert between_ns(ctx, b.ops, b.period, b.count) > 0
    fix = B.batch_fix(ctx, host, served=True)
    assert fix.added.fill_ns > 0 and fix.between == 0.0
