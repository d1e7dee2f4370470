"""Iterations from step annotations (ProfilerStep#N, NVTX/user "step N" ranges).

Annotations are the program's own word on where steps are, so ``auto`` mode uses
them when present; the pattern detector still runs to report how well it agrees.
"""

from __future__ import annotations

import numpy as np

from ...trace import Kind, LaneKind, Trace
from ..results import Iterations, us
from .stream import is_step_name


def step_slices(trace: Trace) -> np.ndarray:
    """Slice indexes of the step annotations of one host thread, in start order."""
    s = trace.slices
    ann = np.flatnonzero((s.kind == int(Kind.ANNOTATION))
                         & (trace.lanes.kind[s.lane] == int(LaneKind.CPU)))
    if len(ann) == 0:
        return ann
    ids = trace.name_ids(is_step_name)
    ann = ann[np.isin(s.name[ann], ids)]
    if len(ann) == 0:
        return ann
    profiler = trace.name_ids(lambda n: n.startswith("ProfilerStep#"))
    prof = ann[np.isin(s.name[ann], profiler)]
    if len(prof):
        ann = prof
    lanes, counts = np.unique(s.lane[ann], return_counts=True)
    lane = lanes[np.argmax(counts)]
    ann = ann[s.lane[ann] == lane]
    return _distinct_steps(s, ann[np.argsort(s.start[ann], kind="stable")])


def _distinct_steps(s, ann: np.ndarray) -> np.ndarray:
    """One marker per step: a marker that overlaps an earlier one of the same name (the
    step marked twice) is dropped; one that starts after it ends is a step of its own,
    since frameworks that number steps within an epoch (Keras) repeat the numbers in
    every epoch."""
    last_end: dict[int, int] = {}
    keep = np.zeros(len(ann), bool)
    for j, i in enumerate(ann.tolist()):
        name = int(s.name[i])
        if s.start[i] >= last_end.get(name, s.start[i]):
            keep[j] = True
            last_end[name] = int(s.end[i])
        else:
            last_end[name] = max(last_end[name], int(s.end[i]))
    return ann[keep]


def annotation_iterations(trace: Trace) -> Iterations:
    """One iteration per step annotation, as long as the annotation; where the thread
    records work between two step markers (Keras' validation after an epoch's last step),
    up to the next one's start: that work is the loop's, in the step it follows.
    ``ProfilerStep`` ranges span the loop from one ``step()`` to the next by design: what
    lies between them is the profiler's own bookkeeping and stays out.  Device work that
    runs on past the last one is its device window, a second number, see
    :func:`.marks.mark_iterations`."""
    idx = step_slices(trace)
    if len(idx) == 0:
        return Iterations.none("step annotations", "the trace has no step annotations "
                               "(ProfilerStep#N or NVTX step ranges)")
    s = trace.slices
    starts = s.start[idx].astype(np.int64)
    ends = s.end[idx].astype(np.int64)
    lane = int(s.lane[idx[0]])
    kind = "ProfilerStep" if trace.name_of(int(idx[0])).startswith("ProfilerStep#") else "step"
    if kind != "ProfilerStep":  # its ranges span the loop; between them the profiler works
        worked = _work_between(trace, idx, lane)
        ends[:-1][worked] = starts[1:][worked]
    stream = f"{len(idx)} {kind} annotations on {trace.lanes.name[lane]}"
    labels = _unique_labels([trace.name_of(int(i)) for i in idx])
    return Iterations("annotations", stream, starts, ends, 1.0, None, None, "", labels)


def _work_between(trace: Trace, idx: np.ndarray, lane: int) -> np.ndarray:
    """Per gap between consecutive markers ``idx`` on ``lane``: whether an event of the
    thread starts in it."""
    s = trace.slices
    own = trace.lane_slices(lane)
    t = np.sort(s.start[own[~np.isin(own, idx)]])
    a, b = s.end[idx[:-1]], s.start[idx[1:]]
    return (b > a) & (np.searchsorted(t, b, "left") > np.searchsorted(t, a, "left"))


def _unique_labels(names: list[str]) -> list[str]:
    """Step names as labels, a repeated one (step numbers that restart every epoch) with
    its occurrence, so the labels that align ranks name one step each."""
    seen: dict[str, int] = {}
    out = []
    for n in names:
        seen[n] = seen.get(n, 0) + 1
        out.append(n if seen[n] == 1 else f"{n} ({seen[n]})")
    return out


def agreement(annotated: Iterations, detected: Iterations) -> dict:
    """How well pattern iterations match annotated ones (start within 5% of the period)."""
    n_ann = len(annotated)
    period = float(np.median(annotated.durations)) if n_ann else 0.0
    tol = 0.05 * period
    out = {"annotated": n_ann, "detected": len(detected), "matched": 0, "fraction": 0.0,
           "median_offset_us": None, "tolerance_us": us(tol),
           "pattern_confidence": round(float(detected.confidence), 4)}
    if detected.method == "none" or n_ann == 0:
        out["pattern_reason"] = detected.reason
        return out
    pos = np.clip(np.searchsorted(detected.starts, annotated.starts), 1, len(detected) - 1) \
        if len(detected) > 1 else np.zeros(n_ann, np.int64)
    cand = np.stack([detected.starts[np.maximum(pos - 1, 0)], detected.starts[pos]])
    off = np.abs(cand - annotated.starts[None, :]).min(axis=0)
    matched = off <= tol
    out["matched"] = int(matched.sum())
    out["fraction"] = round(float(matched.mean()), 4)
    out["median_offset_us"] = us(np.median(off))
    return out
