"""What a host-side fix leaves: the estimate of the fixes that take a part out of the main
thread's step (a loop of element reads, a loop of tiny ops, large copies), shared by
``host_reads_in_loop``, ``op_overhead_bound`` and ``memory_copy_bound``.

The estimate is the step without the profiler before the fix over the step after it:

* **before**: the part the fix removes, times what such a part takes without the profiler
  (the profiler records every op of a loop, and in a loop of short events that is most
  of the loop), plus the rest of the step times :data:`REST_UNPROFILED`;
* **after**: when the fix takes out most of the step (:data:`WARM_WHEN_REMOVED`), the
  math ops' own time in the rest (matmuls, convolutions, and the compute of runtime pool
  threads the main thread waits for) times :data:`REST_UNPROFILED` as before, and the
  rest's other time (the per-op work: dispatch, Python, small ops) times
  :data:`WARM_PER_OP` (the step gets short and its work runs warm); when it takes out
  less, the rest as before.  Plus what the replacement costs (one bulk read converting
  every value; nothing for a view instead of a copy).

The figures are measured by ``benchmarks/corpus/profiler_cost.py`` on the tuned corpus
cases, each loop timed with and without the profiler in turn (medians of 5 rounds, one
thread of an idle 2-core machine, two runs each; the ranges are the runs'):

* a loop of element reads (a per-sample ``.item()`` metric) runs 0.41-0.43 of its
  captured time without ``torch.profiler`` (:data:`READ_LOOP_UNPROFILED`); a batch-1
  conv net's forward, every op tiny, 0.42-0.68 (:data:`TINY_LOOP_UNPROFILED`); a JAX
  loop of element reads recorded by the Python tracer 0.53-0.57
  (:data:`PYTHON_LOOP_UNPROFILED`); a large copy's time is its memory traffic, not the
  profiler's;
* the rest of those steps 0.55-0.82 (:data:`REST_UNPROFILED`);
* once the read loop or the copies are gone, the per-op work that stays took 0.20-0.22
  (a training step after its ``.item()`` loop) and 0.15-0.21 (after 34 MB of copies) of
  its captured time, the math ops' own time counted as the rest (:data:`WARM_PER_OP`).
  That part is the machine's as much as the program's: the step's code and data stay in
  the caches when the step is short, and on the shared machine measured the work after
  a 4 ms sleep ran as slowly as after the loop.  A trace cannot show how much warmer the
  step gets on another machine: the estimate says what it assumes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from ...trace import Kind
from ...units import fmt_pct as pct
from .. import roles as R
from ..intervals import measure_in, union
from .causes import self_times
from .context import Ctx

#: Unprofiled over captured time of a torch.profiler loop of element reads.
READ_LOOP_UNPROFILED = 0.42
#: The same for a loop of tiny framework ops.
TINY_LOOP_UNPROFILED = 0.55
#: The same for a loop recorded by a Python tracer (JAX, TensorFlow).
PYTHON_LOOP_UNPROFILED = 0.55
#: Unprofiled over captured time of the rest of such a step.
REST_UNPROFILED = 0.8
#: The per-op work that stays, warm and unprofiled, over its captured time.
WARM_PER_OP = 0.2
#: The fix takes out at least this share of the step: what stays runs warm.
WARM_WHEN_REMOVED = 0.5
#: Ops whose own time is the model's math (it does not shrink with the step).
MATH_OP = re.compile(r"^aten::(_slow_conv2d_forward|mkldnn_convolution|convolution_overrideable|"
                     r"_convolution|addmm|mm|bmm|baddbmm|_scaled_dot_product\w*)$")


@dataclass
class HostFix:
    """A host-side fix as shares of the main thread's time: ``removed`` (what the fix
    takes out, as captured), ``math`` (the math's own time in the rest), ``replacement``
    (what the fix still spends instead), ``unprofiled`` (the removed part's unprofiled
    over captured time) and ``what`` (the removed part, in words)."""

    removed: float
    math: float
    replacement: float = 0.0
    unprofiled: float = 1.0
    what: str = "the loop"

    @property
    def warm(self) -> bool:
        return self.removed >= WARM_WHEN_REMOVED

    def times(self) -> tuple[float, float]:
        """(step before the fix, step after it), both without the profiler, in shares of
        the captured main-thread time."""
        rest = max(1.0 - self.removed, 0.0)
        math = min(self.math, rest)
        before = self.removed * self.unprofiled + rest * REST_UNPROFILED
        if not self.warm:
            return before, rest * REST_UNPROFILED + self.replacement
        return before, math * REST_UNPROFILED + (rest - math) * WARM_PER_OP + self.replacement

    def unprofiled_share(self, part: float | None = None) -> float:
        """The share ``part`` of the captured time (the removed part by default) holds of
        the step without the profiler, when it is of the removed kind."""
        before, _ = self.times()
        part = self.removed if part is None else part
        return part * self.unprofiled / max(before, 1e-6)

    def speedup(self) -> float:
        before, after = self.times()
        return before / max(after, 1e-6)

    def basis(self) -> str:
        """The estimate's basis in words, for the finding's summary."""
        before, after = self.times()
        rest = f"the rest of the step {REST_UNPROFILED:.0%} (measured)"
        prof = (f"; without the profiler {rest}" if self.unprofiled >= 1 else
                f"; without the profiler {self.what} takes about {self.unprofiled:.0%} of its "
                f"captured time, {rest}")
        warm = (f"; of what stays, the math ops' own time ({pct(self.math)}) is counted as "
                f"before and the rest (dispatch, Python, small ops) at {WARM_PER_OP:.0%} of "
                f"its captured time: once the step is short it runs warm, as measured on a "
                f"shared 2-core machine (how much warmer a short step gets depends on the "
                f"machine; the trace cannot show it)"
                if self.warm else "; what stays keeps its time")
        return (f" Estimate: the step without the profiler before the fix over the step "
                f"after it ({pct(before)} -> {pct(after)} of the captured time){prof}{warm}.")


def rest_math(ctx: Ctx, host, ws: np.ndarray, we: np.ndarray, removed_s: np.ndarray,
              removed_e: np.ndarray) -> float:
    """ns of math in the windows ``ws``/``we`` outside the removed intervals: the own time
    of the main thread's math ops (:data:`MATH_OP`) and the compute of runtime pool threads
    (XLA, ``tf_Compute``) the main thread waits for."""
    s = ctx.trace.slices
    mine = ctx.trace.lane_slices(host.lane)
    ops = mine[(s.kind[mine] == int(Kind.CPU_OP))
               & np.isin(s.name[mine], ctx.trace.name_ids(MATH_OP.match))]
    ops = ops[_inside(s.start[ops], ws, we) & ~_inside(s.start[ops], removed_s, removed_e)]
    total = float(self_times(ctx, ops).sum()) if len(ops) else 0.0
    pool = pool_slices(ctx, host)
    if len(pool):
        ps, pe = union(s.start[pool], s.end[pool])
        rs, re_ = union(removed_s, removed_e)
        total += float(measure_in(ps, pe, ws, we).sum()) - float(measure_in(ps, pe, rs, re_).sum())
    return max(total, 0.0)


def pool_slices(ctx: Ctx, host) -> np.ndarray:
    """The compute slices of the runtime pool threads (XLA, ``tf_Compute``) beside
    ``host``'s main thread, in its rank."""
    lanes = [x for x in np.flatnonzero(ctx.trace.lanes.rank == ctx.trace.lanes.rank[host.lane])
             if x != host.lane]
    if not lanes:
        return np.zeros(0, np.int64)
    other = np.concatenate([ctx.trace.lane_slices(x) for x in lanes]).astype(np.int64)
    return R.pool_work(ctx.trace, other)


def _inside(t: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Per time: inside one of the intervals."""
    if not len(starts):
        return np.zeros(len(t), bool)
    a, b = union(starts, ends)
    k = np.searchsorted(a, t, side="right") - 1
    return (k >= 0) & (t < b[np.maximum(k, 0)])
