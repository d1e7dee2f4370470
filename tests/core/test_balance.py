"""What balancing a straggler rank gains: the balanced step of :mod:`sofa_gui.core.analysis.
balance` on hand-made ranks, then on the diagnosis corpus' two DDP stragglers (one whose extra
time is not work, one made by uneven data), in ``analyze`` of the rank folder and in
``fleet``, against the speed-up measured without the profiler (``truth.json``)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from tracedata import corpus_capture

from sofa_gui.core.analysis.balance import MOVES, NOT_WORK, SHAPE_WORDS, balance
from sofa_gui.core.analysis.findings.context import amdahl
from sofa_gui.core.analysis.pipeline import analyze
from sofa_gui.core.importers import load_trace

MS = 1e6


def _job(work, rest, coll, iters=3):
    """Ranks (rows) of a synchronous job, ns per iteration: every rank's step is the
    slowest own time plus the collective; a rank waits the difference in it."""
    work, rest = np.asarray(work, float) * MS, np.asarray(rest, float) * MS
    own = work + rest
    step = own.max() + coll * MS
    d = np.full((len(own), iters), step)
    c = (step - own)[:, None] * np.ones(iters)
    return list(range(len(own))), d, c, work[:, None] * np.ones(iters)


def test_extra_work_moves_to_the_other_ranks():
    # rank 3 does 4x the ops of the others (more data): balanced, each does the mean
    bal = balance(*_job([10, 10, 10, 40], [1, 1, 1, 1], coll=2))
    assert bal.slow == 3 and bal.shape == MOVES
    assert bal.balanced / 3 == pytest.approx((17.5 + 1 + 2) * MS)
    assert bal.speedup == pytest.approx(43 / 20.5)
    assert bal.moved / 3 == pytest.approx(22.5 * MS) and bal.removed == 0


def test_extra_time_with_no_op_goes_with_its_cause():
    # rank 1 sleeps 100 ms a step: the ops and the collective's own cost stay
    bal = balance(*_job([2, 2], [0.5, 100.5], coll=1))
    assert bal.shape == NOT_WORK and bal.slow == 1
    assert bal.balanced / 3 == pytest.approx((2 + 0.5 + 1) * MS)
    assert bal.speedup == pytest.approx(103.5 / 3.5)
    assert "goes only when its cause goes" in bal.basis() and "Rank 1" in bal.basis()


def test_missing_iterations_and_single_ranks():
    ranks, d, c, w = _job([10, 30], [1, 1], coll=2, iters=4)
    d[0, 1] = np.nan  # rank 0 lacks iteration 1: only iterations every rank has count
    assert balance(ranks, d, c, w).iterations == 3
    assert balance([0], d[:1], c[:1], w[:1]) is None
    d[0, :] = np.nan
    assert balance(ranks, d, c, w) is None


# -- the corpus' stragglers ------------------------------------------------------------------
CASES = {"pt_ddp_gloo_straggler": NOT_WORK, "pt_ddp_gloo_uneven_lengths": MOVES}
#: The first fix shown for each shape says what to do about it.
FIRST_FIX = {NOT_WORK: "find what it waits on", MOVES: "shuffle the samples"}


def _measured(case: str) -> dict:
    folder = corpus_capture(case)
    return json.loads((folder.parent / "truth.json").read_text())["fix"]


def _within_rounds(est: float, fix: dict) -> bool:
    """Inside the measured rounds' range, widened by the corpus' 25% tolerance."""
    rounds = fix["speedup_rounds"]
    return min(rounds) / 1.25 <= est <= max(rounds) * 1.25


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("k", [0, 1])
def test_analyze_estimates_the_balanced_step_of_the_rank_folder(case, k):
    t = load_trace(corpus_capture(case, k), use_cache=False)
    a = analyze(t)
    comm = next(f for f in a.findings if f.id == "communication_bound")
    fix = _measured(case)
    # the whole wait is not what balancing removes: the collective's cost (a tenth of the
    # straggler case's step) stays and the extra work of uneven data still runs, on the
    # other ranks
    assert comm.estimated_speedup < 0.95 * amdahl(comm.share)
    assert _within_rounds(comm.estimated_speedup, fix), (comm.estimated_speedup, fix)
    shape = CASES[case]
    assert FIRST_FIX[shape] in comm.fixes[0].text
    assert "With the ranks balanced, the step would be" in comm.summary
    if shape == MOVES:  # the held-out case: judged here, no constant is fitted to it
        assert comm.estimated_speedup == pytest.approx(fix["speedup"], rel=0.25)


@pytest.mark.parametrize("case", sorted(CASES))
def test_fleet_gives_the_same_estimate_and_fixes_by_shape(case):
    from sofa_gui.core.fleet.cross import cross_rank
    from sofa_gui.core.fleet.summary import summarize

    folder = corpus_capture(case)
    sums, paths = [], sorted(folder.glob("rank*.json*"))
    for r, p in enumerate(paths):
        tr = load_trace(p, use_cache=False)
        sums.append(summarize(r, str(p), tr, analyze(tr)))
    res = cross_rank(sums)
    top = res.findings[0]
    assert top.id == "straggler_holds_collectives" and top.ranks == [1]
    a = analyze(load_trace(folder, use_cache=False))
    comm = next(f for f in a.findings if f.id == "communication_bound")
    assert top.estimated_speedup == pytest.approx(comm.estimated_speedup, rel=0.05)
    assert FIRST_FIX[CASES[case]] in " ".join(f.text for f in top.fixes[:2])
    # each rank alone reads its wait as removable; the straggler finding says what is
    assert not any(f.id == "fleet_communication_bound" for f in res.findings)
    # the cause as the balance model reads it, and only the fixes of a PyTorch job
    assert res.stragglers[0].cause == CASES[case]
    assert f"the excess is {SHAPE_WORDS[CASES[case]]}" in top.summary
    assert res.facts.value("framework") == "pytorch"
    assert {f.framework for f in top.fixes} <= {"pytorch", "any"}
    assert all("this run is pytorch" in why for f, why in top.hidden_fixes
               if f.framework in ("tensorflow", "jax"))
