"""Nesting rows (depth) of the slices on each lane; overlaps are kept, never dropped.

The layout is first fit in start order (each slice on the lowest row free at
its start), computed without a Python loop where that rule reduces to "slices
still open at the start": properly nested or disjoint slices. Real traces have
a few partial overlaps (B starts inside A and ends after it: a runtime call
outliving its operator, a step annotation cutting through Python frames); only
the clusters of overlapping slices around them are solved slice by slice, after
peeling off the enclosing slices that span a whole cluster.
"""

from __future__ import annotations

import numpy as np

_MAX_SPLITS = 64  # nested peel/split levels before a range is solved slice by slice
_SMALL = 256  # clusters this small are solved slice by slice (cheaper than numpy calls)


def assign_depths(start, dur, lane, n_lanes: int) -> tuple[np.ndarray, np.ndarray]:
    """Nesting row of each slice and the number of rows per lane.

    Input must be sorted by (start, -dur).
    """
    n = len(start)
    depth = np.zeros(n, np.int16)
    lane_depth = np.zeros(n_lanes, np.int64)
    if n == 0:
        return depth, lane_depth
    end = start + dur
    small = n_lanes < np.iinfo(np.int16).max  # then a radix sort: linear time
    by_lane = np.argsort(lane.astype(np.int16) if small else lane, kind="stable")
    ls, le, ll = start[by_lane], end[by_lane], lane[by_lane]
    bounds = np.searchsorted(ll, np.arange(n_lanes + 1))
    d = np.zeros(n, np.int64)
    for lid in range(n_lanes):
        lo, hi = bounds[lid], bounds[lid + 1]
        if hi - lo <= 1:
            continue
        s, e = ls[lo:hi], le[lo:hi]
        if np.all(e[:-1] <= s[1:]):
            continue  # flat lane: everything on row 0
        d[lo:hi] = lane_depths(s, e)
    depth[by_lane] = np.minimum(d, np.iinfo(np.int16).max)
    np.maximum.at(lane_depth, lane, depth.astype(np.int64) + 1)
    return depth, lane_depth


def lane_depths(s: np.ndarray, e: np.ndarray, level: int = 0) -> np.ndarray:
    """Rows of one lane's slices (sorted by start, then longest first): first fit."""
    d = _nested_depth(s, e)
    bad = _row_conflicts(s, e, d)
    if not len(bad):
        return d  # nested or disjoint (or harmless overlaps): the layout is valid as is
    if level >= _MAX_SPLITS:
        return _greedy_depth(s, e)
    # first fit around every partial overlap, not only where rows clash
    bad = np.union1d(bad, np.flatnonzero(_outliving(e, d)))
    # clusters: runs of slices linked by overlap; first fit restarts at each one
    reach = np.maximum.accumulate(e)
    heads = np.flatnonzero(np.concatenate([[True], s[1:] >= reach[:-1]]))
    ends = np.append(heads[1:], len(s))
    tangled = np.unique(np.searchsorted(heads, bad, side="right") - 1)
    lo, hi = heads[tangled], ends[tangled]
    small = hi - lo < _SMALL
    if small.any():  # all small clusters in one loop: rows are all free again at each
        idx = _ranges(lo[small], hi[small])
        d[idx] = _greedy_depth(s[idx], e[idx])
    for a, b in zip(lo[~small].tolist(), hi[~small].tolist()):
        d[a:b] = _cluster_depths(s[a:b], e[a:b], level)
    return d


def _ranges(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """The concatenated index ranges [lo, hi)."""
    n = hi - lo
    first = np.cumsum(n) - n
    return np.repeat(lo - first, n) + np.arange(int(n.sum()))


def _cluster_depths(s: np.ndarray, e: np.ndarray, level: int) -> np.ndarray:
    """First fit for one cluster: leading slices that span all the rest take rows 0..k-1."""
    n = len(s)
    later = np.maximum.accumulate(e[::-1])[::-1]  # latest end from each slice on
    spans = e[:-1] >= later[1:]
    k = int(np.argmin(spans)) if not spans.all() else n - 1
    if k == 0:
        return _greedy_depth(s, e)
    out = np.empty(n, np.int64)
    out[:k] = np.arange(k)
    out[k:] = lane_depths(s[k:], e[k:], level + 1) + k
    return out


def _nested_depth(s: np.ndarray, e: np.ndarray) -> np.ndarray:
    """Open intervals at each start, among those sorted before it.

    ``ended`` counts all slices with end <= start; the only ones sorted at or
    after a slice that can qualify are zero-length slices at the same start
    (they sort last in their start group), so those are taken back out.
    """
    ended = np.searchsorted(np.sort(e, kind="stable"), s, side="right")  # e: nearly sorted
    out = np.arange(len(s)) - ended
    zero = np.flatnonzero(e == s)
    if len(zero):  # only start groups holding zero-length slices need the correction
        zs = s[zero]
        v = zs[np.concatenate([[True], zs[1:] != zs[:-1]])]
        g_lo, g_hi = np.searchsorted(s, v, "left"), np.searchsorted(s, v, "right")
        n_zero = np.searchsorted(zs, v, "right") - np.searchsorted(zs, v, "left")
        at = _ranges(g_lo, g_hi)
        hi, nz = np.repeat(g_hi, g_hi - g_lo), np.repeat(n_zero, g_hi - g_lo)
        out[at] += hi - np.maximum(at, hi - nz)  # zero-length slices sorted at or after
    return np.maximum(out, 0)


def _by_row(d: np.ndarray) -> np.ndarray:
    """Indexes ordered by row, then position (a radix sort when rows fit int16)."""
    if not len(d) or d.max() < np.iinfo(np.int16).max:
        return np.argsort(d.astype(np.int16), kind="stable")
    return np.argsort(d, kind="stable")


def _row_conflicts(s, e, d) -> np.ndarray:
    """Positions of slices that start before the previous slice on their row ends."""
    order = _by_row(d)
    ds, ss, es = d[order], s[order], e[order]
    clash = (ds[1:] == ds[:-1]) & (es[:-1] > ss[1:])
    return np.sort(order[1:][clash])


def _outliving(e: np.ndarray, d: np.ndarray) -> np.ndarray:
    """Slices that end after their parent (the last earlier slice one row up)."""
    order = _by_row(d)
    bounds = np.searchsorted(d[order], np.arange(int(d.max()) + 2))
    out = np.zeros(len(d), bool)
    for k in range(1, len(bounds) - 1):
        up, here = order[bounds[k - 1]:bounds[k]], order[bounds[k]:bounds[k + 1]]
        j = np.searchsorted(up, here) - 1  # both in start order
        out[here] = (j < 0) | (e[here] > e[up[np.maximum(j, 0)]])
    return out


def _greedy_depth(s: np.ndarray, e: np.ndarray, level: int = 0) -> np.ndarray:
    """Lowest free row per slice (first fit), slice by slice."""
    row_end: list[int] = []
    out: list[int] = []
    add = out.append
    for a, b in zip(s.tolist(), e.tolist()):
        r = 0
        for re in row_end:
            if re <= a:
                row_end[r] = b
                break
            r += 1
        else:
            row_end.append(b)
        add(r)
    return np.array(out, np.int64)
