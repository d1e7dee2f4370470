"""Anchors.starts is vectorised: a Python median per occurrence made
1e6 events with a short period take ~30 s. Same starts as the per-group reference."""

from __future__ import annotations

import numpy as np
import pytest
from iterations_synth import training_stream

from sofa_gui.core.analysis.iterations import pattern
from sofa_gui.core.analysis.iterations.pattern import find_anchors


def _reference(votes, voter, split, need, agree) -> np.ndarray:
    """The former loop: per group, the median of votes close to the group's median."""
    bounds = np.r_[0, split, len(votes)]
    out = []
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        if hi - lo < need:
            continue
        mid = float(np.median(votes[lo:hi]))
        close = np.abs(votes[lo:hi] - mid) <= agree
        if len(np.unique(voter[lo:hi][close])) >= need:
            out.append(int(np.rint(np.median(votes[lo:hi][close]))))
    return np.array(out, np.int64)


@pytest.mark.parametrize("seed", range(40))
def test_agreed_starts_match_the_per_group_reference(seed):
    rng = np.random.default_rng(seed)
    voters = int(rng.integers(1, 8))
    period = float(rng.choice([2, 3, 7.5, 50, 1000]))
    n = int(rng.integers(0, 80)) * voters
    votes = np.sort(rng.normal(0, 1, n).cumsum() * rng.choice([0.1, 1, period])
                    + rng.integers(0, 5, n) * period)
    voter = rng.integers(0, voters, n)
    split = np.flatnonzero(np.diff(votes) > 0.3 * period) + 1
    need = max(min(2, voters), int(np.ceil(0.5 * voters)))
    agree = max(2.0, 0.1 * period)
    got = pattern._agreed_starts(votes, voter, split, need, agree, voters)
    assert np.array_equal(got, _reference(votes, voter, split, need, agree))


def test_short_period_starts_need_no_median_per_occurrence(monkeypatch):
    rng = np.random.default_rng(3)
    st = training_stream(rng, 2, 20_000, 2)
    anchors = find_anchors(st.seq, 2)
    assert anchors is not None
    calls = []
    real = np.median
    monkeypatch.setattr(np, "median", lambda *a, **k: calls.append(1) or real(*a, **k))
    starts = anchors.starts(0.0)
    assert len(starts) >= 19_000
    assert len(calls) <= 4, f"{len(calls)} medians for {len(starts)} occurrences"


def test_rows_of_neighbours_are_tested_like_any_axis_1():
    from sofa_gui.core.analysis.iterations.pattern import NEIGHBOURS, _any_in_row

    rng = np.random.default_rng(5)
    for p in (0.0, 0.02, 0.3):
        m = rng.random((1000, NEIGHBOURS)) < p
        assert (_any_in_row(m) == m.any(axis=1)).all()
        cols = rng.random((1000, 16)) < p  # not contiguous rows of 8: the plain path
        assert (_any_in_row(cols[:, ::2]) == cols[:, ::2].any(axis=1)).all()
