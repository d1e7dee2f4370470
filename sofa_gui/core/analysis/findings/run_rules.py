"""Rules about how the run spends its time as a whole: one-off start-up work, work every
N-th iteration, per-op overhead and element-wise host reads on the main thread."""

from __future__ import annotations

from dataclasses import dataclass

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
from .chained_calls import (
    CHAIN_REMEDY,
    COPIES_REMEDY,
    ChainFix,
    CopiesFix,
    chain_fix,
    chained_updates,
    copies_fix,
)
from .context import BELOW, Ctx, cause_evidence, make_finding
from .eager_ops import MIN_DISPATCHES, op_typical, tf_eager_step, tf_eager_update
from .eager_ops import measure as eager_measure
from .first_fill import input_fill, one_off_events, worker_fill
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
from .optimizer_loop import TinyLoops, fused_gain, fused_step_ns, no_update_loop, optimizer_class
from .penalty_loop import PENALTY_FIX, penalty_cost_ns, penalty_gain, penalty_ops, penalty_unseen
from .read_rules import in_read_loops
from .recurrence import recurrence_backward
from .registry import Rule, rule
from .tiny_op_cost import DESCHED_NS, descheduled, per_call_ns
from .work import (
    TINY_NS,
    extra_calls_share,
    grown_work,
    one_off_calls,
    optimizer_steps,
    outermost,
    recurring_calls_share,
    starts_inside,
)

#: Warm-up whose extra host time is under this fraction extra calls is a slow start.
SLOW_START_OWN_WORK = 1 / 3
SLOW_START = "warm-up makes the same calls as later steps, slower: a slow start, not " \
             "proven one-off work"
RECURRING_SETUP = "the warm-up's extra calls recur in later steps: set-up paid again, not once"
#: Warm-up whose extra calls are at least this fraction calls later steps repeat recurs.
RECURRING_OWN_WORK = 1 / 2
FIRST_PASS = "warm-up waits for input (the pipeline's first pass): one-off only if later " \
             "epochs are served from a cache"


@rule("startup_cost", "One-off start-up work (no per-step gain)", 0.05, 0.20,
      "fraction of the profiled time; one-off work never speeds up a step", per_step=False,
      factors={"slow_start": 0.5, "first_pass_input": 0.5, "recurring_setup": 0.5})
def startup_cost(ctx: Ctx, spec: Rule) -> Finding | None:
    bd = ctx.bd
    s = ctx.trace.slices
    warm = ctx.ph.warmup
    r = ctx.rows
    med = float(np.median(bd.durations[r])) if len(r) else 0.0
    excess = [(int(i), float(bd.durations[i]) - med) for i in warm.tolist()]
    warm_ns = sum(max(x, 0.0) for _, x in excess)
    one = one_off_events(ctx)
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
    fill = worker_fill(ctx, warm, r)
    if fill > 0:
        summary += (f" Of it, {fmt_ns(fill)} is the main thread waiting for the DataLoader "
                    f"workers' first batches (the workers start and fill their prefetch "
                    f"queue once; later steps find a batch ready).")
        own = max(own, fill / warm_ns)
    waited = input_fill(ctx, warm, r) if fill <= 0 else 0.0
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
    elif (again := recurring_calls_share(ctx, warm, r) if _may_recur(warm_ns, extra_ns,
                                                                       named, fill) else 0.0
          ) >= RECURRING_OWN_WORK:
        summary += (f" But {pct(again)} of the warm-up's extra calls are calls later "
                    f"iterations make again (at least a quarter of them: a high-level call "
                    f"every few iterations making its input pipeline, iterator or function "
                    f"anew): the first of a set-up the run repeats, paid again, not once; "
                    f"fewer, larger calls remove it.")
        assumption, notes = spec.factor("recurring_setup"), (RECURRING_SETUP,)
    # warm-up excess rests on the iterations: when it is most of the finding, uncertain
    # iterations make it uncertain too (one-off calls are measured from the events)
    direct = not (warm_ns > extra_ns and ctx.iters_uncertain is not None)
    return make_finding(ctx, spec, share, summary, evidence, speedup=None,
                        causes=causes, one_off_ns=int(total), direct=direct,
                        assumption=assumption, notes=notes,
                        tentative=notes[0] if notes else "")


def _may_recur(warm_ns: float, extra_ns: float, named: bool, fill: float) -> bool:
    """Whether the warm-up may be the first of a recurring set-up: its excess is most of
    the one-off work, holds no named compile or set-up call (those are first-use work
    whatever recurs beside them) and is not mostly the loader workers' first fill."""
    return warm_ns > extra_ns and not named and fill < 0.5 * warm_ns


@rule("periodic_extra", "Extra work every few iterations (checkpoint, eval, logging)",
      0.05, 0.20, "same grading as iteration jitter, on the time the extra iterations add",
      factors={"seen_once": 0.6})
def periodic_extra(ctx: Ctx, spec: Rule) -> Finding | None:
    bd = ctx.bd
    ex = np.setdiff1d(ctx.ph.extras, ctx.call_setups)  # a call's set-up: no extra
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
    if _read_elsewhere(ctx):
        return None
    m = _tiny_ops(ctx, host)
    if m is None:
        return None
    x = _tiny_fixes(ctx, host, m)
    held, steady_part = _held(ctx.trace.slices.dur[m.ops], m.typical, m.tiny, m.span, m.wall)
    causes = _tiny_causes(ctx, m)
    summary = _summary(ctx, m, x, _held_note(held, steady_part, m.share))
    assumption, notes = _confidence(spec, m, x, steady_part)
    bare = x.fix.unprofiled_share(m.share)  # the tiny ops' share, whatever removes them
    if bare < spec.moderate:  # the profiler's own cost per op is what makes it count
        summary = (f"Without the profiler's own cost per op the tiny ops would take about "
                   f"{pct(bare)} of the step, under the {pct(spec.moderate)} that counts. "
                   + summary)
    f = make_finding(ctx, spec, m.share, summary, cause_evidence(causes), causes=causes,
                     speedup=x.est.speedup(), sev=BELOW if bare < spec.moderate else None,
                     assumption=assumption, notes=notes,
                     fix_gain=lambda f: penalty_gain(x.cut) if f.name == PENALTY_FIX
                     else fused_gain(m.loops, x.alone),
                     unseen=lambda f: penalty_unseen(f.name, x.pen.any()) or m.loops.unseen(f))
    if not m.loops.optimizer_only:  # the finding counts both loops: its estimate removes both
        f.estimated_speedup, f.estimated_by = x.est.speedup(), ""
        f.estimate_floor = x.chain is not None  # each copy's Python counted whole: its most
    return f


def _read_elsewhere(ctx: Ctx) -> bool:
    """Another check reads the main thread's ops as the cost of something else."""
    eager = eager_measure(ctx)
    if eager is not None and eager.compiled_step:
        return True  # ops dispatched between a compiled step's calls make its batch or
        # update its state: :mod:`.eager_dispatch`'s readings, not a loop of tiny ops
    sb = small_batch(ctx)
    if sb is not None and sb.models_requests(ctx):
        return True  # requests a few at a time, or a model run per request: batching them
        # is :mod:`.small_batch`'s (estimated from the repeats of a request's calls)
    calls = compiled_call_costs(ctx)
    # one compiled call per item: the ops between the calls are theirs (the runtime's
    # waits on their buffers), batched away with them (call_overhead_bound)
    return calls is not None and calls.per_item


@dataclass(frozen=True)
class TinyOps:
    """The steady steps' outermost ops on the main thread (``ops``, by start): those in the
    loop of tiny ops (``tiny``) and the optimizer's (``opt``), each op's name's ``typical``
    time, its fixed cost per call (``per_call``), the Python after it (``between``) and its
    part of the loop's time (``span``); the steady steps' time less descheduled gaps
    (``wall``, ns) and the loop's ``share`` of it; the loops told apart (``loops``),
    whether TensorFlow runs the step eagerly (``graphless``), the steady steps counted and
    the words on what the share leaves out (``away_note``, ``apart``)."""

    ops: np.ndarray
    tiny: np.ndarray
    opt: np.ndarray
    typical: np.ndarray
    per_call: np.ndarray
    between: np.ndarray
    span: np.ndarray
    wall: int
    share: float
    loops: TinyLoops
    graphless: bool
    n_steps: int
    away_note: str
    apart: str
    update: bool = False  # TensorFlow variables updated eagerly beside a compiled step


def _loop_ops(ctx: Ctx, host) -> np.ndarray:
    """The steady steps' outermost ops on the main thread, by start, less the loader's (the
    input pipeline's cost), the read loops' (``host_reads_in_loop``'s) and a recurrent
    layer's backward time steps (its own math, :mod:`.recurrence`)."""
    s = ctx.trace.slices
    ops = _outer_ops(ctx, host.lane)
    ops = ops[ctx.in_steady(s.start[ops], host.starts, host.ends)]
    ops = ops[~starts_inside(ctx, host.role_slices.get("data_loading", ops[:0]), ops)]
    ops = ops[~in_read_loops(ctx, s.start[ops])]  # a loop of reads is host_reads_in_loop's
    return ops[~recurrence_backward(ctx, host, ops)]  # a recurrent layer's time steps


def _tiny_ops(ctx: Ctx, host) -> TinyOps | None:
    """The loop of tiny ops and its share of the steady steps (None where there is none)."""
    s = ctx.trace.slices
    ops = _loop_ops(ctx, host)
    if len(ops) < 2:
        return None
    gap = np.append(s.start[ops[1:]] - (s.start[ops[:-1]] + s.dur[ops[:-1]]), 0)
    # a tiny op is one whose *name's* median is <= TINY_NS (one preempted instance of a
    # 3 µs op is still a tiny op, and its time counts: a loaded machine deschedules the
    # thread in proportion to its work, so the loop's share of it is the loop's)
    typical = op_typical(ctx, ops)
    n_steps = max(ctx.ph.n_steady, 1)
    steps = optimizer_steps(ctx, host.lane)
    opt = starts_inside(ctx, steps, ops)  # the optimizer's ops
    graphless = tf_eager_step(ctx, host)  # one loop tf.function removes whole
    update = not graphless and tf_eager_update(ctx, host)  # beside a compiled step, one
    least = MIN_DISPATCHES if graphless or update else MIN_TINY_PER_STEP  # loop as well
    small = (typical <= TINY_NS) & ~large_matmuls(ctx, ops)  # a large matmul is math
    cls = optimizer_class(ctx, steps)
    small &= ~(opt & no_update_loop(cls))  # a step no foreach or fused one replaces
    tiny, apart = _tiny_loops(opt, small, n_steps, least, chained_updates(ctx, host))
    if not tiny.any():
        return None
    loops = TinyLoops(bool((tiny & opt).any()), bool((tiny & ~opt).any()), cls)
    between = np.clip(gap, 0, TINY_NS)  # the Python between two ops of the loop
    per_call = per_call_ns(ctx, host, ops, typical, opt)
    span = np.where(tiny, per_call + between, 0)
    r = ctx.rows
    wall = int((host.ends[r] - host.starts[r]).sum()) or 1
    away, away_note = descheduled(ctx, host, ops, gap)
    share = min(float(span.sum()) / max(wall - away, 1), 1.0)
    return TinyOps(ops, tiny, opt, typical, per_call, between, span, wall - away, share,
                   loops, graphless, n_steps, away_note, apart, update)


@dataclass(frozen=True)
class TinyFixes:
    """What removes the loop of tiny ops: its batched replacement (``fix``, with the ns of
    data work it keeps and of its calls where no unit repeats, :func:`_loop_fix`), the
    fused optimizer step's cost (``fused_ns``) and its replacement of the optimizer's loop
    ``alone``, an L2 penalty's ops (``pen``) and their removal (``cut``), and for a chained
    step, or a model's loop whose repeats are whole updates, the copies run together
    (``chain``, ``copies``), which the estimate is then."""

    fix: HostFix
    data_ns: float
    once_ns: float
    fused_ns: float
    alone: HostFix
    pen: np.ndarray
    cut: HostFix
    chain: ChainFix | None
    copies: CopiesFix | None = None
    update: bool = False  # the optimizer's update batched along (paid once a larger batch)

    @property
    def est(self) -> HostFix | ChainFix | CopiesFix:
        """The finding's estimate: a chain's calls, and whole updates, batch across copies
        of the step, not each other."""
        return self.chain or self.copies or self.fix


def _tiny_fixes(ctx: Ctx, host, m: TinyOps) -> TinyFixes:
    """The fixes of the loop ``m`` and their estimates."""
    ops, tiny, opt = m.ops, m.tiny, m.opt
    # the optimizer's loop alone is replaced by a fused step; beside the model's loop it is
    # batched with it (a batch of more samples pays the optimizer's step once for them all)
    mine = tiny & opt if m.loops.optimizer_only else np.zeros_like(tiny)
    fused_ns = fused_step_ns(ctx, ops[mine], m.per_call[mine], m.typical[mine], DESCHED_NS)
    update = m.loops.update_batched_along(ctx, host)  # a larger batch pays it once
    gone = tiny | (opt & update)
    fix, (data_ns, once_ns) = _loop_fix(ctx, host, ops[gone], m.between[gone], m.wall,
                                        ops[tiny & ~mine], fused_ns,
                                        TF_UNPROFILED if m.graphless else TINY_LOOP_UNPROFILED)
    alone = _optimizer_alone(ctx, host, ops, tiny & opt, m.between, m.per_call, m.typical,
                             m.wall) if m.loops.optimizer and m.loops.model else fix
    pen = penalty_ops(ctx, ops, opt, m.n_steps)  # an L2 penalty's loop: weight decay removes it
    cut = _loop_fix(ctx, host, ops[pen], m.between[pen], m.wall, ops[:0],
                    penalty_cost_ns(ctx, ops[pen]))[0]
    chain = chain_fix(ctx, host)
    model = ops[tiny & ~mine]  # whole updates in its repeats batch as copies of the step
    copies = (copies_fix(ctx, host) if chain is None and len(model) and m.loops.model
              and loop_batch(ctx, host, model) is not None else None)
    return TinyFixes(fix, data_ns, once_ns, fused_ns, alone, pen, cut, chain, copies,
                     update and bool((opt & ~tiny).any()))


def _tiny_causes(ctx: Ctx, m: TinyOps) -> list:
    """The loop's ops by name, each labelled with its median time."""
    s = ctx.trace.slices
    t = m.ops[m.tiny]
    return causes_by_name(ctx, t, m.span[m.tiny], float(m.span.sum()) or 1.0,
                          label=lambda n, j: f"{n} (median "
                          f"{fmt_ns(float(np.median(s.dur[t[s.name[t] == s.name[j]]])))})")


def _summary(ctx: Ctx, m: TinyOps, x: TinyFixes, held_note: str) -> str:
    """The finding's summary: the loop, what removes it and the estimate's basis."""
    s = ctx.trace.slices
    t = m.ops[m.tiny]
    remedy = (CHAIN_REMEDY if x.chain else COPIES_REMEDY if x.copies else
              TF_UPDATE_REMEDY if m.update else
              _remedy(m.loops, x.fused_ns, m.n_steps, m.graphless)
              ) + _data_note(x.data_ns, x.once_ns, m.n_steps) + (
        m.loops.UPDATE_ALONG if x.update else "")
    return (f"{int(m.tiny.sum()) / m.n_steps:,.0f} tiny framework ops per steady-state "
            f"iteration (median {fmt_ns(float(np.median(s.dur[t])))}, <= {fmt_ns(TINY_NS)} "
            f"typical) and the Python between them take {pct(m.share)} of the main thread's "
            f"time{m.away_note}{held_note}{m.apart}: the fixed cost per op (dispatch, "
            f"Python, allocation) dominates the math. {remedy}{x.est.basis()}")


def _confidence(spec: Rule, m: TinyOps, x: TinyFixes,
                steady_part: float) -> tuple[float, tuple[str, ...]]:
    """(the finding's confidence factor, the notes saying why): the batched op assumed
    cheap, scaled by the share left without tiny ops held by descheduling (of
    ``steady_part``, :func:`_held`) and by the trust in the loop's batched op
    (:func:`_trust`).  A chained step keeps that trust too, though its estimate is the
    copies' (:attr:`TinyFixes.est`)."""
    lumps = min(steady_part / m.share, 1.0) if m.share else 1.0
    kept, clear = _trust(x.fix, x.data_ns, m.wall)
    notes = (("assumes the graph's own cost per op is small" if m.graphless else
              "assumes the batched op is cheap"),) + (
        (f"{pct(1 - lumps)} of the share is tiny ops held >= {fmt_ns(DESCHED_NS)}",)
        if lumps < 1 else ()) + ((f"the batched op still does {pct(1 - kept)} of the "
                                  f"loop's time as data work",) if kept < 1 else ()) + (
        (f"the gain is within {pct(CLEAR_GAIN)} of the step",) if clear < 1 else ())
    return spec.factor("batched_op_cheap") * lumps * kept * clear, notes


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


#: What removes TensorFlow variables' eager update beside a compiled step, in words.
TF_UPDATE_REMEDY = (
    "They are TensorFlow ops run eagerly beside the step's compiled function, nearly all "
    "elementwise arithmetic on variables and their reads and writes: the state updated "
    "variable by variable from Python (a moving average of the weights, a hand-written "
    "optimizer). Running the update in a tf.function (or inside the step's) makes it one "
    "call; the estimate removes the ops and the Python between them.")
#: What removes a TensorFlow step's eager ops, in words.
TF_EAGER_REMEDY = (
    "They are TensorFlow ops run eagerly: each is dispatched from Python on its own, its "
    "kernel run inside the dispatch, and no compiled function runs in the step. Wrapping "
    "the step (or the model's call) in tf.function runs them as one graph, its ops' "
    "kernels without the Python and dispatch around each (jit_compile=True fuses them "
    "too); the estimate removes the ops and the Python between them and keeps the rest "
    "of the step, both at TensorFlow's recorder's cost per op.")


def _tiny_loops(opt: np.ndarray, tiny: np.ndarray, n_steps: int,
                least: int = MIN_TINY_PER_STEP, updates: float = 1.0
                ) -> tuple[np.ndarray, str]:
    """(the tiny ops that make a loop, a note on those left out).  The optimizer's
    per-tensor ops (inside its step: ``opt``) and the other tiny ops are two loops with two
    fixes (a foreach or fused optimizer; batching or compiling the model's calls), and each
    is a loop of tiny ops only with ``least`` or more per iteration
    (:data:`MIN_TINY_PER_STEP`; :data:`.eager_ops.MIN_DISPATCHES` for a TensorFlow step run
    eagerly, whose fix, ``tf.function``, removes every op's dispatch at once).  Pooled, a
    training step's own few per-layer ops (its backward's node per layer and per
    parameter, a residual add) would pass the count on the optimizer's ops, though no one
    fix removes both and batching removes neither of them.  Where a step's ``updates``
    form a chain (:func:`.chained_calls.chained_updates`), the other tiny ops are counted
    per update: a batched call pools one update's calls alone, the next one's input waiting
    on a value read back after the last one."""
    keep = np.zeros(len(tiny), bool)
    left = []
    for part, what, per in ((tiny & opt, "tiny ops of the optimizer's step", 1.0),
                            (tiny & ~opt, "other tiny ops", updates)):
        per_step = int(part.sum()) / n_steps / per
        if per_step >= least:
            keep |= part
        elif per_step >= 1:
            unit = "per iteration" if per == 1.0 else "per update, the updates a chain"
            left.append(f"the {per_step:,.0f} {what} {unit}")
    note = (f" ({' and '.join(left)}, under {least}, are no loop of their own "
            f"and are not counted)" if keep.any() and left else "")
    return keep, note


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
