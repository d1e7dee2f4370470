"""Small-batch inference: each request runs the whole model on one input.

A batch-1 forward pass calls every layer once for one sample: the fixed cost of each call
(dispatch, allocation, the Python between calls) is paid per sample, and the math kernels
run on shapes too small to be efficient.  Batching requests amortises both.  The share is
the main thread's time outside the math ops' own work (convolutions, matmuls): what does
not grow with the batch (where the model's ops run on the runtime's pool threads, a
compiled function's graph, their time is the work: :mod:`.compiled_calls`).  The
estimate is :mod:`.batch_estimate`'s: the requests a step answers one at a time (or the
steps captured, where each answers one) batched into one call, which pays each call's
fixed cost once and the math of every input (a compiled function's ops on the pool
threads record no shapes: the part of each op's time over its fastest calls' is taken to
grow with the batch, the rest is its fixed cost).

Training on one sample a step (its math ops on a single row) pays the same fixed costs
per sample, forward, backward and update; its batch is the program's choice, which the
trace cannot show, so the estimate, for as many samples as the steps captured and at least
:data:`.chained_calls.COPIES` (as for copies of a chained step), is a lower bound for larger
batches: each step's calls run once for the batch, with the math of every sample's rows
(the weights' gradients and updates are once a batch, not a sample).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ...units import fmt_ns
from ...units import fmt_pct as pct
from ..intervals import measure_in
from ..results import Finding, Fix
from .batch_estimate import BatchFix, batch_fix
from .batching import small_batch
from .causes import causes_by_name, self_times
from .chained_calls import CHAIN_REMEDY, COPIES, chain_fix
from .compiled_calls import CompiledCalls
from .context import Ctx, cause_evidence, make_finding
from .copy_rules import host_copies
from .host_estimate import CLEAR_GAIN, clear_of_noise
from .read_rules import read_loops
from .registry import Rule, rule
from .shared_data import shared_data
from .work import TINY_NS, starts_inside


@rule("op_overhead_bound", "Framework overhead: many tiny ops", 0.05, 0.20,
      "registered with its thresholds and factors in :mod:`.run_rules`")
def small_batch_inference(ctx: Ctx, spec: Rule) -> Finding | None:
    found = small_batch(ctx)
    if found is None:
        return None
    batch, mine, math, step, small = (found.batch, found.mine, found.math, found.step,
                                      found.small)
    host, r, s = ctx.bd.host, ctx.rows, ctx.trace.slices
    training = ctx.facts.value("mode") == "training"
    wall = float((host.ends[r] - host.starts[r]).sum()) or 1.0
    work = float(self_times(ctx, math).sum()) + _in_read_loops_ns(ctx, host, r)
    work += (found.calls.pool_ns if found.calls is not None else
             0.0 if training else _long_ops_ns(ctx, mine, math))
    share = max(1.0 - work / wall, 0.0)
    ops = mine[s.depth[mine] == s.depth[mine].min()] if len(mine) else mine
    causes = causes_by_name(ctx, ops, s.dur[ops], float(s.dur[ops].sum()) or 1.0)
    evidence = cause_evidence(causes)
    calls = f"{len(mine) / len(r):,.0f} framework calls, median step {fmt_ns(step)}"
    head = (_calls_head(found.calls) if found.calls is not None else
            f"{'Training' if training else 'Inference'} on batches of {batch}: each step "
            f"runs the whole model for {batch} input{'s' if batch != 1 else ''} ({calls})"
            if small else
            f"Inference made of tiny calls: {calls}, its math ops "
            f"{fmt_ns(float(np.median(s.dur[math])))} each (median; "
            f"{len(math) / len(r):,.0f} per step), as a model run for one input or one token "
            f"at a time makes them")
    chain = chain_fix(ctx, host)  # copies batch, not a chain's calls
    summary = (f"{head}; the math ops' own work is {pct(1.0 - share)} of the step, the rest "
               f"({pct(share)}) is the fixed cost of each call and the Python between them, "
               f"paid once per call whatever its batch. "
               f"{CHAIN_REMEDY if chain else _TRAIN_REMEDY if training else _INFER_REMEDY}")
    fix = chain or batch_fix(ctx, host, per_input_ns=found.calls.grow_ns if found.calls else 0.0,
                             served=not training, samples=COPIES if training else 0)
    if fix is not None and chain is None and fix.per_step == 1 and not training:
        fix = _within_calls(ctx, fix)  # a high-level call's set-up stays with its steps
    if fix is not None:
        summary += fix.basis() + _calls_basis(found.calls)
    clear = clear_of_noise(fix.speedup()) if fix is not None else 1.0
    notes = ("assumes the requests can be batched and the math rates stated",) + (
        (f"its own estimate saves under {pct(CLEAR_GAIN)} of the step",) if clear < 1 else ())
    f = make_finding(ctx, spec, share, summary, evidence, causes=causes,
                     title=f"Framework overhead: small-batch "
                           f"{'training' if training else 'inference'}",
                     speedup=fix.speedup() if fix is not None else 0.0,
                     assumption=spec.factor("math_scales_with_batch") * clear,
                     notes=notes,
                     unseen=_compiled_unseen if found.calls is not None else None)
    # a training batch is the program's choice: its estimate, for as many samples as the
    # steps captured (at least COPIES), grows with a larger batch (each call's fixed cost
    # paid once for more); the Python kept between requests holds some that batching removes
    f.estimate_floor = fix is not None and (training or (chain is None and fix.between > 0))
    return f


def _within_calls(ctx: Ctx, fix: BatchFix) -> BatchFix:
    """The steps captured batched within one high-level call, where each call sets itself
    up anew every few iterations (``Iterations.per_call``: Keras ``predict(x,
    batch_size=1)``, each row a call of its predict function and each ``predict`` call its
    own pipeline, iterator and traced function): a larger batch inside the call runs its
    rows in fewer calls and keeps the call's set-up, so the batch is the iterations of one
    call and the set-up (its mean time over a regular iteration, as captured) stays on
    both sides.  Merging the high-level calls themselves is the set-up finding's fix."""
    x = next((x for x in ctx.iters.periodic_extras if x.per_call), None)
    if x is None or x.every < 2:
        return fix
    n, setup = min(fix.batch, x.every), max(float(x.cost_ns_mean), 0.0)
    return replace(fix, before_ns=n * fix.unit_ns + setup, batch=n,
                   after_ns=setup + fix.unit_ns + (n - 1) * fix.added.ns,
                   what=f"the {n} steps of one high-level call (a new call is set up every "
                        f"{x.every} iterations) batched into one, the call's set-up "
                        f"({fmt_ns(setup)} as captured) kept before and after")


_INFER_REMEDY = "Batching requests (or the sequences decoded together) amortises it."
_TRAIN_REMEDY = ("Training on batches of samples (padded or packed where their lengths "
                 "differ) amortises it; a larger batch than the estimate's saves more.")


def _calls_head(calls: CompiledCalls) -> str:
    return (f"Inference made of calls of the compiled function {calls.name}: "
            f"{len(calls.calls):,} in the steady steps ({calls.per_step:,.1f} a step), each "
            f"{fmt_ns(calls.call_ns)} (median) of which {fmt_ns(calls.fixed_ns)} runs none "
            f"of its ops (the call's fixed cost: its arguments converted, the function "
            f"dispatched, its graph set running) and {fmt_ns(calls.work_ns)} its ops' work "
            f"on the runtime's threads")


def _compiled_unseen(fix: Fix) -> str:
    """Compiling the step fuses ops dispatched one at a time: a compiled function's call
    runs its ops as one graph already, and compiling keeps the call's fixed cost."""
    return ("the step is already a compiled function's call, whose fixed cost compiling "
            "keeps" if fix.fact == "compiled" else "")


def _calls_basis(calls: CompiledCalls | None) -> str:
    if calls is None:
        return ""
    return (f" What each further input adds includes the part of the compiled function's "
            f"ops on the runtime's threads that grows with the input ({fmt_ns(calls.grow_ns)} "
            f"of the {fmt_ns(calls.work_ns)} one input takes: they record no shapes, so each "
            f"op's median time over its fastest calls', the 10th percentile, stands for it; "
            f"the rest is the op's fixed cost, paid once per call).")


def _long_ops_ns(ctx: Ctx, mine: np.ndarray, math: np.ndarray) -> float:
    """ns of the other ops' own time where it is long (over :data:`.work.TINY_NS` a call:
    a pooling or an ``argmax`` over a large map, a transposed convolution): work on the
    op's data, which a batch keeps, not the call's fixed cost; but for the ops on data
    every one-row request shares (:mod:`.shared_data`: a bank read for each query), which
    a batch reads once, unless they are large copies (:func:`.copy_rules.host_copies`: the
    weights cast to another type every request), memory traffic the copies' finding
    holds.  Inference only: a step that trains on one sample runs its other
    ops (the autograd's bookkeeping, the optimizer's update of every weight) once a step
    whatever its batch, so a larger batch pays them once for all its samples, as it pays
    the calls' fixed cost; and at one sample a step such an op over :data:`.work.TINY_NS`
    is a tiny op the loaded machine stretched (a ``view``, a ``fill_``, an ``add_`` in one
    capture, not the other)."""
    other = mine[~np.isin(mine, math)]
    own = self_times(ctx, other)
    long = own > TINY_NS
    long[long] = ~shared_data(ctx, other[long], math)
    copies = host_copies(ctx)[0]  # memory traffic, memory_copy_bound's, shared data or not
    if len(copies):
        long |= starts_inside(ctx, copies, other) | np.isin(other, copies)
    return float(own[long].sum())


def _in_read_loops_ns(ctx: Ctx, host, rows: np.ndarray) -> float:
    """ns of the steady rows inside read loops (host_reads_in_loop's time, not this
    finding's)."""
    loops = read_loops(ctx)
    if not len(loops.starts):
        return 0.0
    return float(measure_in(host.starts[rows], host.ends[rows], loops.starts,
                            loops.ends).sum())
