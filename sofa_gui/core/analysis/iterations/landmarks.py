"""The training loop's own landmarks: optimizer updates, input fetches, backward passes.

A training step holds one optimizer update; it fetches its input once per
micro-batch and runs one backward pass per micro-batch. These host-side events
tell the step apart from inner loops (per-sample ``.item()`` calls, RNN time
steps, micro-batches) that also repeat. All are (start, end) ns arrays in time
order, empty when the trace has none. Loops that record none of them (JAX, TF
functions) are marked by the loop body's Python calls and the compiled step's
dispatches instead (:mod:`.dispatch`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...trace import Kind, LaneKind, Trace
from ..roles import step_driver_counts
from .dispatch import loop_calls, step_marks
from .stream import OPTIMIZER_NAME, HostOps

BACKWARD_PREFIX = "autograd::engine::evaluate_function"
_NONE = np.zeros(0, np.int64)


@dataclass
class Landmarks:
    optimizer: tuple[np.ndarray, np.ndarray]  # merged optimizer-step ranges
    fetch: np.ndarray  # starts of input fetches (DataLoader __next__, IteratorGetNext)
    backward: tuple[np.ndarray, np.ndarray]  # one range per backward pass
    main_lane: int  # host thread that runs the loop (-1: unknown)
    forward_ops: np.ndarray  # sorted starts of host ops recorded for autograd (fwd->bwd links)
    fetch_kind: str = "input fetch"  # or "step dispatch" (a jitted step with no fetch traced)
    loop: tuple[np.ndarray, np.ndarray] = (_NONE, _NONE)  # the loop body's Python calls

    @property
    def has_backward(self) -> bool:
        return len(self.backward[0]) > 0

    @classmethod
    def of(cls, trace: Trace, ops: HostOps | None = None) -> Landmarks:
        ops = ops or HostOps(trace)
        opt = ops.optimizer_ranges()
        main = _main_lane(trace, ops, len(opt[0]) > 0)
        mine = _rank_lanes(trace, main)  # several ranks in one trace: the main lane's
        if mine is not None:
            opt = ops.optimizer_ranges(mine)
        bwd, fwd = backward_passes(trace, main, mine), _forward_starts(trace)
        fetch, kind = ops.loader_starts(mine), "input fetch"
        loop = (_NONE, _NONE)
        if not len(fetch) and not len(opt[0]):
            fetch, kind = step_marks(trace, main), "step dispatch"
            loop = loop_calls(trace, main, fetch)
        return cls(_one_per_pass(opt, bwd[0], fwd), fetch, bwd, main, fwd, kind, loop)


def _rank_lanes(trace: Trace, main: int) -> np.ndarray | None:
    """Lanes of the main lane's rank when the trace holds several ranks (their steps
    interleave in time and must not be merged or counted together); None otherwise."""
    ranks = trace.lanes.rank
    if main < 0 or len(np.unique(ranks[ranks >= 0])) < 2:
        return None
    return np.flatnonzero(ranks == ranks[main])


def _one_per_pass(opt: tuple[np.ndarray, np.ndarray], bwd: np.ndarray,
                  fwd: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Merge optimizer ranges with no forward or backward work between them (several
    optimizers, or param groups stepped one by one, make one update)."""
    a, b = opt
    marks = np.sort(np.r_[bwd, fwd])
    if len(a) < 2 or len(marks) == 0:
        return a, b
    between = np.searchsorted(marks, a[1:], "left") - np.searchsorted(marks, b[:-1], "left")
    new = np.r_[True, between > 0]
    first = np.flatnonzero(new)
    return a[first], np.maximum.reduceat(b, first)


def _main_lane(trace: Trace, ops: HostOps, has_optimizer: bool) -> int:
    """The thread of the optimizer steps, else the one dispatching TF/JAX steps, else the
    thread with most top-level ops."""
    s = trace.slices
    if has_optimizer:
        ids = trace.name_ids(lambda n: bool(OPTIMIZER_NAME.search(n)))
        hit = np.flatnonzero(np.isin(s.name, ids))
        if len(hit):
            lanes, counts = np.unique(s.lane[hit], return_counts=True)
            return int(lanes[np.argmax(counts)])
    return ops.busiest_lane(step_driver_counts(trace))  # TF/JAX: the step's thread


def backward_passes(trace: Trace, main_lane: int, lanes: np.ndarray | None = None
                    ) -> tuple[np.ndarray, np.ndarray]:
    """Backward passes: runs of outermost ``evaluate_function`` ops (on ``lanes`` when
    given) with no other host op of the main thread starting in between (forward work
    separates passes)."""
    s = trace.slices
    ids = trace.name_ids(lambda n: n.startswith(BACKWARD_PREFIX))
    if len(ids) == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    ev = np.flatnonzero(np.isin(s.name, ids) & (trace.lanes.kind[s.lane] == int(LaneKind.CPU)))
    if lanes is not None:
        ev = ev[np.isin(s.lane[ev], lanes)]
    ev = ev[np.argsort(s.start[ev], kind="stable")]
    a, b = s.start[ev], s.end[ev]
    outer = a >= np.r_[np.iinfo(np.int64).min, np.maximum.accumulate(b)[:-1]]
    a, b = a[outer], b[outer]
    if len(a) == 0:
        return a, b
    other = _other_starts(trace, main_lane, ids)
    between = (np.searchsorted(other, a[1:], "left")
               - np.searchsorted(other, b[:-1], "left")) > 0
    new = np.r_[True, between]
    first = np.flatnonzero(new)
    ends = np.maximum.reduceat(b, first)
    return a[first], ends


def _other_starts(trace: Trace, lane: int, skip_ids: np.ndarray) -> np.ndarray:
    """Sorted starts of the main thread's depth-0 ops that are not backward work."""
    if lane < 0:
        return np.zeros(0, np.int64)
    s = trace.slices
    idx = trace.lane_slices(lane)
    keep = (s.depth[idx] == 0) & ~np.isin(s.name[idx], skip_ids)
    keep &= np.isin(s.kind[idx], [int(Kind.CPU_OP), int(Kind.ANNOTATION)])
    return np.sort(s.start[idx[keep]])


def _forward_starts(trace: Trace) -> np.ndarray:
    """Starts of host ops that autograd links to a backward op (``fwdbwd`` flows)."""
    f, s = trace.flows, trace.slices
    if len(f) == 0:
        return np.zeros(0, np.int64)
    other = f.kind == 1
    src = f.src[other]
    dst = f.dst[other]
    back = trace.name_ids(lambda n: "Backward" in n or n.startswith(BACKWARD_PREFIX))
    src = src[np.isin(s.name[dst], back)] if len(back) else src[:0]
    return np.sort(s.start[src])
