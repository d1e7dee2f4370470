"""A collective wait that is a peer's input: on DDP over gloo whose DataLoader workers fall
behind on both ranks, the rank that got its batch first waits in the all-reduce while the
other still waits for its own batch.  The verdict counts that part of the wait as input,
and the communication finding's confidence is the share of the wait it removes that is
not (``balance.peer_input``).  Where the slow rank's extra time is not a wait for its
batch (a batch built in Python on the main thread, uneven data), nothing moves."""

from __future__ import annotations

import json

import numpy as np
import pytest
from tracedata import corpus_capture

from sofa_gui.core.analysis.balance import peer_input
from sofa_gui.core.analysis.pipeline import analyze
from sofa_gui.core.analysis.verdict import PEER_INPUT, _side
from sofa_gui.core.importers import load_trace

STARVED = "pt_ddp_gloo_sampler_workers_starved"


def _analyzed(case: str, k: int):
    return analyze(load_trace(corpus_capture(case, k), use_cache=False))


def _communication(a):
    return next(f for f in a.findings if f.id == "communication_bound")


@pytest.mark.parametrize("k", [0, 1])
def test_a_wait_for_a_rank_still_waiting_for_its_batch_is_input(k):
    a = _analyzed(STARVED, k)
    truth = json.loads((corpus_capture(STARVED, k).parent / "truth.json").read_text())
    assert "communication" not in truth["shares"]  # the all-reduce alone: 1.4% of the step
    side, _, _ = _side(a.breakdown)
    through, beyond = peer_input(a.breakdown, side)
    steps = float((side.ends - side.starts).sum())
    # most of what the waiting rank waits beyond the collective's own cost is its peer's
    # wait for a batch: 0.10 and 0.27 of the step, of 0.15 and 0.36
    assert through.sum() > 0.6 * beyond.sum() and through.sum() > 0.08 * steps
    moved = {by: share for by, _, share, _ in a.verdict.moved}
    assert moved[PEER_INPUT] == pytest.approx(through.sum() / steps, abs=1e-3)
    assert a.verdict.shares["input"] > a.verdict.shares["communication"]
    assert "seen through the collective" in a.verdict.basis
    comm = _communication(a)
    # the collective is not what holds the step: the finding is no confident reading
    assert comm.confidence < 0.5
    assert "still waiting for its own batch" in comm.summary
    # the loader paces the job: a rank waits for its batch in every 3 steps in a row
    # (capture 2's last step takes a batch its worker had ready)
    assert a.verdict.bound == "input"


@pytest.mark.parametrize("case", ["pt_ddp_gloo_straggler", "pt_ddp_gloo_uneven_lengths"])
def test_a_straggler_that_waits_for_no_batch_keeps_its_communication(case):
    """The straggler builds its batch in Python on its main thread (no loader wait) or has
    longer sequences: the other rank's wait is communication, confidently."""
    for k in (0, 1):
        a = _analyzed(case, k)
        side, _, _ = _side(a.breakdown)
        through, beyond = peer_input(a.breakdown, side)
        assert not through.any() and beyond.sum() > 0
        assert PEER_INPUT not in {by for by, *_ in a.verdict.moved}
        assert a.verdict.bound == "communication"
        assert _communication(a).confidence >= 0.9


def test_one_rank_has_no_peer_to_wait_for():
    a = _analyzed("pt_ddp_gloo_straggler", 0)
    bd = a.breakdown
    side = bd.hosts[0]
    ranks, bd.ranks = bd.ranks, None
    try:
        through, beyond = peer_input(bd, side)
    finally:
        bd.ranks = ranks
    assert len(through) == len(side.starts) and not np.any(through) and not np.any(beyond)
