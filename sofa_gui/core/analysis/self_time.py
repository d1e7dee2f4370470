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
    cand = np.asarray(cand, np.int64)
    key = s.lane[cand].astype(np.int64) * 65536 + s.depth[cand]
    starts = s.start[cand]
    order = _rows_order(cand, key, starts)
    key, starts = key[order], starts[order]
    nested = s.depth[cand[order]] > 0
    kpos = np.flatnonzero(nested)
    ppos = _parents(key, starts, key[kpos] - 1, starts[kpos])
    got = ppos >= 0
    kids, parent = cand[order[kpos[got]]], cand[order[ppos[got]]]
    overlap = np.minimum(s.end[kids], s.end[parent]) - s.start[kids]
    if not len(parent):
        return dur
    spent = np.bincount(ppos[got], weights=np.maximum(overlap, 0), minlength=len(cand))
    by_id = np.argsort(cand, kind="stable") if len(cand) > 1 and (
        np.diff(cand) <= 0).any() else np.arange(len(cand))
    at = np.empty(len(cand), np.int64)
    at[order] = np.arange(len(cand))
    ids, spent = cand[by_id], spent[at[by_id]]
    pos = np.minimum(np.searchsorted(ids, idx), len(ids) - 1)
    sub = np.where(ids[pos] == idx, spent[pos], 0).astype(np.int64)
    return np.maximum(dur - sub, 0)


def _rows_order(cand: np.ndarray, key: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """The order sorting ``cand`` by (key, start), ties in ``cand`` order. Slices are
    stored by start, so for increasing ``cand`` within one lane a stable sort of the
    nesting depth alone (a radix sort) gives it; a lexsort otherwise."""
    if len(key) > 1 and key.max() - key.min() < 65536 and (np.diff(cand) > 0).all() \
            and (np.diff(starts) >= 0).all():
        return np.argsort((key - key.min()).astype(np.uint16), kind="stable")
    return np.lexsort((starts, key))


def _parents(key, starts, kid_key, kid_start) -> np.ndarray:
    """Position of each kid's parent: the last row with key ``kid_key`` starting at or
    before it (-1 when there is none).  Rows are sorted by (key, start); so are the kids."""
    out = np.full(len(kid_key), -1, np.int64)
    if not len(kid_key):
        return out
    cuts = np.flatnonzero(np.diff(kid_key)) + 1
    seg_lo = np.r_[0, cuts]
    seg_hi = np.r_[cuts, len(kid_key)]
    wanted = kid_key[seg_lo]
    row_lo = np.searchsorted(key, wanted, "left")
    row_hi = np.searchsorted(key, wanted, "right")
    for a, b, lo, hi in zip(seg_lo.tolist(), seg_hi.tolist(), row_lo.tolist(), row_hi.tolist()):
        if hi > lo:
            at = np.searchsorted(starts[lo:hi], kid_start[a:b], "right") - 1
            out[a:b] = np.where(at >= 0, at + lo, -1)
    return out


def parents(trace: Trace) -> np.ndarray:
    """Per slice, the index of the slice enclosing it on its lane (one nesting row up,
    the last to start at or before it; the rule :func:`self_times` subtracts children
    by), -1 for top-level slices and those with no such slice. Computed once per trace."""
    return trace.memo("self_time.parents", lambda: _all_parents(trace))


def _all_parents(trace: Trace) -> np.ndarray:
    s = trace.slices
    n = len(s)
    out = np.full(n, -1, np.int64)
    if not n:
        out.flags.writeable = False
        return out
    cand = np.arange(n, dtype=np.int64)
    key = s.lane.astype(np.int64) * 65536 + s.depth
    order = _rows_order(cand, key, s.start)
    key, starts = key[order], s.start[order]
    kpos = np.flatnonzero(s.depth[order] > 0)
    ppos = _parents(key, starts, key[kpos] - 1, starts[kpos])
    got = ppos >= 0
    out[order[kpos[got]]] = order[ppos[got]]
    out.flags.writeable = False
    return out
