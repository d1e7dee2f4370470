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
left out); at least :data:`.eager_ops.MIN_DISPATCHES` per steady step (a jitted step makes one to
three).  The share is the step's time outside the runtime threads' kernels, so the check
needs those kernels in the trace: where the steady steps show none, the dispatch and the
math cannot be told apart and the check says nothing.  TensorFlow's eager ops run their
kernels inside the dispatching call on the main thread (``KernelAndDeviceFunc::Run``
under each ``EagerLocalExecute``), and a ``tf.function`` still runs every op through the
graph executor: such a step is a loop of tiny framework ops, the tiny-ops check's
(:func:`.eager_ops.tf_eager_step` lowers its count where no compiled function runs).

The fix compiles the step (``jax.jit``): one dispatch per step, the primitives fused.
Where the step already is one compiled program (the jitted function with the most compiled
work runs exactly once in every steady step), the ops dispatched one at a time run between
its calls and make its arguments: the batch is prepared op by op (an augmentation written
with ``jax.numpy`` in a Python generator), which is input (``eager_input_bound``), and the
fix compiles and vectorises that preparation (``jax.jit(jax.vmap(f))`` over a batch) or
moves it into the data loader.  In a training run whose dispatched programs are all
elementwise arithmetic (:mod:`.eager_ops`), the ops update the state the compiled call
returns (a hand-written optimizer applied outside ``jax.jit``): that is per-op overhead
(``op_overhead_bound``), and the fix jits the update with the gradient in one step.
Dispatches that mostly compare and reduce and make no data are metrics of the compiled
call's results (an accuracy after a jitted forward): per-op overhead as well, and the fix
computes them inside the jitted step.
The estimate, the same for every reading: the step without the profiler before (the
Python tracer's loop of calls less the tracer's cost per event it records, as fast as
the capture ran (:func:`.recorder_cost.tracer_per_event_ns`), or at
:data:`.host_estimate.PYTHON_LOOP_UNPROFILED` of its captured time where the capture
cannot tell; the kernels as captured) over the compiled step after: the matmul and
convolution kernels and the compiled step's own kernels as captured (elementwise
kernels are fused and their fresh buffers are gone), the compiled step's calls at the
same ratio, plus one dispatch.
"""

from __future__ import annotations

import numpy as np

from ...units import fmt_ns
from ...units import fmt_pct as pct
from ..results import Finding, Fix
from .batch_estimate import UNPROFILED_FLOOR
from .causes import causes_by_name
from .context import Ctx, cause_evidence, make_finding
from .eager_ops import Dispatched, measure
from .fixes import choose_fixes
from .host_estimate import PYTHON_LOOP_UNPROFILED
from .recorder_cost import tracer_per_event_ns
from .registry import Rule, rule


@rule("op_overhead_bound", "Framework overhead: many tiny ops", 0.05, 0.20,
      "registered with its thresholds and factors in :mod:`.run_rules`")
def eager_dispatch(ctx: Ctx, spec: Rule) -> Finding | None:
    d = measure(ctx)
    if d is None or (d.compiled_step and not (d.updates_state or d.splits_keys
                                              or d.reduces_results)):
        return None  # beside a compiled step, the ops make its arguments: eager_input's
    if d.splits_keys:
        return _keys_finding(ctx, spec, d)
    if d.reduces_results:
        return _metrics_finding(ctx, spec, d)
    if d.updates_state:
        return _update_finding(ctx, spec, d)
    what = (f"{d.per_step:,.0f} ops per steady-state iteration are dispatched one at a time "
            f"from Python (median {{median}} each): the step runs op by op, not compiled. ")
    fix = "Compiling the step (jax.jit) makes it one dispatch and fuses its ops. "
    return _finding(ctx, spec, d, what, fix, "Framework overhead: ops dispatched one at a time")


def _update_finding(ctx: Ctx, spec: Rule, d: Dispatched) -> Finding:
    """The training state updated op by op beside a compiled step (the gradient jitted,
    the optimizer not)."""
    what = (f"The step is one compiled program, run once a step, and the {d.per_step:,.0f} "
            f"programs per steady-state iteration dispatched one at a time from Python "
            f"between its calls (median {{median}} each) are nearly all (95% or more) "
            f"elementwise arithmetic (no read, slice, conversion, stacking or random draw of "
            f"data): in a training run that is most likely the update of the state the "
            f"compiled call returns (a hand-written optimizer's moments and parameters, a "
            f"moving average of the weights) run outside it, op by op; a batch already on "
            f"the device and only rescaled (x * scale, (x - mean) / std) would read the "
            f"same, and jitting those ops with the step removes their cost as well. ")
    fix = ("Jitting the update with the gradient in one step (one jax.jit function that "
           "computes the gradient and applies the update, the optimizer state passed in and "
           "returned) makes it part of the compiled call and fuses its ops. ")
    return _finding(ctx, spec, d, what, fix, "Training state updated op by op outside the "
                                             "compiled step")


def _keys_finding(ctx: Ctx, spec: Rule, d: Dispatched) -> Finding:
    """PRNG keys split one at a time from Python beside a compiled step (a key per layer
    split in a Python loop): tiny programs whose cost is per call, not a batch."""
    what = (f"The step is one compiled program, run once a step, and the {d.per_step:,.0f} "
            f"programs per steady-state iteration dispatched one at a time from Python "
            f"between its calls (median {{median}} each) nearly all (95% or more) split "
            f"PRNG keys and unpack them (jax.random.split, key, sub = ...): key-sized "
            f"outputs, no data read, drawn or stacked, so their cost is per call, not the "
            f"batch's. ")
    fix = ("Passing one key to the jitted step and splitting it there "
           "(jax.random.split(key, n) inside jax.jit) makes the splits part of the compiled "
           "call: one split a step is left outside. ")
    return _finding(ctx, spec, d, what, fix, "PRNG keys split one at a time outside the "
                                             "compiled step")


def _metrics_finding(ctx: Ctx, spec: Rule, d: Dispatched) -> Finding:
    """Metrics made op by op from the compiled step's results (the forward jitted, the
    accuracy and counts after it not)."""
    what = (f"The step is one compiled program, run once a step, and the {d.per_step:,.0f} "
            f"programs per steady-state iteration dispatched one at a time from Python "
            f"between its calls (median {{median}} each) mostly compare and reduce (==, "
            f"sum, mean, logical and) and read, convert, slice or draw no data: that is "
            f"most likely metrics made from what the compiled call returned (an accuracy, "
            f"confusion counts, a running mean), each op its own dispatch, not a batch "
            f"being made. ")
    fix = ("Computing the metrics inside the jitted step (returning the counts from it) or "
           "jitting the metric function once makes them part of a compiled call and fuses "
           "their ops. ")
    f = _finding(ctx, spec, d, what, fix, "Metrics computed op by op outside the "
                                          "compiled step", own=METRICS_FIX)
    shown, hidden = choose_fixes(METRICS_FIXES, ctx.facts, ctx.all_frameworks)
    f.fixes[:0] = shown
    f.hidden_fixes[:0] = hidden
    return f


@rule("eager_input_bound", "Input made op by op between compiled steps", 0.05, 0.20,
      "same grading as input-bound; >= 20 ops a step dispatched one at a time from Python "
      "outside a compiled step that runs once a step",
      factors={"compiled_step_fuses": 0.7})
def eager_input(ctx: Ctx, spec: Rule) -> Finding | None:
    d = measure(ctx)
    if d is None or not d.compiled_step or d.updates_state or d.splits_keys or \
            d.reduces_results:
        return None  # an un-jitted step, its state's update, keys split, metrics: eager_dispatch's
    what = (f"The step is one compiled program, run once a step, yet {d.per_step:,.0f} "
            f"programs per steady-state iteration are dispatched one at a time from Python "
            f"(median {{median}} each): besides the step's own call, the ops between its "
            f"calls make the batch it is given (augmentation, conversion, stacking written "
            f"with array ops), so the batch is input made op by op. ")
    fix = ("Compiling and vectorising that preparation (jax.jit(jax.vmap(f)) over a batch) "
           "makes it one dispatch and fuses its ops. ")
    return _finding(ctx, spec, d, what, fix, None)


def _finding(ctx: Ctx, spec: Rule, d: Dispatched, what: str, fix: str,
             title: str | None, own: str = "") -> Finding:
    """The finding of the dispatches ``d``, its estimate the same for either reading: the
    work without the profiler before over the compiled work after.  ``own``: the reading's
    own fix (the metrics reading's), shown in its place of the state update's; other
    readings do not show it."""
    s = ctx.trace.slices
    r = ctx.rows
    calls, share = d.calls, d.share
    median = float(np.median(s.dur[calls]))
    ratio, measured = _unprofiled(ctx, d)
    one = median * ratio
    before = (d.wall - d.kernels) * ratio + d.kernels
    after = d.kept + d.step_call_ns * ratio + one * len(r)
    causes = causes_by_name(ctx, calls, s.dur[calls], float(s.dur[calls].sum()) or 1.0)
    evidence = cause_evidence(causes)
    summary = (what.format(median=fmt_ns(median))
               + f"Each dispatch pays the tracing machinery's "
               f"Python, argument checks, an executable launch and fresh output buffers; the "
               f"kernels themselves take {pct(1.0 - share)} of the step, the rest ({pct(share)}) "
               f"is dispatch. " + fix + f"Estimate: the step without the "
               f"profiler ({fmt_ns(before / len(r))}: the loop of calls at "
               f"{ratio:.0%} of its captured time, {measured}; the kernels as captured) over "
               f"the compiled step "
               f"({fmt_ns(after / len(r))}: its matmul and convolution kernels"
               + (" and the compiled step's own" if d.compiled_step else "")
               + " as captured, the elementwise kernels fused into them"
               + (", the compiled step's calls at the same ratio" if d.compiled_step else "")
               + ", plus one dispatch).")
    return make_finding(ctx, spec, share, summary, evidence, causes=causes,
                        speedup=before / max(after, 1.0), title=title,
                        assumption=spec.factor("compiled_step_fuses"),
                        notes=("assumes the compiled step keeps only the matmul and "
                               "convolution kernels' time and its own",),
                        unseen=lambda f: _not_this_reading(f, own))


#: The metrics reading's own fix (shown first on it, on no other finding), and the state
#: update's, which it takes the place of.
METRICS_FIX, UPDATE_FIX = "metrics inside the jitted step", "jit the update with the step"
METRICS_FIXES = [
    Fix("jax", "Compute the metrics inside the jitted step: return the counts (correct "
               "predictions, true and false positives) or the batch's metric values from "
               "the jitted function and add them up on the host once a pass, instead of "
               "jax.numpy comparisons and sums after each call, each a dispatch of its own.",
        name=METRICS_FIX),
]


def _not_this_reading(f, own: str) -> str:
    """Why fix ``f`` is not shown on this reading ("" when it is): the metrics reading
    shows its own fix instead of the state update's."""
    if f.name == UPDATE_FIX and own == METRICS_FIX:
        return "the dispatches compare and reduce: metrics, not the training state's update"
    return ""


def _unprofiled(ctx: Ctx, d: Dispatched) -> tuple[float, str]:
    """(the dispatch loop's unprofiled over captured time, where it comes from): its
    captured time less the Python tracer's cost per event recorded, as fast as this
    capture ran its tracer (:func:`.recorder_cost.tracer_per_event_ns`), or the ratio
    measured for a loop the tracer records (:data:`.host_estimate.PYTHON_LOOP_UNPROFILED`)
    where the capture cannot tell.  A loop whose frames are short records more of the
    tracer than one of long calls: the un-jitted step keeps 0.50 of its captured time,
    per-sample calls 0.51, an augmentation 0.59, an optimizer loop 0.69, kernels
    included."""
    host = ctx.bd.host
    per_event = tracer_per_event_ns(ctx, host.lane)
    loop = d.wall - d.kernels
    if per_event is None or loop <= 0:
        return PYTHON_LOOP_UNPROFILED, "as measured for a loop the Python tracer records"
    st = ctx.trace.slices.start[ctx.trace.lane_slices(host.lane)]
    events = float(ctx.in_steady(st, host.starts, host.ends).sum())
    ratio = max(1.0 - events * per_event / loop, UNPROFILED_FLOOR)
    return ratio, (f"less the Python tracer's {per_event / 1e3:.2f} µs for each of its "
                   f"{events / max(len(ctx.rows), 1):,.0f} events a step, as this capture ran "
                   f"it")
