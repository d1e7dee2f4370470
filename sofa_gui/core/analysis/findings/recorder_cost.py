"""What ``torch.profiler`` adds per recorded event in this capture, read off the capture.

The profiler's cost per event is work of the recording thread (closing one event, opening
the next, copying its input shapes), so it runs as fast or as slow as the machine did
while the capture was taken: the same loop captured on a busy machine pays more per
event than on an idle one, and a fixed cost per event (1 µs) taken off a slow capture
leaves too much of the profiler in it, off a fast one too little.  The capture shows its
own speed at this work in the gaps between consecutive framework ops at one depth with no
shallower framework op between them: siblings inside one op (``aten::t`` then
``aten::addmm`` inside ``aten::linear``, no Python between them) and the top-level ops of
a step (Python between them).  Their short gaps, the :data:`GAP_QUANTILE` quantile, are
the recorder closing one event and opening the next and a few C++ calls; the cost per
event is :data:`COST_PER_GAP` times that quantile.

The ratio comes from ``benchmarks/corpus/profiler_cost.py`` (3 rounds, nothing else
running, one thread) on the nine torch corpus cases whose fixes are per-op or per-request
(a loop of 400 tiny matmuls, 64 requests a step one at a time, a three-headed server, a
deep stack on batches of 8, a per-sample loss loop, a batch-1 conv net, two token-by-token
decoders, a batch-1 vision transformer): the profiler adds 0.59-1.19 µs per event to the
run; scaled by each capture's speed against the run profiled (0.77-2.34) and divided by
the capture's quantile gap (0.22-0.54 µs), it is 2.2-4.9 over their 18 captures, mean 3.3
(median 3.2): the ratio holds for the mix of siblings and top-level ops those loops have.
Over 5 rounds, the gaps inside one op alone (no Python between) part no less: 2.3-4.4
over the same captures, mean 3.4, against 2.3-4.4, mean 3.2, for the mix, which is
therefore what the ratio reads.
Loops of element reads (``.item()``) give 1.2-1.7: their estimate keeps its own ratios
(:mod:`.read_rules`).  Where the capture has too few gaps (:data:`MIN_GAPS`), a quantile
under :data:`MIN_GAP_NS` (timestamps in whole microseconds, ops that touch) or is not
``torch.profiler``'s, the fixed :data:`.batch_estimate.PROFILER_NS_PER_EVENT` stands.
"""

from __future__ import annotations

import numpy as np

from ...trace import Kind
from .context import Ctx

#: The profiler's cost per recorded event over the capture's short sibling gaps.
COST_PER_GAP = 3.3
#: The quantile of the sibling gaps taken (the short ones: no allocation or branch between).
GAP_QUANTILE = 0.1
#: Fewer sibling gaps than this say nothing of the capture's speed.
MIN_GAPS = 200
#: A quantile gap under this is the clock's resolution or touching ops, not the recorder.
MIN_GAP_NS = 50.0


def per_event_ns(ctx: Ctx, lane: int, fallback: float) -> tuple[float, bool]:
    """(ns the profiler adds per event recorded on ``lane``, read off the capture or not):
    ``fallback`` where the capture cannot tell.  Once per analysis."""
    cost = ctx.once(("recorder_per_event", lane), lambda: _cost_of(
        sibling_gaps(ctx, lane) if _torch(ctx) else np.zeros(0)))
    return (cost, True) if cost is not None else (fallback, False)


def _cost_of(gaps: np.ndarray) -> float | None:
    """ns per event from the gaps between events: :data:`COST_PER_GAP` times their
    :data:`GAP_QUANTILE` quantile; None with too few gaps or a quantile under
    :data:`MIN_GAP_NS`."""
    gap = float(np.quantile(gaps, GAP_QUANTILE)) if len(gaps) >= MIN_GAPS else 0.0
    return COST_PER_GAP * gap if gap >= MIN_GAP_NS else None


def _torch(ctx: Ctx) -> bool:
    return ctx.facts.value("framework") == "pytorch"


def sibling_gaps(ctx: Ctx, lane: int) -> np.ndarray:
    """ns between each two consecutive framework ops of ``lane`` at the same depth (one
    or more) with no shallower framework op starting between them: siblings inside one
    op, and the top-level ops under a step's annotation."""
    s = ctx.trace.slices
    mine = ctx.trace.lane_slices(lane)
    return _level_gaps(ctx, mine[s.kind[mine] == int(Kind.CPU_OP)], 1)


def tracer_per_event_ns(ctx: Ctx, lane: int) -> float | None:
    """ns JAX's Python tracer adds per event recorded on ``lane``, read off the capture as
    ``torch.profiler``'s is: :data:`COST_PER_GAP` times the :data:`GAP_QUANTILE` gap
    between consecutive slices of the thread at one depth (Python frames and the
    runtime's calls in them).  None where the capture holds no Python tracer's frames
    (the tracer off: its events are the runtime's own, fewer and far apart), too few
    gaps or touching ones.  Once per analysis.

    Timed with and without the tracer in turn on the idle machine
    (``benchmarks/corpus/profiler_cost.py --jax``, 5 rounds), the tracer adds 220-470 ns
    per event to the un-jitted step, the per-sample calls and two loops of element reads;
    scaled by each capture's speed against the run profiled (0.99-1.76) and divided by the
    capture's quantile gap (60-220 ns), it is 2.8-3.9 over their 8 captures, mean 3.4:
    the ratio of ``torch.profiler``'s recorder holds for this one."""
    return ctx.once(("tracer_per_event", lane), lambda: _cost_of(_tracer_gaps(ctx, lane)))


def _tracer_gaps(ctx: Ctx, lane: int) -> np.ndarray:
    """The gaps at one depth of ``lane`` where it holds a JAX Python tracer's frames."""
    s = ctx.trace.slices
    mine = ctx.trace.lane_slices(lane)
    if ctx.facts.value("framework") != "jax" or not (s.kind[mine] == int(Kind.PYTHON)).any():
        return np.zeros(0)
    gaps = _level_gaps(ctx, mine, 0)
    return gaps[gaps >= 0]


def _level_gaps(ctx: Ctx, mine: np.ndarray, lowest: int) -> np.ndarray:
    """ns between each two consecutive slices of ``mine`` at the same depth (``lowest``
    or more) with no shallower one of them starting between."""
    s = ctx.trace.slices
    mine = mine[np.argsort(s.start[mine], kind="stable")]
    depth = s.depth[mine]
    out = []
    for d in np.unique(depth[depth >= lowest]).tolist():
        at = np.flatnonzero(depth == d)
        shallower = np.cumsum(depth < d)
        a, b = at[:-1], at[1:]
        same = shallower[b] == shallower[a]
        out.append(s.start[mine[b[same]]] - s.end[mine[a[same]]])
    return np.concatenate(out).astype(np.float64) if out else np.zeros(0)
