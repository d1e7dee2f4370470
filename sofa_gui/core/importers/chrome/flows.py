"""Bind Chrome flow events (s/t/f) to slices and link them, after the trace is sorted.

A flow event carries a time and a thread, not a slice: ``s``/``t`` (and ``f``
with ``"bp": "e"``) bind to the slice enclosing that time on that thread, an
``f`` without it to the next slice starting there. Kineto puts the flow at
the exact start of its runtime call and kernel, so most endpoints resolve by a
vectorised lookup among slices with that exact start; the rest walk back a
few nesting levels. Events with the same (cat, id) chain ``s -> t... -> f``;
several ``f`` after one ``s`` (a CUDA graph launch) all link to it.

Launch flows missing from the file are added from ``correlation`` ids.
"""

from __future__ import annotations

import numpy as np

from ...builder import correlation_flows
from ...trace import Flows, LoadStats, Trace
from .lanes import PendingFlows

_S, _T, _F = (ord(c) for c in "stf")
_MAX_SAME_START = 64
_MAX_WALK = 64


def link_flows(trace: Trace, pending: list[PendingFlows], report: LoadStats) -> None:
    """Set ``trace.flows``: explicit flows, then correlation flows for unlinked GPU work."""
    parts = [trace.flows]
    if pending and sum(len(p.lane) for p in pending):
        p = _concat(pending)
        slice_of = _bind(trace, p)
        parts.append(_pair(p, slice_of, report))
    flows = _cat_flows(parts)
    derived = correlation_flows(trace.slices, trace.lanes)
    if len(derived):
        covered = flows.dst[flows.kind == 0]
        new = ~np.isin(derived.dst, covered)
        if new.any():
            if len(covered):
                report.notes.append(f"{int(new.sum()):,} launch flows added from correlation ids "
                                    "(the file has no flow event for them)")
            flows = _cat_flows([flows, Flows(derived.src[new], derived.dst[new],
                                             derived.kind[new])])
    trace.flows = flows


def _concat(pending: list[PendingFlows]) -> PendingFlows:
    return PendingFlows(*(np.concatenate([getattr(p, f) for p in pending])
                          for f in ("lane", "ts", "phase", "enclosing", "group", "launch",
                                    "raw_id")))


def _cat_flows(parts: list[Flows]) -> Flows:
    return Flows(np.concatenate([f.src for f in parts]).astype(np.int64),
                 np.concatenate([f.dst for f in parts]).astype(np.int64),
                 np.concatenate([f.kind for f in parts]).astype(np.int8))


# -- binding --------------------------------------------------------------------
def _bind(trace: Trace, p: PendingFlows) -> np.ndarray:
    """Slice index of each endpoint, -1 where none."""
    s = trace.slices
    out = np.full(len(p.lane), -1, np.int64)
    if not len(s):
        return out
    deepest = p.enclosing | (p.phase != _F)
    lo = np.searchsorted(s.start, p.ts, side="left")
    width = _same_start(s.start, lo, p.ts)
    by_corr = np.full(len(p.lane), -1, np.int64)
    act = np.flatnonzero((width > 0) & (p.lane >= 0))  # endpoints with slices left to try
    for j in range(int(width.max()) if len(width) else 0):
        act = act[width[act] > j]
        cand = lo[act] + j
        hit = s.lane[cand] == p.lane[act]
        at, cand = act[hit], cand[hit]
        take = deepest[at] | (out[at] < 0)  # deepest: keep the last; next: the first
        out[at[take]] = cand[take]
        # a launch flow's id is its correlation id: prefer that slice among equal starts
        corr = p.launch[at]
        at, cand = at[corr], cand[corr]
        corr = s.correlation[cand] == p.raw_id[at]
        by_corr[at[corr]] = cand[corr]
    out = np.where(by_corr >= 0, by_corr, out)
    rest = np.flatnonzero((out < 0) & (p.lane >= 0))
    if len(rest):
        out[rest] = _bind_inexact(trace, p.lane[rest], p.ts[rest], deepest[rest])
    return out


def _same_start(start: np.ndarray, lo: np.ndarray, ts: np.ndarray) -> np.ndarray:
    """How many slices from ``lo`` on start exactly at ``ts`` (at most
    :data:`_MAX_SAME_START`): a walk over the few equal starts instead of a second
    binary search (~70 ms per 236k endpoints on 1M slices)."""
    width = np.zeros(len(lo), np.int64)
    act = np.flatnonzero(lo < len(start))
    for k in range(_MAX_SAME_START):
        act = act[start[lo[act] + k] == ts[act]]
        if not len(act):
            break
        width[act] += 1
        act = act[lo[act] + k + 1 < len(start)]
    return width


def _bind_inexact(trace: Trace, lane: np.ndarray, ts: np.ndarray, deepest: np.ndarray):
    """Enclosing (deepest) or next slice on the lane, for endpoints off slice starts."""
    s = trace.slices
    by_lane = np.argsort(s.lane, kind="stable")  # start order kept within a lane
    lane_sorted = s.lane[by_lane]
    starts = s.start[by_lane]
    ends = starts + s.dur[by_lane]
    first = np.searchsorted(lane_sorted, lane, side="left")
    last = np.searchsorted(lane_sorted, lane, side="right")
    # position among the lane's slices of the last start <= ts (or first start >= ts)
    key = lane.astype(np.int64)
    pos = np.empty(len(lane), np.int64)
    for ln in np.unique(key).tolist():
        m = key == ln
        a, b = first[m][0], last[m][0]
        pos[m] = a + np.searchsorted(starts[a:b], ts[m], side="right") - 1
    out = np.full(len(lane), -1, np.int64)
    nxt = ~deepest & (pos + 1 < last)
    out[nxt] = by_lane[pos[nxt] + 1]
    todo = np.flatnonzero(deepest & (pos >= first))
    for _ in range(_MAX_WALK):
        if not len(todo):
            break
        q = pos[todo]
        inside = ends[q] >= ts[todo]
        out[todo[inside]] = by_lane[q[inside]]
        todo = todo[~inside]
        pos[todo] -= 1
        todo = todo[pos[todo] >= first[todo]]
    return out


# -- pairing --------------------------------------------------------------------
def _pair(p: PendingFlows, slice_of: np.ndarray, report: LoadStats) -> Flows:
    """Link each t/f to the latest s/t of its flow before it (or, failing that, after it)."""
    report.skip("flow event on a thread without slices", int((p.lane < 0).sum()))
    report.skip("flow event not inside a slice", int(((p.lane >= 0) & (slice_of < 0)).sum()))
    ok = np.flatnonzero(slice_of >= 0)
    rank = np.where(p.phase[ok] == _S, 0, np.where(p.phase[ok] == _T, 1, 2))
    order = ok[np.lexsort((rank, p.ts[ok], p.group[ok]))]
    group, phase, sl = p.group[order], p.phase[order], slice_of[order]
    n = len(order)
    idx = np.arange(n)
    is_src = phase != _F
    prev = np.maximum.accumulate(np.where(is_src, idx, -1))
    prev = np.concatenate([[-1], prev[:-1]]) if n else prev
    prev_ok = (prev >= 0) & (group[np.maximum(prev, 0)] == group)
    nxt = np.minimum.accumulate(np.where(is_src, idx, n)[::-1])[::-1]
    nxt_ok = (nxt < n) & (group[np.minimum(nxt, n - 1)] == group) & (nxt != idx)
    src = np.where(prev_ok, prev, np.where(nxt_ok, nxt, -1))
    dst_mask = phase != _S
    linked = dst_mask & (src >= 0)
    report.skip("flow event without a start (s)", int((dst_mask & (src < 0)).sum()))
    used_src = np.zeros(n, bool)
    used_src[src[linked]] = True
    report.skip("flow start (s) without a step or end", int(((phase == _S) & ~used_src).sum()))
    a, b = sl[src[linked]], sl[linked]
    launch = p.launch[order][linked]
    same = a == b
    report.skip("flow from a slice to itself", int(same.sum()))
    a, b, launch = a[~same], b[~same], launch[~same]
    order = np.lexsort((launch, a, b))  # drop repeated links (duplicate events)
    a, b, launch = a[order], b[order], launch[order]
    keep = np.ones(len(a), bool)
    keep[1:] = (a[1:] != a[:-1]) | (b[1:] != b[:-1]) | (launch[1:] != launch[:-1])
    return Flows(a[keep], b[keep], np.where(launch[keep], 0, 1).astype(np.int8))
