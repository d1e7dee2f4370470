"""Lane rows: the vectorised layout equals first fit in start order, slice by slice."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from sofa_gui.core import nesting
from sofa_gui.core.nesting import assign_depths, lane_depths


def first_fit(s, e) -> list[int]:
    """Reference: each slice on the lowest row whose last slice ended by its start."""
    rows: list[int] = []
    out = []
    for a, b in zip(s.tolist(), e.tolist()):
        for r, end in enumerate(rows):
            if end <= a:
                rows[r] = b
                out.append(r)
                break
        else:
            out.append(len(rows))
            rows.append(b)
    return out


def overlaps_on_a_row(s, e, d) -> bool:
    for r in np.unique(d).tolist():
        idx = np.flatnonzero(d == r)  # start order
        if np.any(e[idx[:-1]] > s[idx[1:]]):
            return True
    return False


def _sorted(start, dur):
    start, dur = np.asarray(start, np.int64), np.asarray(dur, np.int64)
    order = np.lexsort((-dur, start))
    return start[order], start[order] + dur[order]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 200), st.integers(0, 60)), min_size=1, max_size=80))
def test_rows_never_hold_overlapping_slices(pairs):
    s, e = _sorted([p[0] for p in pairs], [p[1] for p in pairs])
    d = lane_depths(s, e)
    assert len(d) == len(s) and d.min() >= 0
    assert not overlaps_on_a_row(s, e, d)
    nested = nesting._nested_depth(s, e)  # the layout when slices nest, else first fit
    expect = first_fit(s, e) if overlaps_on_a_row(s, e, nested) else nested.tolist()
    assert d.tolist() == expect


def _frames(rng, lo: int, hi: int, depth: int, out: list, limit: int = 3000) -> None:
    """Properly nested frames inside [lo, hi), like a Python sampler's stacks."""
    t = lo
    while hi - t > 8 and len(out) < limit:
        a = t + int(rng.integers(0, 4))
        b = min(hi, a + int(rng.integers(4, max(5, (hi - lo) // 3))))
        out.append((a, b - a))
        if depth < 12 and rng.random() < 0.7:
            _frames(rng, a + 1, b - 1, depth + 1, out, limit)
        t = b + int(rng.integers(0, 3))


def test_nested_lanes_get_their_stack_depth_without_the_python_loop(monkeypatch):
    monkeypatch.setattr(nesting, "_greedy_depth", None)  # must not be called
    rng = np.random.default_rng(3)
    frames: list = []
    _frames(rng, 0, 10 ** 6, 0, frames)
    s, e = _sorted(*zip(*frames))
    assert len(s) > 1000
    assert lane_depths(s, e).tolist() == first_fit(s, e)


def test_partial_overlaps_are_solved_by_first_fit_around_them(monkeypatch):
    rng = np.random.default_rng(5)
    frames: list = []
    _frames(rng, 0, 10 ** 6, 0, frames)
    frames = [(a, d + (int(rng.integers(1, 400)) if rng.random() < 0.01 else 0))
              for a, d in frames]  # 1% of frames outlive their parent
    s, e = _sorted(*zip(*frames))
    solved = []
    greedy = nesting._greedy_depth
    monkeypatch.setattr(nesting, "_greedy_depth",
                        lambda s, e, level=0: solved.append(len(s)) or greedy(s, e))
    d = lane_depths(s, e)
    assert not overlaps_on_a_row(s, e, d)
    assert d.tolist() == first_fit(s, e)
    assert 0 < sum(solved) < len(s)  # only the tangled parts slice by slice


def test_assign_depths_per_lane_and_row_counts():
    start = np.array([0, 0, 5, 5, 6, 20])
    dur = np.array([10, 4, 10, 1, 8, 1])
    lane = np.array([0, 1, 0, 1, 0, 1], np.int32)
    order = np.lexsort((-dur, start))
    depth, rows = assign_depths(start[order], dur[order], lane[order], 2)
    by_lane = {0: [], 1: []}
    for i, d in zip(order.tolist(), depth.tolist()):
        by_lane[int(lane[i])].append(d)
    assert by_lane == {0: [0, 1, 2], 1: [0, 0, 0]}
    assert rows.tolist() == [3, 1]


def test_open_intervals_at_each_start_by_their_definition():
    """``_nested_depth``: slices sorted before each one that are still open at its start;
    zero-length slices (common in real traces) sort last among equal starts."""
    from sofa_gui.core.nesting import _nested_depth

    rng = np.random.default_rng(11)
    for _ in range(400):
        n = int(rng.integers(1, 50))
        s = rng.integers(0, 15, n)
        d = rng.integers(0, 6, n) * (rng.random(n) < 0.6)
        order = np.lexsort((-d, s))
        s, e = s[order], (s + d)[order]
        want = [int((e[:i] > s[i]).sum()) for i in range(n)]
        assert _nested_depth(s, e).tolist() == want
