"""Root causes under a finding: the few ops / functions / call sites that make up most
of its time, each with total, count, share of the finding and one clickable instance."""

from __future__ import annotations

import numpy as np

from ...trace import Kind
from ...units import fmt_ns
from ..host_side import window_of
from ..results import Cause, Evidence
from ..self_time import self_times as exclusive
from .context import MAX_CAUSES, Ctx

#: Slice kinds that name work (ops, Python functions, runtime calls, annotations).
WORK_KINDS = (Kind.CPU_OP, Kind.PYTHON, Kind.RUNTIME, Kind.ANNOTATION, Kind.SYNC,
              Kind.MEMCPY, Kind.OTHER)


def self_times(ctx: Ctx, idx: np.ndarray) -> np.ndarray:
    """Exclusive ns of each slice in ``idx`` (its duration minus its direct children on
    the same lane)."""
    s = ctx.trace.slices
    idx = np.asarray(idx, np.int64)
    cache = ctx.trace.memo("self_ns", dict)
    out = np.zeros(len(idx), np.int64)
    for lane in np.unique(s.lane[idx]).tolist():
        if lane not in cache:
            cache[lane] = _lane_self(ctx, lane)
        mine, own = cache[lane]
        sel = s.lane[idx] == lane
        out[sel] = own[np.searchsorted(mine, idx[sel])]
    return out


def _lane_self(ctx: Ctx, lane: int) -> tuple[np.ndarray, np.ndarray]:
    mine = np.sort(ctx.trace.lane_slices(lane))
    return mine, exclusive(ctx.trace, mine, cand=mine)


def nested_in(ctx: Ctx, parents: np.ndarray, kinds=WORK_KINDS) -> np.ndarray:
    """Slices (of ``kinds``) on the parents' lanes that lie inside one of ``parents``,
    the parents themselves excluded."""
    s = ctx.trace.slices
    out = []
    for lane in np.unique(s.lane[parents]).tolist():
        par = parents[s.lane[parents] == lane]
        mine = ctx.trace.lane_slices(lane)
        mine = mine[np.isin(s.kind[mine], [int(k) for k in kinds])]
        w = window_of(s.start[mine], s.start[par], s.start[par] + s.dur[par])
        inside = mine[(w >= 0) & ~np.isin(mine, par)]
        out.append(inside)
    return np.concatenate(out) if out else np.zeros(0, np.int64)


def causes_by_name(ctx: Ctx, idx: np.ndarray, weight: np.ndarray, finding_ns: float,
                   label=None, k: int = MAX_CAUSES, starts=None, ends=None,
                   by_label: bool = False) -> list[Cause]:
    """Group ``idx`` by name: total ``weight``, count, share of ``finding_ns``, and the
    heaviest instance as clickable evidence.  ``label(name, j)`` may rename a group;
    ``by_label`` groups by that label instead (call site, size)."""
    s = ctx.trace.slices
    idx = np.asarray(idx, np.int64)
    if not len(idx):
        return []
    weight = np.asarray(weight, np.float64)
    names = s.name[idx]
    if by_label and label is not None:
        texts = [label(ctx.trace.name_of(j), j) for j in idx.tolist()]
        uniq = {t: n for n, t in enumerate(dict.fromkeys(texts))}
        names = np.array([uniq[t] for t in texts], np.int64)
        group_names = list(uniq)
        label = None
    else:
        group_names = None
    tot = np.bincount(names, weights=weight)
    cnt = np.bincount(names)
    starts = ctx.bd.starts if starts is None else starts
    ends = ctx.bd.ends if ends is None else ends
    out = []
    for nid in np.argsort(-tot, kind="stable")[:k].tolist():
        if tot[nid] <= 0:
            break
        inst = idx[names == nid]
        j = int(inst[np.argmax(weight[names == nid])])
        it = int(window_of(s.start[j:j + 1], starts, ends)[0])
        name = ctx.trace.name_of(j)
        text = group_names[nid] if group_names else (label(name, j) if label else name)
        ev = Evidence(f"{name} ({fmt_ns(int(s.dur[j]))})", int(s.start[j]),
                      int(s.start[j] + s.dur[j]), None if it < 0 else ctx.it(it),
                      [int(s.lane[j])])
        out.append(Cause(text, int(tot[nid]), int(cnt[nid]),
                         float(tot[nid]) / finding_ns if finding_ns else 0.0, ev))
    return out


def enclosing_annotations(ctx: Ctx, idx: np.ndarray) -> list[str]:
    """Per slice of ``idx``: the innermost user annotation on its lane that contains it
    ("" if none); ProfilerStep annotations do not count. One searchsorted per lane and
    annotation depth, so thousands of sync calls stay cheap."""
    s = ctx.trace.slices
    idx = np.asarray(idx, np.int64)
    out = [""] * len(idx)
    steps = ctx.trace.name_ids(lambda n: n.startswith("ProfilerStep"))
    for lane in np.unique(s.lane[idx]).tolist():
        mine = ctx.trace.lane_slices(lane)
        ann = mine[(s.kind[mine] == int(Kind.ANNOTATION)) & ~np.isin(s.name[mine], steps)]
        q = np.flatnonzero(s.lane[idx] == lane)
        if not len(ann) or not len(q):
            continue
        qs, qe = s.start[idx[q]], s.start[idx[q]] + s.dur[idx[q]]
        best_depth = np.full(len(q), -1)
        best = np.full(len(q), -1, np.int64)
        for d in np.unique(s.depth[ann]).tolist():
            level = ann[s.depth[ann] == d]
            level = level[np.argsort(s.start[level], kind="stable")]
            k = np.searchsorted(s.start[level], qs, side="right") - 1
            ok = k >= 0
            cand = np.where(ok, level[np.maximum(k, 0)], -1)
            inside = ok & (s.start[cand] + s.dur[cand] >= qe) & (d > best_depth)
            best = np.where(inside, cand, best)
            best_depth = np.where(inside, d, best_depth)
        for n, j in zip(q.tolist(), best.tolist()):
            if j >= 0:
                out[n] = ctx.trace.name_of(j)
    return out
