"""Flow endpoints find the slices that start exactly at their time by a short walk from
the first one; the count must be what a second binary search gives."""

from __future__ import annotations

import numpy as np

from sofa_gui.core.importers.chrome.flows import _MAX_SAME_START, _same_start


def test_equal_starts_counted_as_a_binary_search_would():
    rng = np.random.default_rng(7)
    start = np.sort(np.concatenate([rng.integers(0, 50, 400), np.full(100, 60),
                                    np.full(3, 99)]))  # a long run, a run at the very end
    ts = np.concatenate([rng.integers(-5, 105, 300), [60, 99, 100, -1]])
    lo = np.searchsorted(start, ts, side="left")
    want = np.minimum(np.searchsorted(start, ts, side="right") - lo, _MAX_SAME_START)
    assert (_same_start(start, lo, ts) == want).all()
    assert _same_start(start, lo, ts)[-4:].tolist() == [_MAX_SAME_START, 3, 0, 0]
    assert _same_start(start[:0], lo[:0], ts[:0]).tolist() == []
