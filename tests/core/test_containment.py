"""What lies inside what: the one reading (:func:`intervals.last_started`) behind a time
inside intervals, a slice inside a slice of its own lane, and the parent a slice one
level inside one is read against, checked against plain-Python definitions on intervals
that nest, tie, touch, and have no length or a negative one (a damaged trace's times)."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from sofa_gui.core.analysis.intervals import FAR_PAST, covered, enclosing, last_started

SPANS = st.lists(st.tuples(st.integers(0, 60), st.integers(-3, 25), st.integers(0, 2),
                           st.integers(0, 2)), max_size=25)


def slices(spans):
    """Per-slice arrays in start order, as a trace holds them."""
    spans = sorted(spans, key=lambda x: x[0])
    start = np.array([a for a, *_ in spans], np.int64)
    end = start + np.array([d for _, d, *_ in spans], np.int64)
    lane = np.array([ln for *_, ln, _ in spans], np.int64)
    depth = np.array([dp for *_, dp in spans], np.int64)
    return start, end, lane, depth


@given(SPANS, st.lists(st.integers(-5, 90), max_size=20))
def test_a_time_is_covered_when_an_interval_holds_it(spans, times):
    start, end, _, _ = slices(spans)
    got = covered(np.array(times, np.int64), start, end)
    assert got.tolist() == [any(a <= t < b for a, b in zip(start, end)) for t in times]


@given(SPANS, st.lists(st.integers(-5, 90), max_size=20))
def test_the_last_started_interval_and_the_latest_end_so_far(spans, times):
    start, end, _, _ = slices(spans)
    at, reach = last_started(start, end, np.array(times, np.int64))
    for t, k, r in zip(times, at.tolist(), reach.tolist()):
        before = [j for j in range(len(start)) if start[j] <= t]
        assert k == (max(before, key=lambda j: (start[j], j)) if before else -1)
        assert r == (max(end[j] for j in before) if before else FAR_PAST)


@given(SPANS, st.data())
def test_a_slice_inside_a_parent_of_its_own_lane(spans, data):
    start, end, lane, _ = slices(spans)
    n = len(start)
    parents = np.array(data.draw(st.lists(st.integers(0, max(n - 1, 0)), max_size=n))
                       if n else [], np.int64)
    idx = np.arange(n, dtype=np.int64)
    inside = enclosing(start, end, lane, parents, idx)[1] >= end[idx]
    want = [any(lane[p] == lane[i] and start[p] <= start[i] and end[i] <= end[p]
                for p in parents.tolist()) for i in idx.tolist()]
    assert inside.tolist() == want


@given(SPANS, st.data())
def test_the_parent_named_is_the_last_started_on_the_slices_lane(spans, data):
    """The last of its lane's parents to start at or before the slice (the innermost, when
    parents nest): the one a slice one level inside is read against."""
    start, end, lane, _ = slices(spans)
    n = len(start)
    parents = np.unique(np.array(data.draw(st.lists(st.integers(0, max(n - 1, 0)),
                                                    max_size=n)) if n else [], np.int64))
    idx = np.arange(n, dtype=np.int64)
    at = enclosing(start, end, lane, parents, idx)[0]
    for i, p in zip(idx.tolist(), at.tolist()):
        mine = [q for q in parents.tolist() if lane[q] == lane[i] and start[q] <= start[i]]
        assert p == (max(mine, key=lambda q: (start[q], q)) if mine else -1)
