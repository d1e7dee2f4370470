"""What a host-side fix leaves: the estimate of the fixes that take a part out of the main
thread's step (a loop of element reads, a loop of tiny ops, large copies), shared by
``host_reads_in_loop``, ``op_overhead_bound`` and ``memory_copy_bound``.

The estimate is the step without the profiler before the fix over the step after it:

* **before**: the part the fix removes, times what such a part takes without the profiler
  (the profiler records every op of a loop, and in a loop of short events that is most
  of the loop), plus the rest of the step: its math ops' own time as captured (matmuls,
  convolutions and their gradients, and the kernels of real size of runtime pool threads
  the main thread waits for: their time is the math, which the recorder does not add to)
  and its per-op work (dispatch, Python, small ops, a graph executor's kernels of a few
  microseconds: :data:`POOL_OP_NS`) times what the recorder leaves of per-op work;
* **after**: when the fix takes out most of the step (:data:`WARM_WHEN_REMOVED`), what
  stays runs warmer, by how long the removed part kept it away each step: work that
  runs again right after itself is fastest, and the slow-down grows with the time between
  two runs up to :data:`COLD_AFTER_NS`, where per-op work runs :data:`COLD_PER_OP` times
  slower (:data:`COLD_AFTER_COPIES` after large copies, which flush the caches) and the
  math :data:`COLD_MATH` times; after the fix what stays is away only for the replacement's
  own time.  When the fix takes out less, what stays keeps its time.  Plus what the
  replacement costs (one read of the whole result: a call of the loop's kind and the
  conversion of every value; nothing for a view instead of a copy).

The figures are measured by ``benchmarks/corpus/profiler_cost.py`` on the tuned corpus
cases, each loop timed with and without the profiler in turn (medians of 5 rounds, one
thread of an idle 2-core machine, two runs each; the ranges are the runs'):

* a loop of element reads (a per-sample ``.item()`` metric) runs 0.40-0.43 of its
  captured time without ``torch.profiler`` (:data:`READ_LOOP_UNPROFILED`; a report's
  ``str(tensor)`` formatting, with more Python between its events, 0.52); a batch-1
  conv net's forward, every op tiny, 0.42-0.68 (:data:`TINY_LOOP_UNPROFILED`, also the
  per-op work of the rest); a JAX loop of element reads recorded by the Python tracer
  0.53-0.61 (:data:`PYTHON_LOOP_UNPROFILED`); TensorFlow's eager element picks, whose
  recorder costs less per event, 0.63-0.75, and the rest of that step 0.85
  (:data:`TF_UNPROFILED`); a large copy's time is its memory traffic, not the
  profiler's;
* the rest of those steps, read as its math as captured and its per-op work at the
  recorder's ratio, 0.64 (0.59 measured) for a short inference step of small ops, 0.66
  (0.74) for a training step, 0.92 (0.91) for a JAX step that is mostly its compiled
  convolution;
* once the loop is gone, the rest ran 1.16x faster after a 0.4 ms formatting loop, 2.0x
  after a 3.1 ms ``.item()`` loop, 2.0-2.3x after a 4-5 ms loop of TensorFlow element
  reads, 1.5x after a 9 ms JAX read loop (mostly its convolution's compute), and 3.8x
  after 4.3 ms of copies (34 MB a step).  Timed apart, a small training step ran 1.0-1.15x
  slower after 0.3 ms of ``.item()`` reads or a sleep, 1.2-2.4x after 1-2 ms, 2.2-2.8x
  after 4-16 ms; a 512x128x256 matmul 1.3-2.1x after 4-16 ms
  (``benchmarks/corpus/rest_warmth.py``).  That part is the machine's as much as the
  program's (the step's code and data stay in the caches when the step is short; a sleep
  of the loop's length cools them as much): a trace cannot show how much warmer the step
  gets on another machine, and the estimate says what it assumes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from ...trace import Kind
from ...units import fmt_pct as pct
from .. import roles as R
from ..intervals import covered, measure_in, union
from .batch_estimate import unprofiled_ns
from .causes import self_times
from .context import Ctx
from .recorder_cost import per_event_ns
from .work import name_medians

#: Unprofiled over captured time of a torch.profiler loop of element reads.
READ_LOOP_UNPROFILED = 0.42
#: The same for a loop of tiny framework ops, and for the per-op work of a step's rest.
TINY_LOOP_UNPROFILED = 0.55
#: The same for a loop recorded by a Python tracer (JAX, TensorFlow).
PYTHON_LOOP_UNPROFILED = 0.55
#: The same for TensorFlow's eager ops (a loop of element picks, the rest's per-op work).
TF_UNPROFILED = 0.75
#: The fix takes out at least this share of the step: what stays runs warmer.
WARM_WHEN_REMOVED = 0.5
#: Away this long (ns) each step, what stays runs its slowest: per-op work this many times
#: slower than right after itself, after large copies this many, the math ops this many.
COLD_AFTER_NS = 3_000_000
COLD_PER_OP, COLD_AFTER_COPIES, COLD_MATH = 2.5, 4.0, 1.5
#: A runtime pool kernel whose own time is under this (the median of its name's) is the
#: runtime's per-op work (executing the graph, variable reads, elementwise updates of small
#: tensors), not the model's math.
POOL_OP_NS = 10_000
#: Ops whose own time is the model's math (it does not shrink with the step).
MATH_OP = re.compile(r"^aten::(_slow_conv2d_forward|mkldnn_convolution|convolution_overrideable|"
                     r"_convolution|addmm|mm|bmm|baddbmm|_scaled_dot_product\w*)$")
#: A convolution's gradients (of its input and of its weight) are its math as much as its
#: forward is: the rest's math counts them with :data:`MATH_OP`.
GRAD_MATH_OP = re.compile(r"^aten::(convolution_backward|convolution_backward_overrideable|"
                          r"mkldnn_convolution_backward\w*|_slow_conv2d_backward\w*)$")


#: A fix that saves at least this share of the step stands clear of what steps vary by on
#: their own (5-10% on a shared machine; the advisor's noise floor is 5%): under it the
#: confidence falls in proportion to the gain.
CLEAR_GAIN = 0.08


def clear_of_noise(speedup: float) -> float:
    """Confidence factor of a fix estimated at ``speedup``: 1 when it saves
    :data:`CLEAR_GAIN` of the step or more, in proportion to the saving under it, 0 when
    the estimate promises no gain (a finding whose own fix would not pay is no reading of
    what bounds the step)."""
    gain = 1.0 - 1.0 / max(speedup, 1e-6)
    if not gain > 0.0:  # no gain, or no number (NaN)
        return 0.0
    return min(gain / CLEAR_GAIN, 1.0)


def cooled(cold: float, away_ns: float) -> float:
    """How many times slower work runs after ``away_ns`` away from it, at most ``cold``."""
    return 1.0 + (cold - 1.0) * min(max(away_ns, 0.0) / COLD_AFTER_NS, 1.0)


@dataclass
class HostFix:
    """A host-side fix as shares of the main thread's time: ``removed`` (what the fix
    takes out, as captured), ``math`` (the math's own time in the rest), ``replacement``
    (what the fix still spends instead, unprofiled), ``unprofiled`` (the removed part's
    unprofiled over captured time), ``what`` (the removed part, in words), ``step_ns`` (the
    captured main-thread time per step, or per call where a step makes several identical
    calls: the removed part's length, :meth:`.Ctx.call_ns`), ``per_op`` (the
    recorder's unprofiled over captured time of the rest's per-op work), ``cold`` (how
    many times slower per-op work runs once the removed part keeps it away long),
    ``cold_math`` (the same for the math), ``cooling`` (where those come from, in
    words), ``bookkeeping`` (the profiler's own step
    bookkeeping: in neither step without it) and
    ``ratios`` (where the two ratios come from, in words)."""

    removed: float
    math: float
    replacement: float = 0.0
    unprofiled: float = 1.0
    what: str = "the loop"
    step_ns: float = 0.0
    per_op: float = TINY_LOOP_UNPROFILED
    cold: float = COLD_PER_OP
    cold_math: float = COLD_MATH
    cooling: str = ("as measured on a shared 2-core machine (how much warmer a short step "
                    "gets depends on the machine; the trace cannot show it)")
    bookkeeping: float = 0.0
    ratios: str = "measured"

    @property
    def warm(self) -> bool:
        return self.removed >= WARM_WHEN_REMOVED

    def parts(self) -> tuple[float, float]:
        """(math, per-op work) of the rest, unprofiled, in shares of the captured time."""
        rest = max(1.0 - self.removed - self.bookkeeping, 0.0)
        math = min(self.math, rest)
        return math, (rest - math) * self.per_op

    def away_ns(self) -> tuple[float, float]:
        """(before, after the fix): how long the rest is away each step, unprofiled."""
        return (self.removed * self.unprofiled * self.step_ns,
                self.replacement * self.step_ns)

    def times(self) -> tuple[float, float]:
        """(step before the fix, step after it), both without the profiler, in shares of
        the captured main-thread time."""
        math, ops = self.parts()
        before = self.removed * self.unprofiled + math + ops
        if not self.warm:
            return before, math + ops + self.replacement
        was, now = self.away_ns()
        eased = [cooled(c, now) / cooled(c, was) for c in (self.cold_math, self.cold)]
        return before, math * eased[0] + ops * eased[1] + self.replacement

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
        rest = (f"of the rest, the math ops' own time as captured and the per-op work "
                f"{self.per_op:.0%} ({self.ratios})")
        if self.bookkeeping > 0:
            rest += (f"; the profiler's own step bookkeeping ({pct(self.bookkeeping)} of the "
                     f"captured time) left out")
        prof = (f"; without the profiler: {rest}" if self.unprofiled >= 1 else
                f"; without the profiler {self.what} takes about {self.unprofiled:.0%} of "
                f"its captured time; {rest}")
        was, now = self.away_ns()
        warm = (f"; what stays runs warmer without the {was / 1e6:.1f} ms a step "
                f"{self.what} kept it away: per-op work runs up to {self.cold:.3g}x and the "
                f"math {self.cold_math:.3g}x slower after {COLD_AFTER_NS / 1e6:g} ms or more "
                f"away, less after less, {self.cooling}"
                if self.warm and max(self.cold, self.cold_math) > 1.0
                else "; what stays keeps its time")
        return (f" Estimate: the step without the profiler before the fix over the step "
                f"after it ({pct(before)} -> {pct(after)} of the captured time){prof}{warm}.")


def recorded_ratios(ctx: Ctx, host, starts: np.ndarray, ends: np.ndarray, removed: float,
                    wall: float, math_ns: float, bookkeeping: float,
                    fallback: float = TINY_LOOP_UNPROFILED) -> tuple[float, float, str]:
    """(the removed loop's unprofiled over captured time, the rest's per-op work's, where
    they come from) read off the events each records at what the profiler adds per event
    in this capture (:mod:`.recorder_cost`), or the measured ``fallback`` (its recorder's
    ratio: :data:`TINY_LOOP_UNPROFILED`, :data:`TF_UNPROFILED`) where the capture cannot
    tell.  ``starts``/``ends``: the loop's calls (ns); ``removed``:
    the share of ``wall`` (the steady main-thread time) the fix removes, the calls that
    gather the loop's pieces counted at the loop's events per ns; ``math_ns``: the rest's
    math (as captured); ``bookkeeping``: the share that is the profiler's step
    bookkeeping.  A loop of short calls records an event every microsecond or two, the
    rest of a step (one call per layer, Python between) far fewer: one ratio for both
    reads the rest as inflated as the loop, and the loop as inflated whatever speed the
    capture ran at."""
    per_event, read = per_event_ns(ctx, host.lane, 0.0)
    if not read:
        return fallback, fallback, "measured"
    s = ctx.trace.slices
    st = s.start[ctx.trace.lane_slices(host.lane)]  # in start order
    every = float(ctx.in_steady(st, host.starts, host.ends).sum())
    loop = float((np.searchsorted(st, ends) - np.searchsorted(st, starts)).sum())
    loop *= removed * wall / max(float((ends - starts).sum()), 1.0)
    rest = (1.0 - removed - bookkeeping) * wall - math_ns
    said = f"from the events each records, {per_event / 1e3:.2f} µs each as this capture ran"
    return (_kept(removed * wall, loop, per_event),
            _kept(rest, max(every - loop, 0.0), per_event), said)


def _kept(captured_ns: float, events: float, per_event: float) -> float:
    """Unprofiled over captured time of a part recording ``events``."""
    if captured_ns <= 0:
        return 1.0
    return unprofiled_ns(captured_ns, events, per_event) / captured_ns


def fix_named(finding, name: str):
    """The fix of ``finding`` named ``name`` (None where the finding does not show it)."""
    return next((f for f in finding.fixes if f.name == name), None)


def speedup_without(ctx: Ctx, host, removed_ns: float, faster_math_ns: float = 0.0) -> float:
    """The steady steps' speedup once ``removed_ns`` of the main thread's time (as
    captured, all steps) is gone, the steps' math (:func:`rest_math`) less
    ``faster_math_ns`` staying: the estimate of a fix that takes out one part of the
    step (grad mode's bookkeeping, half of the float64 ops' time)."""
    r = ctx.rows
    wall = float((host.ends[r] - host.starts[r]).sum()) or 1.0
    none = np.zeros(0, np.int64)
    math = rest_math(ctx, host, host.starts[r], host.ends[r], none, none)
    return HostFix(min(removed_ns / wall, 1.0), max(math - faster_math_ns, 0.0) / wall,
                   unprofiled=1.0, step_ns=ctx.call_ns(wall, len(r))).speedup()


def rest_math(ctx: Ctx, host, ws: np.ndarray, we: np.ndarray, removed_s: np.ndarray,
              removed_e: np.ndarray) -> float:
    """ns of math in the windows ``ws``/``we`` outside the removed intervals: the own time
    of the main thread's math ops (:data:`MATH_OP`, and a convolution's backward:
    :data:`GRAD_MATH_OP`) and the compute of runtime pool threads (XLA, ``tf_Compute``)
    the main thread waits for."""
    s = ctx.trace.slices
    mine = ctx.trace.lane_slices(host.lane)
    ops = mine[(s.kind[mine] == int(Kind.CPU_OP))
               & np.isin(s.name[mine], ctx.trace.name_ids(
                   lambda n: bool(MATH_OP.match(n) or GRAD_MATH_OP.match(n))))]
    ops = ops[covered(s.start[ops], ws, we) & ~covered(s.start[ops], removed_s, removed_e)]
    total = float(self_times(ctx, ops).sum()) if len(ops) else 0.0
    pool = pool_math(ctx, host)
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


def pool_math(ctx: Ctx, host) -> np.ndarray:
    """The runtime pool threads' math beside ``host``'s main thread: their compute slices
    whose name's median own time is at least :data:`POOL_OP_NS` (the runtime's per-op
    work is not math)."""
    pool = pool_slices(ctx, host)
    if not len(pool):
        return pool
    s = ctx.trace.slices
    return pool[name_medians(s.name[pool], self_times(ctx, pool)) >= POOL_OP_NS]


