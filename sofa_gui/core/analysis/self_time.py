"""Exclusive ("self") time of slices: the one definition the Statistics table and the
findings' causes share."""

from __future__ import annotations

import numpy as np

from ..trace import Trace


def self_times(trace: Trace, idx: np.ndarray, cand: np.ndarray | None = None) -> np.ndarray:
    """Duration of each slice in ``idx`` minus the part of its direct children on its lane
    that falls inside it (a child overrunning its parent's end is clipped there).

    ``cand``: every slice on the lanes of ``idx`` when the caller has them at hand;
    found by a scan of all slices otherwise."""
    s = trace.slices
    dur = s.dur[idx].astype(np.int64)
    if not len(idx):
        return dur
    if cand is None:
        cand = np.flatnonzero(np.isin(s.lane, np.unique(s.lane[idx])))
    key = s.lane[cand].astype(np.int64) * 65536 + s.depth[cand]
    order = np.lexsort((s.start[cand], key))
    cand, key = cand[order], key[order]
    nested = s.depth[cand] > 0
    kids = cand[nested]
    ppos = _parents(cand, key, s.start[cand], s.start[kids], key[nested] - 1)
    kids, parent = kids[ppos >= 0], cand[ppos[ppos >= 0]]
    overlap = np.minimum(s.end[kids], s.end[parent]) - s.start[kids]
    uniq, inv = np.unique(parent, return_inverse=True)
    spent = np.bincount(inv, weights=np.maximum(overlap, 0), minlength=len(uniq))
    if not len(uniq):
        return dur
    pos = np.minimum(np.searchsorted(uniq, idx), len(uniq) - 1)
    sub = np.where(uniq[pos] == idx, spent[pos], 0).astype(np.int64)
    return np.maximum(dur - sub, 0)


def _parents(cand, key, starts, kid_start, kid_key) -> np.ndarray:
    """Position in ``cand`` of each kid's parent: the last slice one row up on its lane
    starting at or before it (-1 when there is none).  ``cand`` is sorted by (key, start)."""
    n = len(cand)
    keys = np.concatenate([key, kid_key])
    st = np.concatenate([starts, kid_start])
    tag = np.concatenate([np.zeros(n, np.int8), np.ones(len(kid_key), np.int8)])
    order = np.lexsort((tag, st, keys))  # parents before kids at equal (key, start)
    last = np.maximum.accumulate(np.where(order < n, order, -1))
    at = np.empty(len(order), np.int64)
    at[order] = last
    pos = at[n:]
    ok = pos >= 0
    pos = np.where(ok, pos, 0)
    return np.where(ok & (key[pos] == kid_key), pos, -1)
