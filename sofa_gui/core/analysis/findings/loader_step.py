"""A single-process DataLoader's step without the profiler's cost per recorded event.

What a batch's hand-over costs (:func:`.input_rules._handover`) is time without the
profiler: the calibration and the stated defaults are timed unprofiled.  The captured
step is not: ``torch.profiler`` adds its cost per recorded event
(:func:`.recorder_cost.per_event_ns`) to the loading and to the rest of the step, and a
loading of many tiny ops per sample (a PIL image turned into a tensor op by op) records
thousands of events a step.  Set against the captured step, the hand-over would read as
a smaller part of it than it is, and the loading as a larger one: the workers' plan
(:mod:`.loader_plan`) weighs all three in the step as it runs without the profiler, each
part its captured time less its events' cost (:func:`.batch_estimate.unprofiled_ns`,
never under :data:`.batch_estimate.UNPROFILED_FLOOR` of it).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...units import fmt_ns
from ..intervals import union
from .batch_estimate import PROFILER_NS_PER_EVENT, unprofiled_ns
from .causes import nested_in
from .context import Ctx
from .copy_rules import ELEMENT_BYTES
from .recorder_cost import per_event_ns
from .work import slice_args


@dataclass(frozen=True)
class UnprofiledStep:
    """The steady step's means (ns), as captured and without the profiler's cost per
    event: ``wall`` / ``load`` captured, ``bare_wall`` / ``bare_load`` without it;
    ``per_event`` that cost (ns) and whether the capture told it (``read``)."""

    wall: float
    load: float
    bare_wall: float
    bare_load: float
    per_event: float
    read: bool

    @property
    def step_factor(self) -> float:
        """Captured over unprofiled step: scales a share of the captured step of
        unprofiled time (the hand-over) to a share of the unprofiled one."""
        return self.wall / max(self.bare_wall, 1.0)

    @property
    def load_factor(self) -> float:
        """The loading's share of the unprofiled step over its share of the captured one."""
        if self.load <= 0:
            return 1.0
        return (self.bare_load / self.load) * self.step_factor

    def sentence(self) -> str:
        how = "read off the capture" if self.read else "assumed"
        return (f"the step without the profiler's cost per recorded event ({self.per_event:.0f} "
                f"ns, {how}): {fmt_ns(self.bare_wall)} against {fmt_ns(self.wall)} captured, "
                f"its loading {fmt_ns(self.bare_load)} against {fmt_ns(self.load)}")


def unprofiled_step(ctx: Ctx) -> UnprofiledStep:
    """The steady step and its loading (the main thread's ``data_loading`` role) without
    the profiler's cost of the events the main thread records in each; once per analysis."""
    return ctx.once("loader_unprofiled_step", lambda: _read(ctx))


def _read(ctx: Ctx) -> UnprofiledStep:
    host, r = ctx.bd.host, ctx.rows
    if host is None or not len(r):
        return UnprofiledStep(1.0, 0.0, 1.0, 0.0, 0.0, False)
    s = ctx.trace.slices
    ws, we = host.starts[r], host.ends[r]
    mine = ctx.trace.lane_slices(host.lane)
    at = s.start[mine]
    events = sum(int(((at >= a) & (at < b)).sum()) for a, b in zip(ws.tolist(), we.tolist()))
    dl = host.role_slices.get("data_loading", np.zeros(0, np.int64))
    la, lb = union(s.start[dl], s.end[dl])
    k = np.searchsorted(la, at, side="right") - 1
    in_load = (k >= 0) & (at < lb[np.clip(k, 0, None)]) if len(la) else np.zeros(len(at), bool)
    load_events = sum(int((in_load & (at >= a) & (at < b)).sum())
                      for a, b in zip(ws.tolist(), we.tolist()))
    n = len(r)
    wall = float((we - ws).sum()) / n
    load = float(host.column("data_loading")[r].sum()) / n
    cost, read = per_event_ns(ctx, host.lane, PROFILER_NS_PER_EVENT)
    bare_load = unprofiled_ns(load, load_events / n, cost)
    bare_rest = unprofiled_ns(max(wall - load, 0.0), (events - load_events) / n, cost)
    return UnprofiledStep(wall, load, bare_load + bare_rest, bare_load, cost, read)


#: The collate's ops that each make one tensor of the batch: a stack of the samples'
#: tensors (its ``aten::view`` of the result has the batch's shape), and ``torch.tensor``
#: of the samples' Python numbers (a label per sample: its ``aten::lift_fresh``).
_STACK, _VIEW, _FRESH = "aten::stack", "aten::view", "aten::lift_fresh"


def collate_tensors(ctx: Ctx, calls: np.ndarray) -> tuple[float, float | None, str]:
    """(tensors per batch, MB per batch or None where a shape is not recorded, how they
    were told) the loader ``calls`` (one per batch) collate: each call's stacks, and the
    tensors it builds from the samples' numbers once its first stack has run (the per
    sample ``torch.tensor`` calls of a Dataset come before it)."""
    s, name = ctx.trace.slices, ctx.trace.name_of
    inner = nested_in(ctx, calls) if len(calls) else np.zeros(0, np.int64)
    inner = inner[np.argsort(s.start[inner], kind="stable")]
    stacks, fresh = [], []
    for c in calls.tolist():
        mine = inner[(s.start[inner] >= s.start[c]) & (s.start[inner] < s.start[c] + s.dur[c])]
        st = [j for j in mine.tolist() if name(j) == _STACK]
        if st:
            stacks += st
            fresh += [j for j in mine.tolist() if name(j) == _FRESH
                      and s.start[j] > s.start[st[0]]]
    n = max(len(calls), 1)
    tensors = max((len(stacks) + len(fresh)) / n, 1.0)
    how = (f"its collate's {_STACK} calls" + (f" and {_FRESH} of the samples' numbers after "
                                              f"them" if fresh else ""))
    sizes = [_stacked_bytes(ctx, j, inner) for j in stacks] + [_bytes(ctx, j) for j in fresh]
    if not stacks or any(b is None for b in sizes):
        return tensors, None, how
    return tensors, sum(sizes) / 1e6 / n, how


def _bytes(ctx: Ctx, j: int, k: int = 0) -> int | None:
    """Bytes of slice ``j``'s ``k``-th recorded input; None where not recorded."""
    dims = slice_args(ctx, j).get("Input Dims")
    types = slice_args(ctx, j).get("Input type")
    d = dims[k] if isinstance(dims, list) and len(dims) > k else None
    if not isinstance(d, list) or not all(isinstance(x, int) for x in d) or \
            not isinstance(types, list) or len(types) <= k or types[k] not in ELEMENT_BYTES:
        return None
    return ELEMENT_BYTES[types[k]] * int(np.prod(d, dtype=np.int64))


def _stacked_bytes(ctx: Ctx, j: int, inner: np.ndarray) -> int | None:
    """Bytes a stack makes: its samples' recorded shapes, else its own view of the result."""
    dims = slice_args(ctx, j).get("Input Dims")
    samples = dims[0] if isinstance(dims, list) and dims and isinstance(dims[0], list) else []
    types = slice_args(ctx, j).get("Input type")
    size = ELEMENT_BYTES.get(types[0] if isinstance(types, list) and types else "", 4)
    if samples and all(isinstance(d, list) and all(isinstance(x, int) for x in d)
                       for d in samples):
        return sum(size * int(np.prod(d, dtype=np.int64)) for d in samples)
    s = ctx.trace.slices
    end = s.start[j] + s.dur[j]
    view = [v for v in inner.tolist() if s.start[j] < s.start[v] < end
            and ctx.trace.name_of(v) == _VIEW]
    return _bytes(ctx, view[-1]) if view else None
