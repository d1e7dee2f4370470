"""The shared interval helpers of the trace rules against brute force."""

import numpy as np

from sofa_gui.core.analysis.findings.devices import clip_to_rows
from sofa_gui.core.analysis.findings.work import outermost
from sofa_gui.core.analysis.intervals import union


def test_clip_to_rows_matches_clipping_every_interval_to_every_row():
    """One binary search per row gives the same pieces as clipping all intervals to each
    row (what _dispatch_idle did per iteration); empty rows give none."""
    rng = np.random.default_rng(1)
    for _ in range(300):
        s = rng.integers(0, 1000, 30)
        ws, we = union(s, s + rng.integers(1, 80, 30))
        lo = np.sort(rng.integers(0, 1000, 8))
        hi = lo + rng.integers(0, 200, 8)
        a, b = clip_to_rows(ws, we, lo, hi)
        want = []
        for lo_, hi_ in zip(lo.tolist(), hi.tolist()):
            x, y = np.clip(ws, lo_, hi_), np.clip(we, lo_, hi_)
            want += [(int(p), int(q)) for p, q in zip(x, y) if q > p]
        assert sorted(zip(a.tolist(), b.tolist())) == sorted(want)


def test_outermost_drops_nested_slices_and_with_disjoint_overlapping_ones():
    starts = np.array([0, 2, 5, 9, 12, 14])
    ends = np.array([10, 4, 12, 11, 20, 15])
    idx = np.arange(6)
    assert outermost(starts, ends, idx).tolist() == [0, 2, 4]  # 1, 3, 5 lie inside others
    assert outermost(starts, ends, idx, disjoint=True).tolist() == [0, 4]  # 2 overlaps 0
    assert outermost(starts, ends, idx[::-1]).tolist() == [0, 2, 4]  # order of idx free
    assert outermost(starts, ends, np.zeros(0, np.int64)).tolist() == []
