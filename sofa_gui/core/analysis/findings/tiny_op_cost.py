"""What a loop of tiny ops costs (:mod:`.run_rules`' tiny-ops check): each op's fixed cost
per call (its time, less the data work of an instance on a larger input than its name's
usual one, and inside the optimizer's step what its name costs on the smallest
parameters), and the gaps in which a loaded machine descheduled the loop's thread."""

from __future__ import annotations

import numpy as np

from ...units import fmt_ns
from ..host_side import window_of
from .context import Ctx
from .work import elements, input_dims, name_quantiles

#: An optimizer op's fixed cost is what its name costs on the smallest parameters: this
#: quantile of its durations in the optimizer's steps.
OPTIMIZER_FIXED_Q = 0.1
#: Instances of a name whose input sizes give the name's typical input; the longest
#: instances of a name whose inputs are read (reading recorded inputs is the cost).
SIZE_SAMPLE = 32
LONGEST_READ = 64
#: Ops nested in an autograd node whose input shapes stand for the node's.
NESTED_SAMPLE = 4


def per_call_ns(ctx: Ctx, host, ops: np.ndarray, typical: np.ndarray,
                opt: np.ndarray) -> np.ndarray:
    """Per op, the time that is its fixed cost per call.  An instance over twice its
    name's typical time on a larger input than the name's typical one (a ``ViewBackward0``
    whose reshape copies a longer sequence's gradient) spends the excess on data work; a
    long instance on the usual input (a preempted op) keeps its time.  Inside the
    optimizer's step (``opt``), whose fix (``foreach``, ``fused``) still does each op's
    math over every parameter, an op counts what its name costs on the smallest
    parameters."""
    s = ctx.trace.slices
    own = s.dur[ops].astype(np.float64)
    longer = _longest_per_name(s.name[ops], own, np.flatnonzero(own > 2 * typical))
    if len(longer):
        more = _larger_inputs(ctx, host, ops, longer)
        own[longer[more]] = typical[longer[more]]
    if opt.any():
        fixed = name_quantiles(s.name[ops[opt]], own[opt], OPTIMIZER_FIXED_Q)
        own[opt] = np.minimum(own[opt], fixed)
    return own


def _longest_per_name(names: np.ndarray, dur: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """``idx`` less all but the :data:`LONGEST_READ` longest of each name."""
    if not len(idx):
        return idx
    order = idx[np.lexsort((-dur[idx], names[idx]))]  # by name, longest first
    _, first = np.unique(names[order], return_index=True)
    rank = np.arange(len(order)) - np.repeat(first, np.diff(np.append(first, len(order))))
    return np.sort(order[rank < LONGEST_READ])


def _larger_inputs(ctx: Ctx, host, ops: np.ndarray, longer: np.ndarray) -> np.ndarray:
    """Per op of ``ops[longer]``: its input is larger than its name's median input (from
    up to :data:`SIZE_SAMPLE` instances of the name)."""
    s = ctx.trace.slices
    sizes = _input_sizes(ctx, host, ops[longer])
    out = np.zeros(len(longer), bool)
    for name in np.unique(s.name[ops[longer]]).tolist():
        of = np.flatnonzero(s.name[ops] == name)
        sample = of[:: max(len(of) // SIZE_SAMPLE, 1)]
        usual = float(np.median(_input_sizes(ctx, host, ops[sample])))
        mine = s.name[ops[longer]] == name
        out[mine] = sizes[mine] > usual
    return out


def _input_sizes(ctx: Ctx, host, ops: np.ndarray) -> np.ndarray:
    """Per op, the elements of its largest recorded input; for an op that records none
    (an autograd node), of the largest input among the first ops nested in it (0 where
    no shapes are recorded)."""
    s = ctx.trace.slices
    if "lane_by_start" not in ctx.memo:
        mine = ctx.trace.lane_slices(host.lane)
        ctx.memo["lane_by_start"] = mine[np.argsort(s.start[mine], kind="stable")]
    mine = ctx.memo["lane_by_start"]
    first = np.searchsorted(s.start[mine], s.start[ops], side="right")
    out = np.zeros(len(ops), np.float64)
    for k, j in enumerate(ops.tolist()):
        out[k] = max((elements(d) for d in input_dims(ctx, j)), default=0)
        if not out[k]:
            inner = mine[first[k]:first[k] + NESTED_SAMPLE]
            inner = inner[s.start[inner] < s.end[j]]
            out[k] = max((elements(d) for i in inner.tolist() for d in input_dims(ctx, i)),
                         default=0)
    return out


#: A gap this long between two ops of a tight loop, with no op open, on a machine whose
#: other processes held at least DESCHED_BUSY cores, is time the thread was descheduled.
DESCHED_NS, DESCHED_BUSY = 1_000_000, 0.5


def descheduled(ctx: Ctx, host, ops: np.ndarray, gap: np.ndarray) -> tuple[int, str]:
    """(ns, note): gaps >= 1 ms between the loop's ops, inside no region but the step
    itself, when the run facts show other processes holding cores.  Descheduled time
    grows with the work (the thread gets a share of a core), so it is left out of the
    wall the share is taken of; a gap inside some region (a DataLoader ``__next__``, a
    Python function) is that code running and stays in, as does every gap without proof
    of a shared machine."""
    other, cores = ctx.facts.get("cpu_other"), ctx.facts.get("cpu_cores")
    if not other.known or float(other.value) < DESCHED_BUSY:
        return 0, ""
    s = ctx.trace.slices
    big = np.flatnonzero(gap >= DESCHED_NS)
    big = big[_bare(ctx, host, s.end[ops[big]], s.start[ops[big + 1]])] if len(big) else big
    if not len(big):
        return 0, ""
    ns = int(gap[big].sum())
    held = f"{float(other.value):.1f}" + (f" of {cores.value}" if cores.known else "")
    return ns, (f" while it runs ({len(big)} gaps >= {fmt_ns(DESCHED_NS)} with no op or region "
                f"but the step open, {fmt_ns(ns)} in all, are left out: other processes held "
                f"{held} cores ({other.proof}), so the thread was descheduled, and that time "
                f"shrinks with the work)")


def _bare(ctx: Ctx, host, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Per gap ``[lo, hi)``: no slice of the main thread covers it except its iteration's
    own marker (a span >= 0.9 x the iteration, e.g. ``ProfilerStep#N``; judged in the
    iteration the slice starts in); outside every iteration, no slice at all.  One sorted
    pass over the lane, a binary search per gap."""
    s = ctx.trace.slices
    mine = ctx.trace.lane_slices(host.lane)
    mine = mine[np.argsort(s.start[mine], kind="stable")]
    w_sl = window_of(s.start[mine], host.starts, host.ends)
    step = (host.ends - host.starts)[np.maximum(w_sl, 0)]
    marker = (w_sl >= 0) & (s.dur[mine] >= 0.9 * step)

    def covered(idx: np.ndarray) -> np.ndarray:
        if not len(idx):
            return np.zeros(len(lo), bool)
        reach = np.maximum.accumulate(s.end[idx])
        k = np.searchsorted(s.start[idx], lo, side="right")
        return (k > 0) & (reach[np.maximum(k - 1, 0)] >= hi)

    w = window_of(lo, host.starts, host.ends)
    return np.where(w >= 0, ~covered(mine[~marker]), ~covered(mine))
