"""A compiled step too small for its call: each call of a jitted function (``jax.jit``) or a
compiled TensorFlow function pays a fixed cost its program's work does not, and where the
program does little per call that cost is a large part of every step.

What the trace shows of one call (the main thread's outermost ``PjitFunction(f)`` that takes
JAX's C++ fast path, or a TF function's call: :mod:`.compiled_calls`) and the program it
runs (the runtime's pool threads' work, XLA's thunks or TF's kernels, from the call's start
to the next call):

* **dispatch**: the call's time before its program's first work and after its last: its
  arguments parsed and checked, the executable prepared, output buffers allocated, the
  program handed to the runtime's threads;
* **hand-back**: where the call returns before its program ends (JAX runs it
  asynchronously), from the program's last work to the end of the main thread's wait that
  held it (``float(loss)``, ``np.asarray``): the runtime waking the waiting thread and
  handing it the result.  Only the wait's tail after the pool threads' last work counts:
  while they still work (the program's later parts, another device's part of a ``pmap``,
  its all-reduce) the wait is for work, not for the hand-back.  Where the function returns
  its outputs as a TF ``Optional`` (Keras 3's train, test and predict functions), the two
  eager ops that read it after each call (``has_value()``, ``get_value()``) are hand-back too;
* **the loop's Python** between the calls: the step function's own lines, outside any
  framework op.

The first two are the call's fixed cost.  Time in an input pipeline's threads during a call
is the input's, and a call that runs no work on the pool threads (an XLA cluster run on the
calling thread) cannot be split, so neither counts.  A call through JAX's Python dispatch
(a function with host callbacks) is :mod:`.callback_rules`'s round trip, and so is the time
a host callback's thunk runs during a call (a ``pure_callback`` on the fast path).

The check holds where the fixed cost is a large part of the step and at least half the
program's work (:data:`FIXED_SHARE`, :data:`SMALL_WORK`), with fewer than
:data:`.eager_ops.MIN_DISPATCHES` calls per step (more are ops dispatched one at a
time, or requests answered one at a time: :mod:`.eager_dispatch`, :mod:`.small_batch`).
What the fix saves is the steps' time outside the programs' run but the waits every step
still makes (its batch fetched, its collectives, its copies): the fixed cost and the
loop's own work between the calls (its Python, its eager ops, Keras's callbacks, which
``fit`` runs once per call).  The share, which the verdict moves from compute to host
overhead, is the time outside the programs less what the breakdown holds in another
category than compute already (a Python tracer's frames and runtime calls as host
overhead, fetches as input, reads' waits as sync, collectives, copies: each counted
once), never under the fixed cost.  The fix gives each call more work: several steps
in one call (``jax.lax.scan`` over stacked batches, a loop inside the ``tf.function``,
Keras ``steps_per_execution``), which pays all of it once for all of them and keeps the
program's work.  The estimate is that limit: the step as its programs' work and those
waits alone (several steps per call approach it; the trace cannot say how many a
program can merge),
read as the other host-side fixes are (:func:`.host_estimate.speedup_without`: the
programs' math as captured, their per-op work without the profiler's cost, warmer once
most of the step is gone).

A step that is a Python loop over items, one call of the same program per item with each
result read before the next call (an ensemble trained member by member, its losses read
with ``float``), pays the fixed cost and a wait per item: the fix batches the items into
one call (``jax.vmap`` over them stacked), which pays both once a step and runs the
items' programs as one.  Its estimate keeps the programs' work at its captured time,
which the batched program does in at most that: a lower bound.  Reading the results once
after the loop keeps every call and saves less.  Such a loop is no read loop
(:mod:`.read_rules`), and the runtime's tiny events between its calls (waits on their
buffers) are the calls', not a loop of tiny ops (:mod:`.run_rules`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from ...trace import Kind
from ...units import fmt_ns
from ...units import fmt_pct as pct
from .. import roles as R
from ..intervals import covered, measure_in, union
from ..results import Evidence, Finding
from ..tfdata import tf_data_lanes
from .batching import small_batch
from .callback_rules import CALLBACK, PY_DISPATCH
from .compiled_calls import function_calls
from .context import Ctx, make_finding
from .eager_ops import MIN_DISPATCHES
from .host_estimate import pool_slices, speedup_without
from .item_calls import JIT_CALL, MIN_ITEMS, each_item
from .registry import Rule, rule
from .work import outermost

#: The calls' fixed cost holds at least this share of the steady steps.
FIXED_SHARE = 0.25
#: ... and at least this share of the time their programs run (a program that does much
#: more per call than its call costs is compute).
SMALL_WORK = 0.5
#: An eager read of a TF function's ``Optional`` result (Keras's ``has_value()`` and
#: ``get_value()`` of each call's outputs).
RESULT_READ = re.compile(r"^EagerLocalExecute: Optional(HasValue|GetValue)$")


@dataclass(frozen=True)
class CompiledCallCosts:
    """The steady steps' compiled calls: ``name`` the function called most, ``calls`` the
    calls measured, ``per_step`` calls per step, ``wall`` the steps' time, ``program``
    the time their programs run, ``dispatch`` / ``handback`` the calls' fixed cost (see
    the module) and ``python`` the loop's own Python between them (ns, all steps)."""

    name: str
    calls: np.ndarray
    per_step: float
    wall: float
    program: float
    dispatch: float
    handback: float
    python: float
    #: calls of the function called most; calls whose result a wait of the main thread
    #: holds past the call's return (a read of it: ``float``, ``np.asarray``)
    same: int = 0
    waited: int = 0
    #: of the steps' time outside the programs, what the breakdown holds in a category
    #: other than compute already: host overhead (a Python tracer's frames, runtime
    #: calls), input (a fetch), sync (a read's wait), communication, memory copies
    held: float = 0.0
    #: of that, the waits several steps per call still make: the input fetched, the
    #: collectives, the copies (a step's read of its result is the calls' hand-back)
    kept: float = 0.0

    @property
    def fixed(self) -> float:
        return self.dispatch + self.handback

    @property
    def outside(self) -> float:
        """The steps' time outside their programs' run: the calls' fixed cost and all the
        loop does between the calls (its Python, its eager ops, its callbacks)."""
        return max(self.wall - self.program, 0.0)

    @property
    def merged_away(self) -> float:
        """What several steps per call save of the steps' time outside their programs:
        all of it but the waits they still make (:attr:`kept`)."""
        return max(self.outside - self.kept, 0.0)

    @property
    def per_item(self) -> bool:
        """The step is a Python loop over items calling one program per item and reading
        each result before the next call (:mod:`.item_calls`): ``MIN_ITEMS`` or more
        calls a step, nearly all of one function and waited for."""
        n = len(self.calls)
        return bool(self.per_step >= MIN_ITEMS and each_item(self.same, n)
                    and each_item(self.waited, n))


def compiled_call_costs(ctx: Ctx) -> CompiledCallCosts | None:
    """The steady steps' compiled calls with what each costs beside its program's run (its
    dispatch and hand-back), measured once per analysis (None where the steps make none
    that run work on the pool threads, or more than a compiled step makes)."""
    return ctx.once("compiled_call_costs", lambda: _compiled_call_costs(ctx))


def _compiled_call_costs(ctx: Ctx) -> CompiledCallCosts | None:
    host, r = ctx.bd.host, ctx.rows
    if host is None or ctx.bd.device is not None or not len(r):
        return None
    s = ctx.trace.slices
    calls = _compiled_calls(ctx, host)
    if not len(calls) or len(calls) / len(r) >= MIN_DISPATCHES:
        return None
    pool = pool_slices(ctx, host)
    pool = pool[np.argsort(s.start[pool], kind="stable")]
    ws, we = host.starts[r], host.ends[r]
    feed = _input_busy(ctx)
    ends = np.append(s.start[calls[1:]], np.iinfo(np.int64).max)
    mine = ctx.trace.lane_slices(host.lane)  # in start order
    busy = union(s.start[pool], s.end[pool]) if len(pool) else (pool, pool)
    spans, dispatch, handback, kept, waited = [], 0.0, 0.0, [], 0
    for c, nxt in zip(calls.tolist(), ends.tolist()):
        c0, c1 = int(s.start[c]), int(s.end[c])
        row = int(np.searchsorted(ws, c0, side="right")) - 1
        lo = np.searchsorted(s.start[pool], c0, side="left")
        hi = np.searchsorted(s.start[pool], min(nxt, int(we[row])), side="left")
        if hi <= lo:
            continue  # no pool work: the call's work and its cost cannot be told apart
        p0, p1 = int(s.start[pool[lo]]), int(s.end[pool[lo:hi]].max())
        spans.append((p0, p1))
        kept.append(c)
        dispatch += _outside(feed, c0, min(c1, p0)) + _outside(feed, max(c0, p1), c1)
        if p1 > c1:  # the call returned before its program ended: a wait holds the end
            back = _handback(ctx, mine, busy, c0, p1, int(we[row]))
            handback += back
            waited += back > 0
    if not spans:
        return None
    ps, pe = union(*np.asarray(spans, np.int64).T)
    program = float(measure_in(ps, pe, ws, we).sum())
    kept = np.asarray(kept, np.int64)
    handback += _result_reads(ctx, host, calls)
    by_name = np.bincount(s.name[kept])
    return CompiledCallCosts(ctx.trace.names[int(by_name.argmax())], kept, len(kept) / len(r),
                             float((we - ws).sum()), program, dispatch, handback,
                             _python(ctx, host, kept, ps, pe), int(by_name.max()), waited,
                             _held(ctx, host, ps, pe, HELD), _held(ctx, host, ps, pe, KEPT))


#: The breakdown's categories other than compute and host overhead, whose slices it names.
HELD = ("data_loading", "sync", "communication", "memcpy")
#: Of them, the waits a step makes however many steps one call runs.
KEPT = ("data_loading", "communication", "memcpy")


def _held(ctx: Ctx, host, ps: np.ndarray, pe: np.ndarray, categories: tuple) -> float:
    """ns of the steady steps' main thread that the breakdown holds in ``categories``
    (their slices, with what other threads run while the main thread waits for them)
    outside the programs' run, and with :data:`HELD` its Python frames (a Python
    tracer's) and runtime calls too: what it holds in another category than compute."""
    t = ctx.trace
    s = t.slices
    mine = ctx.steady_slices(host)
    named = np.concatenate([host.role_slices.get(c, mine[:0]) for c in categories])
    named = named[ctx.in_steady(s.start[named], host.starts, host.ends)]
    mine = mine[np.isin(R.host_roles(t, mine), [R.PYTHON, R.RUNTIME])] if (
        categories == HELD) else mine[:0]
    mine = np.concatenate([mine, named]).astype(np.int64)
    if not len(mine):
        return 0.0
    r = ctx.rows
    ws, we = host.starts[r], host.ends[r]
    hs, he = union(s.start[mine], s.end[mine])
    both = union(np.concatenate([hs, ps]), np.concatenate([he, pe]))
    return max(float(measure_in(*both, ws, we).sum()) - float(measure_in(ps, pe, ws, we).sum()),
               0.0)


def _result_reads(ctx: Ctx, host, calls: np.ndarray) -> float:
    """ns of the steady steps' main-thread calls, outside the compiled calls, that read a
    call's result where the function returns it as a ``tf.experimental.Optional`` (Keras
    3's train, test and predict functions: the loop asks ``has_value()`` and
    ``get_value()`` of each call's result, two eager ops): each outermost event between
    the calls that runs such a read."""
    t = ctx.trace
    s = t.slices
    mine = ctx.steady_slices(host, Kind.CPU_OP)
    reads = mine[np.isin(s.name[mine], t.name_ids(RESULT_READ.match))]
    if not len(reads) or not len(calls):
        return 0.0
    cs, ce = union(s.start[calls], s.end[calls])
    out = mine[~covered(s.start[mine], cs, ce)]
    top = outermost(s.start, s.end, out)
    holds = covered(s.start[reads], s.start[top], s.end[top])
    k = np.searchsorted(s.start[top], s.start[reads[holds]], side="right") - 1
    top = np.unique(top[k])
    r = ctx.rows
    return float(measure_in(*union(s.start[top], s.end[top]),
                            host.starts[r], host.ends[r]).sum()) if len(top) else 0.0


def _compiled_calls(ctx: Ctx, host) -> np.ndarray:
    """The main thread's steady outermost calls of compiled functions, by start: JAX's
    jitted calls on the C++ fast path and TF functions' calls."""
    t = ctx.trace
    s = t.slices
    mine = ctx.steady_slices(host)
    jit = mine[np.isin(s.name[mine], t.name_ids(lambda n: n.startswith(JIT_CALL)))]
    jit = outermost(s.start, s.end, jit) if len(jit) else jit
    slow = mine[np.isin(s.name[mine], t.name_ids(PY_DISPATCH.match))]
    if len(slow) and len(jit):
        k = np.searchsorted(np.sort(s.start[slow]), s.start[jit], side="left")
        srt = np.append(np.sort(s.start[slow]), np.iinfo(np.int64).max)
        jit = jit[srt[k] >= s.end[jit]]  # a Python dispatch inside: callback_rules'
    calls = np.union1d(jit, function_calls(ctx, host))
    return calls[np.argsort(s.start[calls], kind="stable")]


def _input_busy(ctx: Ctx) -> tuple[np.ndarray, np.ndarray]:
    """The union of the input pipeline's threads' work (``tf_data`` lanes) and the host
    callbacks' thunks (:mod:`.callback_rules`'): time a call spends in neither is its own."""
    t = ctx.trace
    lanes = tf_data_lanes(t).tolist()
    idx = np.concatenate([np.flatnonzero(np.isin(t.slices.name, t.name_ids(CALLBACK.match))),
                          *[t.lane_slices(x) for x in lanes]])
    idx = idx[t.slices.dur[idx] > 0]
    if not len(idx):
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    return union(t.slices.start[idx], t.slices.end[idx])


def _outside(busy: tuple[np.ndarray, np.ndarray], a: int, b: int) -> float:
    """ns of [a, b) while neither the input pipeline's threads nor a host callback work."""
    if b <= a:
        return 0.0
    if not len(busy[0]):
        return float(b - a)
    return float(b - a) - float(measure_in(busy[0], busy[1], np.array([a]), np.array([b]))[0])


def _handback(ctx: Ctx, mine: np.ndarray, busy: tuple[np.ndarray, np.ndarray], c0: int,
              p1: int, step_end: int) -> float:
    """ns from the program's last work ``p1`` to the end of the innermost event of the main
    thread (``mine``, in start order) that holds it and started after the call's start
    ``c0``: the wait for the result, after the call returned.  Only the wait's tail after
    the pool threads' last work (``busy``: their work's union) counts: while they still
    run, the wait is for work (the rest of a program that ran on, another device's part
    of it, a collective), not for the result's hand-back."""
    s = ctx.trace.slices
    near = mine[np.searchsorted(s.start[mine], c0, side="left"):
                np.searchsorted(s.start[mine], p1, side="right")]
    held = near[s.end[near] > p1]
    if not len(held):
        return 0.0
    inner = held[np.argmax(s.depth[held])]
    end = min(int(s.end[inner]), step_end)
    k = int(np.searchsorted(busy[0], end, side="left")) - 1  # the last work begun before
    last = min(int(busy[1][k]), end) if k >= 0 else p1
    return float(max(end - max(p1, last), 0))


def _python(ctx: Ctx, host, calls: np.ndarray, ps: np.ndarray, pe: np.ndarray) -> float:
    """ns of the steady steps' main thread in no framework op and no call, while no program
    runs: the loop's own Python between the calls."""
    s = ctx.trace.slices
    r = ctx.rows
    ops = ctx.steady_slices(host, Kind.CPU_OP)
    busy = np.concatenate([ops, calls])
    bs, be = union(np.concatenate([s.start[busy], ps]), np.concatenate([s.end[busy], pe]))
    wall = float((host.ends[r] - host.starts[r]).sum())
    return max(wall - float(measure_in(bs, be, host.starts[r], host.ends[r]).sum()), 0.0)


@rule("call_overhead_bound", "Framework overhead: a small compiled step's fixed cost per call",
      0.05, 0.20, f"same grading as per-op overhead; the calls' fixed cost >= "
      f"{FIXED_SHARE:.0%} of the steady iterations and >= {SMALL_WORK:.0%} of their "
      f"programs' run", factors={"steps_merge": 0.8})
def call_overhead_bound(ctx: Ctx, spec: Rule) -> Finding | None:
    if small_batch(ctx) is not None:
        return None  # requests answered a few at a time: batching them is small_batch's
    sc = compiled_call_costs(ctx)
    if sc is None or sc.fixed < FIXED_SHARE * sc.wall or sc.fixed < SMALL_WORK * sc.program:
        return None
    wall = sc.wall or 1.0
    share = min(sc.fixed / wall, 1.0)
    # several steps per call keep the waits between the calls (fetches, collectives,
    # copies); one call over the items keeps none of the loop's time outside its program
    gone = min(max((sc.outside if sc.per_item else sc.merged_away) / wall, share), 0.99)
    # the verdict moves the finding's share from compute to host overhead: not what
    # another category holds already (host overhead, input, sync, communication, copies)
    moved = min(max(sc.outside / wall - sc.held / wall, share), gone)
    n = max(len(ctx.rows), 1)
    summary = (f"Each steady iteration makes {sc.per_step:,.1f} call"
               f"{'s' if sc.per_step != 1 else ''} of the compiled function {sc.name}, whose "
               f"program runs {fmt_ns(sc.program / n)} per iteration on the runtime's "
               f"threads ({pct(sc.program / wall)} of the step); each call also pays a fixed "
               f"cost its program does not: {fmt_ns(sc.dispatch / n)} per iteration "
               f"dispatching it (arguments checked, the executable prepared, buffers "
               f"allocated, the program handed to the threads) and "
               f"{fmt_ns(sc.handback / n)} handing its result back (the waiting thread "
               f"woken, or the result read from the Optional the function returns), "
               f"{pct(share)} of the step; with the loop's own work between the calls (its "
               f"Python, {pct(sc.python / wall)} of the step, and its other calls) "
               f"{pct(gone)} of the step runs outside the programs. "
               + (_items_words(sc) if sc.per_item else
                  "Giving each call more work (several steps in one call) pays all of it "
                  "once for all of them. Estimate: the step as its programs' run alone, the "
                  "limit several steps per call approach (the trace cannot say how many a "
                  "program can merge), the programs' per-op work without the profiler's "
                  "cost and run warmer once most of the step is gone, as for the other "
                  "host-side fixes."))
    speedup = (1.0 / (1.0 - gone) if sc.per_item
               else speedup_without(ctx, ctx.bd.host, gone * wall))
    f = make_finding(ctx, spec, moved, summary, _evidence(ctx, sc),
                     speedup=speedup, assumption=spec.factor("steps_merge"),
                     notes=("assumes the items can be batched into one call" if sc.per_item
                            else "assumes several steps can run in one call",),
                     unseen=lambda fix: _unseen(fix, sc))
    # batched, the items' programs run as one, at most their time as captured
    f.estimate_floor = sc.per_item
    return f


def _items_words(sc: CompiledCallCosts) -> str:
    """What the finding says of a step that loops over items, one call and one read each."""
    k = f"{sc.per_step:,.0f}"
    return (f"The step is a Python loop over {k} items that calls the same program once "
            f"per item and reads each call's result before making the next call ({k} waits a "
            f"step hold the calls' hand-back), so no call's dispatch overlaps the previous "
            f"call's program. Batching the items into one call (jax.vmap over the items "
            f"stacked: an ensemble's members, a batch's samples) pays the dispatch and the "
            f"hand-back once a step and runs the {k} programs' work as one program; reading "
            f"the {k} results once after the loop keeps every call and its dispatch and "
            f"saves less. Estimate: the step without the calls' fixed cost and the loop's "
            f"Python, the programs' work kept at its captured time (one batched program "
            f"does it in at most that): a lower bound.")


def _unseen(fix, sc: CompiledCallCosts) -> str:
    """The items' batching is shown for a loop over items, one call each, and only there."""
    if (fix.name == "one call over the items") != sc.per_item:
        return ("the step makes one call per item: batching the items is the fix"
                if sc.per_item else "the step makes no call per item to batch")
    return ""


def _evidence(ctx: Ctx, sc: CompiledCallCosts) -> list[Evidence]:
    """The longest calls, each with its iteration."""
    return longest_evidence(ctx, sc.calls)


def longest_evidence(ctx: Ctx, idx: np.ndarray, after: str = "") -> list[Evidence]:
    """The five longest of the main thread's slices ``idx``, each named with its duration
    (and ``after``) in its iteration."""
    s = ctx.trace.slices
    host = ctx.bd.host
    out = []
    for c in idx[np.argsort(-s.dur[idx], kind="stable")][:5].tolist():
        row = int(np.searchsorted(host.starts, s.start[c], side="right")) - 1
        out.append(Evidence(f"{ctx.trace.name_of(c)} ({fmt_ns(int(s.dur[c]))}){after}",
                            int(s.start[c]), int(s.end[c]), ctx.it(row), [int(s.lane[c])]))
    return out
