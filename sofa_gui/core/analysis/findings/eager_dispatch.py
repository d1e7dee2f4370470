"""Ops dispatched one at a time from Python: a JAX step run outside ``jax.jit`` sends every
primitive of its forward pass, its gradient and its update to the runtime as a program of
its own.  Each dispatch pays the Python of the
tracing machinery (``bind``, the JVP and transpose rules), argument checks, an executable
launch and fresh output buffers, and the math between dispatches is small: the step is
host overhead, though few framework ops per step are recorded (tens of dispatches, each
under hundreds of Python frames), too few for the tiny-ops check.

The dispatches are counted on the main thread outside read loops: XLA executable runs
(``ExecuteHelperOnSingleDevice``), JAX's per-primitive ``PjitFunction(...)`` calls, or
``bind`` frames of the Python tracer where no runtime event is recorded (set-up calls
left out); at least :data:`MIN_DISPATCHES` per steady step (a jitted step makes one to
three).  The share is the step's time outside the runtime threads' kernels, so the check
needs those kernels in the trace: where the steady steps show none, the dispatch and the
math cannot be told apart and the check says nothing.  TensorFlow's eager ops run their
kernels inside the dispatching call on the main thread (``KernelAndDeviceFunc::Run``
under each ``EagerLocalExecute``), and a ``tf.function`` still runs every op through the
graph executor: such a step is a loop of tiny framework ops, the tiny-ops check's.

The fix compiles the step (``jax.jit``): one dispatch per step, the primitives fused.  The
estimate: the step without the profiler before (the Python tracer's loop of calls at
:data:`.host_estimate.PYTHON_LOOP_UNPROFILED` of its captured time, the kernels as
captured) over the compiled step after: the matmul and convolution kernels as captured
(elementwise kernels are fused into them and their fresh buffers are gone) plus one
dispatch.
"""

from __future__ import annotations

import re

import numpy as np

from ...units import fmt_ns
from ...units import fmt_pct as pct
from .. import roles as R
from ..intervals import measure_in, union
from ..results import Finding
from .causes import causes_by_name
from .context import Ctx, cause_evidence, make_finding
from .host_estimate import PYTHON_LOOP_UNPROFILED, pool_slices
from .read_rules import in_read_loops
from .registry import Rule, rule
from .work import outermost

#: Dispatches per steady step from which a step is run op by op.
MIN_DISPATCHES = 20
#: One dispatched program or op, by the event its runtime or tracer records.
DISPATCH = (re.compile(r"ExecuteHelperOnSingleDevice$"), re.compile(r"^PjitFunction\("),
            re.compile(r"^\$core\.py:\d+ bind$"))
#: Kernels a compiled step keeps: matmuls, convolutions and the library fusions around them.
KEPT_KERNEL = re.compile(r"dot|conv|gemm|matmul|ynn|onednn|mkl", re.I)


@rule("op_overhead_bound", "Framework overhead: many tiny ops", 0.05, 0.20,
      "registered with its thresholds and factors in :mod:`.run_rules`")
def eager_dispatch(ctx: Ctx, spec: Rule) -> Finding | None:
    host = ctx.bd.host
    r = ctx.rows
    if host is None or ctx.bd.device is not None or not len(r):
        return None
    calls = _dispatches(ctx, host)
    per_step = len(calls) / len(r)
    if per_step < MIN_DISPATCHES:
        return None
    s = ctx.trace.slices
    wall = float((host.ends[r] - host.starts[r]).sum()) or 1.0
    kernels, kept = _kernels(ctx, host)
    if kernels <= 0:
        return None  # no kernel apart from the dispatch: the split is not in the trace
    share = max(1.0 - kernels / wall, 0.0)
    median = float(np.median(s.dur[calls]))
    one = median * PYTHON_LOOP_UNPROFILED
    before = (wall - kernels) * PYTHON_LOOP_UNPROFILED + kernels
    after = kept + one * len(r)
    causes = causes_by_name(ctx, calls, s.dur[calls], float(s.dur[calls].sum()) or 1.0)
    evidence = cause_evidence(causes)
    summary = (f"{per_step:,.0f} ops per steady-state iteration are dispatched one at a time "
               f"from Python (median {fmt_ns(median)} each): the step "
               f"runs op by op, not compiled. Each dispatch pays the tracing machinery's "
               f"Python, argument checks, an executable launch and fresh output buffers; the "
               f"kernels themselves take {pct(1.0 - share)} of the step, the rest ({pct(share)}) "
               f"is dispatch. Compiling the step (jax.jit) makes it one dispatch and fuses "
               f"its ops. Estimate: the step without the "
               f"profiler ({fmt_ns(before / len(r))}: the loop of calls at "
               f"{PYTHON_LOOP_UNPROFILED:.0%} of its captured time, as measured for a loop the "
               f"Python tracer records; the kernels as captured) over the compiled step "
               f"({fmt_ns(after / len(r))}: its matmul and convolution kernels as captured, the "
               f"elementwise kernels fused into them, plus one dispatch).")
    return make_finding(ctx, spec, share, summary, evidence, causes=causes,
                        speedup=before / max(after, 1.0),
                        title="Framework overhead: ops dispatched one at a time",
                        assumption=spec.factor("compiled_step_fuses"),
                        notes=("assumes the compiled step keeps only the matmul and "
                               "convolution kernels' time",))


def _dispatches(ctx: Ctx, host) -> np.ndarray:
    """The main thread's steady dispatches outside read loops, of the kind recorded most
    (outermost of it: a jnp function calling another counts once)."""
    s = ctx.trace.slices
    mine = ctx.trace.lane_slices(host.lane)
    mine = mine[ctx.in_steady(s.start[mine], host.starts, host.ends)]
    mine = mine[~in_read_loops(ctx, s.start[mine])]
    best = mine[:0]
    for pat in DISPATCH:
        ids = ctx.trace.name_ids(lambda n, p=pat: bool(p.search(n)) and not R.SETUP.search(n))
        got = outermost(s.start, s.end, mine[np.isin(s.name[mine], ids)])
        if len(got) > len(best):
            best = got
    return best


def _kernels(ctx: Ctx, host) -> tuple[float, float]:
    """(ns of every runtime-thread kernel, ns of the matmul and convolution ones) inside
    the steady rows (their union: kernels of two threads at once count once)."""
    s = ctx.trace.slices
    pool = pool_slices(ctx, host)
    r = ctx.rows
    kept = pool[np.isin(s.name[pool], ctx.trace.name_ids(KEPT_KERNEL.search))]
    ns = [float(measure_in(*union(s.start[idx], s.end[idx]), host.starts[r], host.ends[r])
                .sum()) for idx in (pool, kept)]  # union and measure_in take empty sets
    return ns[0], ns[1]
