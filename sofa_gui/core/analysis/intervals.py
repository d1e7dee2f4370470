"""Interval-set arithmetic on int64 ns with numpy: unions, measures, priority painting.

Everything is vectorised (sorting, cumulative maximum, ``bincount``), never a
Python loop per event, so a million slices take a fraction of a second.

The central operation is :func:`paint`: given interval layers in priority
order and a set of windows (iterations), each instant of every window is owned
by the highest-priority layer covering it, or by nobody.  Per window, the owned
times therefore sum exactly to the window length.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

_EMPTY = np.zeros(0, np.int64)


def union(start, end) -> tuple[np.ndarray, np.ndarray]:
    """Sorted, disjoint union of ``[start, end)`` intervals (touching ones merge)."""
    s = np.asarray(start, np.int64)
    e = np.asarray(end, np.int64)
    keep = e > s
    s, e = s[keep], e[keep]
    if len(s) == 0:
        return _EMPTY, _EMPTY
    order = np.argsort(s, kind="stable")
    s, e = s[order], e[order]
    reach = np.maximum.accumulate(e)
    new = np.empty(len(s), bool)
    new[0] = True
    new[1:] = s[1:] > reach[:-1]
    first = np.flatnonzero(new)
    return s[first], np.maximum.reduceat(e, first)


def total(us_: np.ndarray, ue: np.ndarray) -> int:
    """Length of a disjoint interval set."""
    return int((ue - us_).sum())


def measure_before(us_: np.ndarray, ue: np.ndarray, t) -> np.ndarray:
    """Covered length of the disjoint set ``[us_, ue)`` before each time in ``t``."""
    t = np.asarray(t, np.int64)
    if len(us_) == 0:
        return np.zeros(t.shape, np.int64)
    cum = np.concatenate([[0], np.cumsum(ue - us_)])
    idx = np.searchsorted(us_, t, side="right") - 1
    safe = np.maximum(idx, 0)
    partial = np.clip(t - us_[safe], 0, ue[safe] - us_[safe])
    return np.where(idx >= 0, cum[safe] + partial, 0)


def measure_in(us_: np.ndarray, ue: np.ndarray, ws, we) -> np.ndarray:
    """Covered length of a disjoint set inside each window ``[ws, we)``."""
    return measure_before(us_, ue, we) - measure_before(us_, ue, ws)


#: The latest end where no interval has started yet (earlier than every time).
FAR_PAST = np.iinfo(np.int64).min


def last_started(starts, ends, t) -> tuple[np.ndarray, np.ndarray]:
    """Per time of ``t``: (the position in ``starts``/``ends`` of the interval that starts
    last at or before it, the last in order among equal starts, -1 where none; the latest
    end of the intervals that start at or before it, :data:`FAR_PAST` where none).  The
    one reading behind "inside": ``t`` is inside an interval exactly when that latest end
    is after it, and a span from ``t`` to ``u`` exactly when it is at or after ``u``."""
    starts, ends = np.asarray(starts, np.int64), np.asarray(ends, np.int64)
    t = np.asarray(t, np.int64)
    if not len(starts):
        return np.full(t.shape, -1, np.int64), np.full(t.shape, FAR_PAST, np.int64)
    order = np.argsort(starts, kind="stable")
    k = np.searchsorted(starts[order], t, side="right") - 1
    at = np.maximum(k, 0)
    reach = np.maximum.accumulate(ends[order])
    return (np.where(k >= 0, order[at], -1).astype(np.int64),
            np.where(k >= 0, reach[at], FAR_PAST).astype(np.int64))


def covered(t, starts, ends) -> np.ndarray:
    """Per time of ``t``: inside one of the intervals ``[starts, ends)`` (ones of no
    length hold nothing)."""
    return last_started(starts, ends, t)[1] > np.asarray(t, np.int64)


def enclosing(start, end, lane, parents, idx) -> tuple[np.ndarray, np.ndarray]:
    """Per slice of ``idx`` (indexes into the per-slice arrays ``start``, ``end``,
    ``lane``): :func:`last_started` among the slices ``parents`` on its own lane (the
    parent as a slice index, -1 where none)."""
    idx = np.asarray(idx, np.int64)
    parents = np.sort(np.asarray(parents, np.int64))  # equal starts: the later slice last
    at = np.full(len(idx), -1, np.int64)
    reach = np.full(len(idx), FAR_PAST, np.int64)
    for ln in np.unique(lane[parents]).tolist():
        p = parents[lane[parents] == ln]
        on = lane[idx] == ln
        k, reach[on] = last_started(start[p], end[p], start[idx[on]])
        at[on] = np.where(k >= 0, p[np.maximum(k, 0)], -1)
    return at, reach


def _ranked(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sorted distinct values of ``x`` and, for each element, its index among them
    (one stable argsort instead of a sort plus a binary search per layer)."""
    order = np.argsort(x, kind="stable")
    xs = x[order]
    new = np.ones(len(xs), bool)
    if len(xs) > 1:
        np.not_equal(xs[1:], xs[:-1], out=new[1:])
    pos = np.empty(len(x), np.int64)
    pos[order] = np.cumsum(new) - 1
    return xs[new], pos


def clean_windows(starts, ends) -> tuple[np.ndarray, np.ndarray]:
    """Windows sorted, non-negative and non-overlapping (each ends where the next starts)."""
    ws = np.asarray(starts, np.int64)
    we = np.maximum(np.asarray(ends, np.int64), ws)
    order = np.argsort(ws, kind="stable")
    ws, we = ws[order], we[order]
    if len(ws) > 1:
        we = np.concatenate([np.minimum(we[:-1], ws[1:]), we[-1:]])
    return ws, we


@dataclass
class Painting:
    """Result of :func:`paint`.

    ``bounds`` are the sorted elementary-segment edges; segment ``j`` is
    ``[bounds[j], bounds[j+1])`` and is owned by layer ``owner[j]`` (``n_layers``
    means no layer).  ``window[j]`` is the window the segment lies in, or -1.
    ``per_window`` is (n_windows, n_layers + 1) ns; the last column is unowned time.
    """

    bounds: np.ndarray
    owner: np.ndarray
    window: np.ndarray
    per_window: np.ndarray
    n_layers: int

    @property
    def seg_start(self) -> np.ndarray:
        return self.bounds[:-1]

    @property
    def seg_end(self) -> np.ndarray:
        return self.bounds[1:]

    @property
    def seg_len(self) -> np.ndarray:
        return np.diff(self.bounds)


def paint(layers: list[tuple[np.ndarray, np.ndarray]], ws: np.ndarray,
          we: np.ndarray) -> Painting:
    """Assign every instant of the windows to the first (highest-priority) covering layer.

    ``layers`` are (start, end) arrays in priority order (any order within a layer,
    overlaps allowed); ``ws``/``we`` must be sorted and disjoint
    (:func:`clean_windows`).  Layers are clipped to ``[ws[0], we[-1])``, so the
    segments (and any gaps derived from them) end at the edges of that span.
    """
    k = len(layers)
    lo, hi = (int(ws[0]), int(we[-1])) if len(ws) else (0, 0)
    unions = [union(np.clip(s, lo, hi), np.clip(e, lo, hi)) for s, e in layers]
    edges = [ws, we] + [x for u in unions for x in u]
    bounds, pos = _ranked(np.concatenate(edges))
    n_seg = max(len(bounds) - 1, 0)
    owner = np.full(n_seg, k, np.int8 if k < 127 else np.int16)
    at = 2 * len(ws)  # each layer's edge positions in ``bounds``, in ``edges`` order
    for li, (us_, _) in enumerate(unions):
        n = len(us_)
        ps, pe = pos[at:at + n], pos[at + n:at + 2 * n]
        at += 2 * n
        if n == 0 or n_seg == 0:
            continue
        delta = np.bincount(ps, minlength=len(bounds))
        delta -= np.bincount(pe, minlength=len(bounds))
        cov = np.cumsum(delta[:-1]) > 0
        owner[cov & (owner == k)] = li
    seg_s = bounds[:-1]
    win = np.searchsorted(ws, seg_s, side="right") - 1
    if len(ws):
        inside = (win >= 0) & (seg_s < we[np.maximum(win, 0)])
    else:
        inside = np.zeros(n_seg, bool)
    win = np.where(inside, win, -1)
    per = np.bincount(
        win[inside].astype(np.int64) * (k + 1) + owner[inside],
        weights=np.diff(bounds)[inside].astype(np.float64),
        minlength=len(ws) * (k + 1),
    )
    per_window = np.rint(per).astype(np.int64).reshape(len(ws), k + 1)
    return Painting(bounds, owner, win, per_window, k)
