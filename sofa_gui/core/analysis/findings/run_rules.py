"""Rules about how the run spends its time as a whole: one-off start-up work, work every
N-th iteration, per-op overhead and element-wise host reads on the main thread."""

from __future__ import annotations

import numpy as np

from ...trace import Kind
from ...units import fmt_ns
from ...units import fmt_pct as pct
from ..host_side import window_of
from ..results import Evidence, Finding
from .batch_estimate import (
    ELEMENT_NS,
    bookkeeping_ns,
    large_matmuls,
    loop_batch,
    loop_data_ns,
    loop_once_ns,
)
from .batching import small_batch
from .call_overhead import compiled_call_costs
from .causes import causes_by_name
from .chained_calls import CHAIN_REMEDY, chain_fix
from .context import BELOW, Ctx, cause_evidence, make_finding
from .eager_ops import MIN_DISPATCHES, tf_eager_step
from .eager_ops import measure as eager_measure
from .host_estimate import (
    CLEAR_GAIN,
    TF_UNPROFILED,
    TINY_LOOP_UNPROFILED,
    HostFix,
    clear_of_noise,
    recorded_ratios,
    rest_math,
)
from .input_estimate import pass_rows
from .optimizer_loop import TinyLoops, fused_gain, fused_step_ns, optimizer_class
from .penalty_loop import PENALTY_FIX, penalty_cost_ns, penalty_gain, penalty_ops, penalty_unseen
from .read_rules import in_read_loops
from .recurrence import recurrence_backward
from .registry import Rule, rule
from .work import (
    TINY_NS,
    elements,
    extra_calls_share,
    grown_work,
    input_dims,
    name_medians,
    name_quantiles,
    one_off_calls,
    optimizer_steps,
    outermost,
    starts_inside,
)

#: Warm-up whose extra host time is under this fraction extra calls is a slow start.
SLOW_START_OWN_WORK = 1 / 3
SLOW_START = "warm-up makes the same calls as later steps, slower: a slow start, not " \
             "proven one-off work"
FIRST_PASS = "warm-up waits for input (the pipeline's first pass): one-off only if later " \
             "epochs are served from a cache"


@rule("startup_cost", "One-off start-up work (no per-step gain)", 0.05, 0.20,
      "fraction of the profiled time; one-off work never speeds up a step", per_step=False,
      factors={"slow_start": 0.5, "first_pass_input": 0.5})
def startup_cost(ctx: Ctx, spec: Rule) -> Finding | None:
    bd = ctx.bd
    s = ctx.trace.slices
    warm = ctx.ph.warmup
    r = ctx.rows
    med = float(np.median(bd.durations[r])) if len(r) else 0.0
    excess = [(int(i), float(bd.durations[i]) - med) for i in warm.tolist()]
    warm_ns = sum(max(x, 0.0) for _, x in excess)
    one = _one_off_events(ctx)
    extra_ns = int(s.dur[one].sum())  # not inside warm-up rows, whose excess counts
    total = warm_ns + extra_ns
    if total <= 0:
        return None
    profiled = max(ctx.trace.duration_ns, 1)
    share = min(total / profiled, 1.0)
    every = one_off_calls(ctx)
    causes = causes_by_name(ctx, every, s.dur[every], total) if len(every) else []
    if len(warm) and len(r):
        named = {ctx.trace.name_of(int(j)) for j in every.tolist()}
        causes += [c for c in grown_work(ctx, warm, r, "warm-up")
                   if c.label.split(": +")[0] not in named]
    causes.sort(key=lambda c: -c.total_ns)
    host = [bd.host.lane] if bd.host is not None else []
    evidence = [Evidence(f"warm-up iteration {i}: {fmt_ns(bd.durations[i])}, +{fmt_ns(x)} "
                         f"over the steady-state median", int(bd.starts[i]), int(bd.ends[i]),
                         ctx.it(i), host) for i, x in excess if x > 0]
    evidence = cause_evidence(causes) + evidence
    parts = []
    if warm_ns:
        parts.append(f"{len(warm)} warm-up iteration{'s take' if len(warm) > 1 else ' takes'} "
                     f"{fmt_ns(warm_ns)} more than steady-state ones (median {fmt_ns(med)})")
    if extra_ns:
        parts.append(f"{fmt_ns(extra_ns)} of one-off calls outside warm-up iterations")
    summary = (f"One-off work: {'; '.join(parts)} -- {pct(share)} of the profiled "
               f"{fmt_ns(profiled)}. It is paid once (first-use compilation, context and "
               f"allocator setup, autotuning), so it gives no per-step speed-up and is "
               f"left out of every other finding.")
    assumption, notes = 1.0, ()
    named = len(every) and bool(np.isin(window_of(s.start[every], bd.starts, bd.ends),
                                        warm).any())
    own = extra_calls_share(ctx, warm, r) if warm_ns > extra_ns and not named else 1.0
    fill = _worker_fill(ctx, warm, r)
    if fill > 0:
        summary += (f" Of it, {fmt_ns(fill)} is the main thread waiting for the DataLoader "
                    f"workers' first batches (the workers start and fill their prefetch "
                    f"queue once; later steps find a batch ready).")
        own = max(own, fill / warm_ns)
    waited = _input_fill(ctx, warm, r) if fill <= 0 else 0.0
    if waited > 0.5 * warm_ns and warm_ns > extra_ns:
        summary += (f" Most of it ({fmt_ns(waited)}) is the main thread waiting for input: "
                    f"the input pipeline's first pass (filling a cache, opening files), "
                    f"one-off only if later epochs are served from the cache.")
        if len(pass_rows(ctx)):
            summary += (" Here the repeated source's iterator is made again in it, with no "
                        "cache: a new pass over the data, paid again every pass (the "
                        "cache's estimate counts it).")
        assumption, notes = spec.factor("first_pass_input"), (FIRST_PASS,)
    elif own < SLOW_START_OWN_WORK:
        summary += (f" But the warm-up iterations make the same calls as later ones, each "
                    f"slower (only {pct(own)} of their extra host time is calls later ones "
                    f"lack, and no compile or set-up call is among them): a slow start of "
                    f"the profile (profiler start-up, cold caches, CPU clock) as much as "
                    f"one-off work of the program.")
        assumption, notes = spec.factor("slow_start"), (SLOW_START,)
    # warm-up excess rests on the iterations: when it is most of the finding, uncertain
    # iterations make it uncertain too (one-off calls are measured from the events)
    direct = not (warm_ns > extra_ns and ctx.iters_uncertain is not None)
    return make_finding(ctx, spec, share, summary, evidence, speedup=None,
                        causes=causes, one_off_ns=int(total), direct=direct,
                        assumption=assumption, notes=notes,
                        tentative=notes[0] if notes else "")


def _worker_fill(ctx: Ctx, warm: np.ndarray, rows: np.ndarray) -> float:
    """ns the warm-up iterations wait for data beyond a steady iteration's wait, when the
    run's DataLoader has workers: their start-up and first prefetch, one-off by nature
    (the same ``__next__`` call as every step, so call counts alone call it a slow start)."""
    if ctx.facts.value("dataloader") != "workers":
        return 0.0
    return _input_fill(ctx, warm, rows)


def _input_fill(ctx: Ctx, warm: np.ndarray, rows: np.ndarray) -> float:
    """ns the warm-up iterations' main thread waits for input beyond a steady one's wait."""
    host = ctx.bd.host
    if host is None or not len(warm) or not len(rows):
        return 0.0
    dl = host.column("data_loading").astype(np.float64)
    return float(np.maximum(dl[warm] - np.median(dl[rows]), 0.0).sum())


def _one_off_events(ctx: Ctx) -> np.ndarray:
    """One-off slices outside warm-up rows' excess: all of them when there are no
    iterations, else those outside the warm-up rows (in steady rows or outside every
    iteration)."""
    idx = one_off_calls(ctx)
    if not len(idx) or ctx.bd.whole_trace:
        return idx
    s = ctx.trace.slices
    w = window_of(s.start[idx], ctx.bd.starts, ctx.bd.ends)
    return idx[~np.isin(w, ctx.ph.warmup)]


@rule("periodic_extra", "Extra work every few iterations (checkpoint, eval, logging)",
      0.05, 0.20, "same grading as iteration jitter, on the time the extra iterations add",
      factors={"seen_once": 0.6})
def periodic_extra(ctx: Ctx, spec: Rule) -> Finding | None:
    bd = ctx.bd
    ex = ctx.ph.extras
    r = ctx.rows
    if not len(ex) or not len(r):
        return None
    dur = bd.durations.astype(np.float64)
    med = float(np.median(dur[r]))
    extra = np.maximum(dur[ex] - med, 0.0)
    cycle = np.union1d(r, ex)
    share = float(extra.sum() / dur[cycle].sum())
    every = (f"every {int(np.median(np.diff(ex)))} iterations" if len(ex) >= 2
             else "once in the profiled window")
    causes = grown_work(ctx, ex, r)
    evidence = [Evidence(f"iteration {int(i)}: {fmt_ns(dur[i])}, +{fmt_ns(x)} over the "
                         f"median", int(bd.starts[i]), int(bd.ends[i]), int(i))
                for i, x in zip(ex.tolist(), extra.tolist())]
    summary = (f"{len(ex)} of {len(cycle)} iterations ({every}) take {fmt_ns(extra.mean())} "
               f"more than the steady-state median {fmt_ns(med)}: {pct(share)} of the time. "
               f"The causes are the work those iterations do on top of a normal step "
               f"(checkpointing, evaluation, logging).")
    conf_note = () if len(ex) >= 2 else ("seen once",)
    return make_finding(ctx, spec, share, summary, evidence, causes=causes,
                        notes=conf_note,
                        assumption=1.0 if len(ex) >= 2 else spec.factor("seen_once"))


# -- main-thread overheads (CPU-only runs included) ----------------------------------------
#: Fewer tiny ops per iteration than this is not a loop of tiny ops.
MIN_TINY_PER_STEP = 200


def _outer_ops(ctx: Ctx, lane: int) -> np.ndarray:
    s = ctx.trace.slices
    mine = ctx.trace.lane_slices(lane)
    return outermost(s.start, s.start + s.dur, mine[s.kind[mine] == int(Kind.CPU_OP)])


@rule("op_overhead_bound", "Framework overhead: many tiny ops", 0.05, 0.20,
      f"same grading as input-bound; tiny = outermost op <= {fmt_ns(TINY_NS)} (no matmul "
      f"of >= 2 MFLOP: that is math), >= "
      f"{MIN_TINY_PER_STEP} per iteration ({MIN_DISPATCHES} where TensorFlow runs the step "
      f"eagerly, no compiled function in it); or inference on batches of a few inputs, "
      f"training on one (:mod:`.small_batch`); or >= 20 ops a step dispatched one at a "
      f"time from Python (:mod:`.eager_dispatch`)",
      factors={"batched_op_cheap": 0.7, "math_scales_with_batch": 0.7,
               "compiled_step_fuses": 0.7})
def op_overhead_bound(ctx: Ctx, spec: Rule) -> Finding | None:
    host = ctx.bd.host
    if host is None or ctx.bd.device is not None:
        return None  # with a device, launch_overhead_bound measures the same cost
    eager = eager_measure(ctx)
    if eager is not None and eager.compiled_step:
        return None  # ops dispatched between a compiled step's calls make its batch or
        # update its state: :mod:`.eager_dispatch`'s readings, not a loop of tiny ops
    sb = small_batch(ctx)
    if sb is not None and sb.models_requests(ctx):
        return None  # requests a few at a time, or a model run per request: batching them
        # is :mod:`.small_batch`'s (estimated from the repeats of a request's calls)
    calls = compiled_call_costs(ctx)
    if calls is not None and calls.per_item:
        return None  # one compiled call per item: the ops between the calls are theirs (the
        # runtime's waits on their buffers), batched away with them (call_overhead_bound)
    s = ctx.trace.slices
    ops = _outer_ops(ctx, host.lane)
    ops = ops[ctx.in_steady(s.start[ops], host.starts, host.ends)]
    # ops inside the loader are the input pipeline's cost, not the step's overhead
    ops = ops[~starts_inside(ctx, host.role_slices.get("data_loading", ops[:0]), ops)]
    ops = ops[~in_read_loops(ctx, s.start[ops])]  # a loop of reads is host_reads_in_loop's
    ops = ops[~recurrence_backward(ctx, host, ops)]  # a recurrent layer's time steps
    if len(ops) < 2:
        return None
    gap = np.append(s.start[ops[1:]] - (s.start[ops[:-1]] + s.dur[ops[:-1]]), 0)
    # a tiny op is one whose *name's* median is <= TINY_NS (one preempted instance of a
    # 3 µs op is still a tiny op, and its time counts: a loaded machine deschedules the
    # thread in proportion to its work, so the loop's share of it is the loop's)
    typical = name_medians(s.name[ops], s.dur[ops])
    n_steps = max(ctx.ph.n_steady, 1)
    steps = optimizer_steps(ctx, host.lane)
    opt = starts_inside(ctx, steps, ops)  # the optimizer's ops
    graphless = tf_eager_step(ctx, host)  # one loop tf.function removes whole
    least = MIN_DISPATCHES if graphless else MIN_TINY_PER_STEP
    small = (typical <= TINY_NS) & ~large_matmuls(ctx, ops)  # a large matmul is math
    tiny, apart = _tiny_loops(opt, small, n_steps, least)
    if not tiny.any():
        return None
    loops = TinyLoops(bool((tiny & opt).any()), bool((tiny & ~opt).any()),
                      optimizer_class(ctx, steps))
    per_step = int(tiny.sum()) / n_steps
    between = np.clip(gap, 0, TINY_NS)  # the Python between two ops of the loop
    per_call = _per_call(ctx, host, ops, typical, opt)
    span = np.where(tiny, per_call + between, 0)
    r = ctx.rows
    wall = int((host.ends[r] - host.starts[r]).sum()) or 1
    away, away_note = _descheduled(ctx, host, ops, gap)
    share = min(float(span.sum()) / max(wall - away, 1), 1.0)
    # the optimizer's loop alone is replaced by a fused step; beside the model's loop it is
    # batched with it (a batch of more samples pays the optimizer's step once for them all)
    mine = tiny & opt if loops.optimizer_only else np.zeros_like(tiny)
    fused_ns = fused_step_ns(ctx, ops[mine], per_call[mine], typical[mine], DESCHED_NS)
    fix, (data_ns, once_ns) = _loop_fix(ctx, host, ops[tiny], between[tiny], wall - away,
                             ops[tiny & ~mine], fused_ns,
                             TF_UNPROFILED if graphless else TINY_LOOP_UNPROFILED)
    alone = _optimizer_alone(ctx, host, ops, tiny & opt, between, per_call, typical,
                             wall - away) if loops.optimizer and loops.model else fix
    pen = penalty_ops(ctx, ops, opt, n_steps)  # an L2 penalty's loop: weight decay removes it
    cut = _loop_fix(ctx, host, ops[pen], between[pen], wall - away, ops[:0],
                    penalty_cost_ns(ctx, ops[pen]))[0]
    held, steady_part = _held(s.dur[ops], typical, tiny, span, wall - away)
    chain = chain_fix(ctx, host)
    est = chain or fix  # a chain's calls batch across copies of the step, not each other
    t = ops[tiny]
    causes = causes_by_name(ctx, t, span[tiny], float(span.sum()) or 1.0,
                            label=lambda n, j: f"{n} (median "
                            f"{fmt_ns(float(np.median(s.dur[t[s.name[t] == s.name[j]]])))})")
    evidence = cause_evidence(causes)
    summary = (f"{per_step:,.0f} tiny framework ops per steady-state iteration (median "
               f"{fmt_ns(float(np.median(s.dur[t])))}, <= {fmt_ns(TINY_NS)} typical) and the "
               f"Python between them take {pct(share)} of the main thread's time"
               f"{away_note}{_held_note(held, steady_part, share)}{apart}: the fixed cost per op "
               f"(dispatch, Python, allocation) dominates the math. "
               f"{CHAIN_REMEDY if chain else _remedy(loops, fused_ns, n_steps, graphless)}"
               f"{_data_note(data_ns, once_ns, n_steps)}{est.basis()}")
    lumps = min(steady_part / share, 1.0) if share else 1.0
    kept, clear = _trust(fix, data_ns, wall - away)
    notes = (("assumes the graph's own cost per op is small" if graphless else
              "assumes the batched op is cheap"),) + (
        (f"{pct(1 - lumps)} of the share is tiny ops held >= {fmt_ns(DESCHED_NS)}",)
        if lumps < 1 else ()) + ((f"the batched op still does {pct(1 - kept)} of the "
                                  f"loop's time as data work",) if kept < 1 else ()) + (
        (f"the gain is within {pct(CLEAR_GAIN)} of the step",) if clear < 1 else ())
    bare = fix.unprofiled_share(share)
    if bare < spec.moderate:  # the profiler's own cost per op is what makes it count
        summary = (f"Without the profiler's own cost per op the tiny ops would take about "
                   f"{pct(bare)} of the step, under the {pct(spec.moderate)} that counts. "
                   + summary)
    f = make_finding(ctx, spec, share, summary, evidence, causes=causes,
                     speedup=est.speedup(), sev=BELOW if bare < spec.moderate else None,
                     assumption=spec.factor("batched_op_cheap") * lumps * kept * clear,
                     notes=notes,
                     fix_gain=lambda f: penalty_gain(cut) if f.name == PENALTY_FIX
                     else fused_gain(loops, alone),
                     unseen=lambda f: penalty_unseen(f.name, pen.any()) or loops.unseen(f))
    if not loops.optimizer_only:  # the finding counts both loops: its estimate removes both
        f.estimated_speedup, f.estimated_by = est.speedup(), ""
        f.estimate_floor = chain is not None  # each copy's Python counted whole: its most
    return f


def _optimizer_alone(ctx: Ctx, host, ops: np.ndarray, own: np.ndarray, between: np.ndarray,
                     per_call: np.ndarray, typical: np.ndarray, wall: float) -> HostFix:
    """The fused optimizer's replacement of the optimizer's loop ``ops[own]`` alone, beside
    a model's loop it leaves as it is: the loop's ops and the Python between them removed,
    the math of its in-place ops kept (:func:`.optimizer_loop.fused_step_ns`)."""
    fused_ns = fused_step_ns(ctx, ops[own], per_call[own], typical[own], DESCHED_NS)
    return _loop_fix(ctx, host, ops[own], between[own], wall, ops[:0], fused_ns)[0]


def _trust(fix: HostFix, data_ns: float, wall: float) -> tuple[float, float]:
    """(share of the removed loop's unprofiled time that is dispatch, not data work the
    batched op still does; how clear of the noise its gain is): two confidence factors.
    A loop of views and scalar ops is pure dispatch; a loop of per-item copies (crops,
    flips) moves data that one batched op moves too, so the gain rests on the data work's
    estimate; and a gain of a few percent is within what steps vary by."""
    loop_ns = fix.removed * fix.unprofiled * wall
    kept = 1.0 - min(data_ns / loop_ns, 1.0) if loop_ns > 0 else 1.0
    return kept, clear_of_noise(fix.speedup())


def _data_note(data_ns: float, once_ns: float, n_steps: int) -> str:
    once = (f" With no repeated unit to batch, the batched code runs each kind of the "
            f"loop's calls once a step at its fixed cost: {fmt_ns(once_ns / n_steps)} a "
            f"step, counted as the batched op's cost too." if once_ns > 0 else "")
    if data_ns <= 0:
        return once
    return (f" The loop's copies and elementwise ops move data one batched op moves too: "
            f"{fmt_ns(data_ns / n_steps)} a step at {ELEMENT_NS} ns an element, counted as "
            f"the batched op's cost.{once}")


def _remedy(loops: TinyLoops, fused_ns: float, n_steps: int, graphless: bool) -> str:
    """What removes the counted loops and what the replacement costs, in words."""
    if graphless:
        return TF_EAGER_REMEDY
    model = ("Batching them (one op on stacked inputs) removes the tiny ops; the batched "
             "calls cost one repeat of the loop and the other repeats' matmul FLOPs.")
    if not loops.optimizer:
        return model
    fused = ("The optimizer's tiny ops are its per-parameter update inside Optimizer.step: "
             "the fused implementation does it in one op per parameter group")
    if not loops.optimizer_only:
        return (f"{fused}. {model} The estimate batches the optimizer's ops with the "
                f"model's: a step on more samples pays the optimizer's update once for all; "
                f"the fused optimizer's own replaces the optimizer's loop alone.")
    return (f"{fused}, which costs the math of the loop's in-place ops "
            f"({fmt_ns(fused_ns / n_steps)} a step: each op's time over its fixed cost, the "
            f"time its name takes on the smallest parameters; the out-of-place ops' "
            f"temporaries go).")


#: What removes a TensorFlow step's eager ops, in words.
TF_EAGER_REMEDY = (
    "They are TensorFlow ops run eagerly: each is dispatched from Python on its own, its "
    "kernel run inside the dispatch, and no compiled function runs in the step. Wrapping "
    "the step (or the model's call) in tf.function runs them as one graph, its ops' "
    "kernels without the Python and dispatch around each (jit_compile=True fuses them "
    "too); the estimate removes the ops and the Python between them and keeps the rest "
    "of the step, both at TensorFlow's recorder's cost per op.")


def _tiny_loops(opt: np.ndarray, tiny: np.ndarray, n_steps: int,
                least: int = MIN_TINY_PER_STEP) -> tuple[np.ndarray, str]:
    """(the tiny ops that make a loop, a note on those left out).  The optimizer's
    per-tensor ops (inside its step: ``opt``) and the other tiny ops are two loops with two
    fixes (a foreach or fused optimizer; batching or compiling the model's calls), and each
    is a loop of tiny ops only with ``least`` or more per iteration
    (:data:`MIN_TINY_PER_STEP`; :data:`.eager_ops.MIN_DISPATCHES` for a TensorFlow step run
    eagerly, whose fix, ``tf.function``, removes every op's dispatch at once).  Pooled, a
    training step's own few per-layer ops (its backward's node per layer and per
    parameter, a residual add) would pass the count on the optimizer's ops, though no one
    fix removes both and batching removes neither of them."""
    keep = np.zeros(len(tiny), bool)
    left = []
    for part, what in ((tiny & opt, "tiny ops of the optimizer's step"),
                       (tiny & ~opt, "other tiny ops")):
        per_step = int(part.sum()) / n_steps
        if per_step >= least:
            keep |= part
        elif per_step >= 1:
            left.append(f"the {per_step:,.0f} {what} per iteration")
    note = (f" ({' and '.join(left)}, under {least}, are no loop of their own "
            f"and are not counted)" if keep.any() and left else "")
    return keep, note


#: An optimizer op's fixed cost is what its name costs on the smallest parameters: this
#: quantile of its durations in the optimizer's steps.
OPTIMIZER_FIXED_Q = 0.1


def _per_call(ctx: Ctx, host, ops: np.ndarray, typical: np.ndarray,
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


#: Instances of a name whose input sizes give the name's typical input; the longest
#: instances of a name whose inputs are read (reading recorded inputs is the cost).
SIZE_SAMPLE = 32
LONGEST_READ = 64


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


#: Ops nested in an autograd node whose input shapes stand for the node's.
NESTED_SAMPLE = 4


def _loop_fix(ctx: Ctx, host, tiny: np.ndarray, between: np.ndarray, wall: float,
              model: np.ndarray, fused_ns: float, recorder: float = TINY_LOOP_UNPROFILED
              ) -> tuple[HostFix, tuple[float, float]]:
    """(the batched replacement of the tiny ops, (ns of their data work it keeps, ns of
    the fixed cost of the calls it runs instead where no unit repeats)): their
    whole time (and the Python between them) removed with the calls that gather the
    loop's pieces, the rest of the step kept (:mod:`.host_estimate`), plus what the batched
    calls cost: where the model's calls (``model``) repeat, one repeat and the others'
    math (:func:`.batch_estimate.loop_batch`), else the data work of the model's tiny ops
    (:func:`.batch_estimate.loop_data_ns`) and one call of each of their kinds
    (:func:`.batch_estimate.loop_once_ns`); and what the fused optimizer step costs
    (``fused_ns``, :func:`.optimizer_loop.fused_step_ns`).  The profiler's cost is taken
    off by the events the loop and the rest each record
    (:func:`.host_estimate.recorded_ratios`), and its step bookkeeping is in neither step
    (:func:`.batch_estimate.bookkeeping_ns`).  ``recorder``: the ratio where the capture
    cannot tell what its recorder adds per event (:data:`.host_estimate.TF_UNPROFILED`
    for TensorFlow's eager ops, whose recorder costs less per op than torch.profiler's)."""
    s = ctx.trace.slices
    ends = s.end[tiny] + between
    removed = float((ends - s.start[tiny]).sum()) / max(wall, 1.0)
    r = ctx.rows
    math = rest_math(ctx, host, host.starts[r], host.ends[r], s.start[tiny], ends)
    lb = loop_batch(ctx, host, model) if len(model) else None
    data = loop_data_ns(ctx, host, model) if lb is None else 0.0
    once = (loop_once_ns(ctx, host, model, len(r))  # batched, not run in TensorFlow's graph
            if lb is None and recorder == TINY_LOOP_UNPROFILED else 0.0)
    gather, cost = (lb.gather, lb.replacement) if lb is not None else (0.0, 0.0)
    cost += (fused_ns + data + once) / max(wall, 1.0)
    taken = min(removed + gather, 1.0)
    kept_out = min(bookkeeping_ns(ctx, host, r) / max(wall, 1.0), 1.0 - taken)
    loop, rest, said = recorded_ratios(ctx, host, s.start[tiny], ends, taken, wall, math,
                                       kept_out, recorder)
    return HostFix(taken, math / max(wall, 1.0), replacement=cost, unprofiled=loop,
                   what="a loop of tiny ops", step_ns=ctx.call_ns(wall, len(r)), per_op=rest,
                   bookkeeping=kept_out, ratios=said), (data, once)


def _held(dur: np.ndarray, typical: np.ndarray, tiny: np.ndarray, span: np.ndarray,
          wall: int) -> tuple[int, float]:
    """(tiny ops held :data:`DESCHED_NS` or more, the share without them): an instance of a
    tiny op held a millisecond was descheduled (no tiny op needs that).  Such lumps land
    where the thread happens to be, so a share that rests on a few of them is as noisy as
    the machine: the finding's confidence is scaled by the share left when each counts its
    name's median and its excess is left out of the main thread's time."""
    held = tiny & (dur >= DESCHED_NS)
    excess = float((dur - typical)[held].sum())
    kept = float(span.sum()) - excess
    return int(held.sum()), max(kept, 0.0) / max(wall - excess, 1.0)


def _held_note(held: int, steady_part: float, share: float) -> str:
    if not held or steady_part >= share:
        return ""
    return (f" ({held} tiny op{'s' if held != 1 else ''} held {fmt_ns(DESCHED_NS)} or more "
            f"were descheduled there; without them the share is {pct(steady_part)}, and the "
            f"confidence is scaled by that ratio)")


#: A gap this long between two ops of a tight loop, with no op open, on a machine whose
#: other processes held at least DESCHED_BUSY cores, is time the thread was descheduled.
DESCHED_NS, DESCHED_BUSY = 1_000_000, 0.5


def _descheduled(ctx: Ctx, host, ops: np.ndarray, gap: np.ndarray) -> tuple[int, str]:
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

