"""Compilation that recurs in steady state, measured: the same function traced and
compiled again step after step (a jitted function called with a new input shape each step,
a ``torch.compile`` region whose guards fail on every new shape).

The work counted is, on the main thread, every compile span (XLA's ``backend_compile``,
JAX's lowering, TorchDynamo's frame compile) and, when the compile runs inside the call of
a jitted function (``PjitFunction(f)``, a ``tf.function``), that call from its start to
the compile's end: the call traces the function first, then lowers and compiles it, and
only then runs it.  It recurs when one function compiles in at least half of the steady
iterations (and two): the compile calls ``startup_cost`` leaves out as not one-off.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from ..host_side import window_of
from ..intervals import measure_in, union
from ..iterations.dispatch import dispatch_ids
from .context import Ctx
from .work import frame_function, outermost

#: Spans of compile work: XLA's and TorchDynamo's compiles (not ``CompiledFunction`` or a
#: ``Torch-Compiled Region``: those run compiled code), JAX's lowering and tracing.
COMPILE = re.compile(r"[Cc]ompile(?!d)|^lower_sharding_computation|^lower_jaxpr|"
                     r"^trace_to_jaxpr|^dynamo$")
#: A compile span shorter than this is bookkeeping, not compilation.
MIN_COMPILE_NS = 100_000


@dataclass
class Recompiles:
    """What recurring compiles cost the steady iterations."""

    function: int  # name id of the function compiled again (its jitted call, else the span)
    n_rows: int  # steady iterations that compile it
    spans: np.ndarray  # the steady compile spans (slice indexes)
    per_row: np.ndarray  # ns of compile work per steady row (``ctx.rows`` order)
    starts: np.ndarray  # the compile work as disjoint intervals
    ends: np.ndarray
    wall: float  # ns of the steady rows

    @property
    def spent(self) -> float:
        return float(self.per_row.sum())

    @property
    def share(self) -> float:
        return min(self.spent / self.wall, 1.0)


def recompiles(ctx: Ctx) -> Recompiles | None:
    """The steady iterations' recurring compile work (None: none recurs); once per
    analysis."""
    if "recompiles" not in ctx.memo:
        ctx.memo["recompiles"] = _measure(ctx)
    return ctx.memo["recompiles"]


def _measure(ctx: Ctx) -> Recompiles | None:
    host = ctx.bd.host
    if host is None or ctx.bd.whole_trace or not len(ctx.rows):
        return None
    comp, owner = _compiles(ctx, host.lane)
    if not len(comp):
        return None
    s = ctx.trace.slices
    w = window_of(s.start[comp], ctx.bd.starts, ctx.bd.ends)
    steady = (w >= 0) & ctx.ph.steady[np.maximum(w, 0)]
    fn = np.where(owner >= 0, s.name[np.maximum(owner, 0)], s.name[comp])
    key = _recurring(ctx, fn[steady], w[steady])
    if key is None:
        return None
    lo = np.where(owner >= 0, s.start[np.maximum(owner, 0)], s.start[comp])
    us_, ue = union(lo, s.end[comp])
    r = ctx.rows
    per_row = measure_in(us_, ue, ctx.bd.starts[r], ctx.bd.ends[r]).astype(np.float64)
    wall = float((ctx.bd.ends[r] - ctx.bd.starts[r]).sum()) or 1.0
    n_rows = len(np.unique(w[steady & (fn == key)]))
    return Recompiles(key, n_rows, comp[steady], per_row, us_, ue, wall)


def _compiles(ctx: Ctx, lane: int) -> tuple[np.ndarray, np.ndarray]:
    """(outermost compile spans of ``lane``, per span the outermost jitted-function call
    that holds it, or -1)."""
    t, s = ctx.trace, ctx.trace.slices
    mine = t.lane_slices(lane)
    ids = t.name_ids(is_compile)
    comp = outermost(s.start, s.end, mine[np.isin(s.name[mine], ids)
                                          & (s.dur[mine] >= MIN_COMPILE_NS)])
    owner = np.full(len(comp), -1, np.int64)
    calls = outermost(s.start, s.end, mine[np.isin(s.name[mine], dispatch_ids(t))])
    if not len(comp) or not len(calls):
        return comp, owner
    k = np.searchsorted(s.start[calls], s.start[comp], side="right") - 1
    held = (k >= 0) & (s.end[calls[np.maximum(k, 0)]] >= s.end[comp])
    owner[held] = calls[k[held]]
    return comp, owner


def is_compile(name: str) -> bool:
    """Whether ``name`` is compile work: a Python frame by its function, not its file."""
    return bool(COMPILE.search(frame_function(name)))


def _recurring(ctx: Ctx, fn: np.ndarray, rows: np.ndarray) -> int | None:
    """The name id of the function compiled in the most steady rows (the jitted call that
    holds the compile; the compile span itself outside one), when those are at least half
    of the steady rows and two; else None."""
    if not len(fn):
        return None
    counts = {nid: len(np.unique(rows[fn == nid])) for nid in np.unique(fn).tolist()}
    best = max(counts, key=lambda nid: (counts[nid], -nid))
    return int(best) if counts[best] >= max(2, ctx.ph.n_steady / 2) else None
