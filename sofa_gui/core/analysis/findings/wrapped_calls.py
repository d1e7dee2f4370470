"""Python around each compiled call: a function between the loop's body and the compiled
call that spends most of its time in Python of its own.

A library's jit wrapper does this on every call: Flax NNX's ``nnx.jit`` walks the
model's, the optimizer's and the metrics' object graph to split it into a graph
definition and arrays before the call and merges the results back after it; Equinox's
``eqx.filter_jit`` partitions the module's pytree into arrays and static leaves.  The
compiled program is the same as a plain ``jax.jit``'s, but each step also runs thousands
of Python frames around it, which no op or kernel records: the breakdown counts them as
Python (host overhead, where the verdict keeps them) and the compiled-call checks
(:mod:`.call_overhead`) see only the call's own dispatch.

What the trace shows: each steady JAX compiled call (:mod:`.call_overhead`'s calls that
take the C++ fast path, ``PjitFunction(f)``; a TensorFlow function's call is not read) whose
innermost enclosing Python frame lies inside the call's iteration and is itself called
from another Python frame of that iteration (so it is not the loop's body, where a plain
``jax.jit`` is called from): the wrapper.  Its time outside every runtime event and
framework op in it (the compiled call, eager ops, waits) is its own Python, at most what
the breakdown counts as Python in the steady steps.  A loop body
that calls the jitted function itself has no such frame, and a thin wrapper of the
program's own (a ``train_step`` that only forwards its arguments) takes too little to
count.

The fix calls a plain ``jax.jit`` of a pure function on the C++ fast path: with NNX,
``nnx.split`` the model and optimizer once before the loop, jit a step over the graph
definition and state (``nnx.merge`` inside it, ``nnx.split`` of the updated objects
returned), and merge once after the loop; with Equinox, partition once and jit over the
arrays.  The estimate: the step without the profiler before (the wrappers' Python at
:data:`.host_estimate.PYTHON_LOOP_UNPROFILED` of its captured time, the ratio measured
for loops the Python tracer records) over the step without the wrappers' Python after.
The capture's own cost per tracer event (:func:`.recorder_cost.tracer_per_event_ns`,
read off the gaps between frames) is not taken off here: a wrapper's frames are
library calls of a few hundred ns each, packed back to back, and the per-event reading
takes off more than the tracer adds there (an NNX step's 8,700 frames a call: 0.36 and
0.59 µs an event read off its two captures leave 1.40x and 1.87x, where the fix
measures 2.79x; the ratio gives 2.1x and 2.4x).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np

from ...trace import Kind
from ...units import fmt_ns
from ...units import fmt_pct as pct
from ..intervals import measure_in, union
from ..results import Finding
from .call_overhead import compiled_call_costs, longest_evidence
from .context import Ctx, make_finding
from .host_estimate import PYTHON_LOOP_UNPROFILED
from .item_calls import JIT_CALL
from .registry import Rule, rule

#: The wrappers' own Python holds at least this share of the steady steps.
WRAPPED_SHARE = 0.25
#: ... and at least this share of the compiled calls have a wrapper.
WRAPPED_CALLS = 0.9


@dataclass(frozen=True)
class Wrapped:
    """The steady compiled calls' wrappers: the frame named most, the call named most, the
    wrappers (slice indexes), their own Python (ns, all steady steps), the Python tracer's
    events in it and the steps' time."""

    frame: str
    call: str
    frames: np.ndarray
    python: float
    events: int
    wall: float


def wrapped_calls(ctx: Ctx) -> Wrapped | None:
    """The wrappers of the steady compiled calls, when nearly every call has one
    (:data:`WRAPPED_CALLS`); None otherwise.  Once per analysis."""
    return ctx.once("wrapped_calls", lambda: _wrapped_calls(ctx))


def _wrapped_calls(ctx: Ctx) -> Wrapped | None:
    sc = compiled_call_costs(ctx)
    host = ctx.bd.host
    if sc is None or not len(sc.calls):
        return None
    s = ctx.trace.slices
    mine = ctx.trace.lane_slices(host.lane)
    py = mine[s.kind[mine] == int(Kind.PYTHON)]
    if not len(py):
        return None
    py = py[np.argsort(s.start[py], kind="stable")]
    calls = sc.calls[np.isin(s.name[sc.calls], ctx.trace.name_ids(
        lambda n: n.startswith(JIT_CALL)))]  # JAX's jitted calls: a TF function's differ
    frames = [w for w in (_wrapper(ctx, host, py, int(c)) for c in calls.tolist())
              if w is not None]
    if not len(calls) or len(frames) < WRAPPED_CALLS * len(sc.calls):
        return None
    frames = np.unique(np.asarray(frames, np.int64))
    own, events = _own_python(ctx, mine, py, frames)
    r = ctx.rows
    wall = float((host.ends[r] - host.starts[r]).sum())
    # no more than the breakdown counts as Python: one number for it on every surface
    own = min(own, float(host.column("python")[r].sum()))
    name = Counter(ctx.trace.name_of(int(w)) for w in frames).most_common(1)[0][0]
    return Wrapped(name, sc.name, frames, own, events, wall)


def _wrapper(ctx: Ctx, host, py: np.ndarray, c: int) -> int | None:
    """The innermost Python frame enclosing call ``c`` when it lies inside the call's
    iteration and another Python frame of that iteration encloses it (the loop's body
    calls it); None otherwise."""
    s = ctx.trace.slices
    c0, c1 = int(s.start[c]), int(s.end[c])
    row = int(np.searchsorted(host.starts, c0, side="right")) - 1
    if row < 0:
        return None
    r0, r1 = int(host.starts[row]), int(host.ends[row])
    before = py[np.searchsorted(s.start[py], r0, side="left"):
                np.searchsorted(s.start[py], c0, side="right")]
    held = before[(s.end[before] >= c1) & (s.start[before] >= r0) & (s.end[before] <= r1)]
    if len(held) < 2:
        return None
    return int(held[np.argmax(s.depth[held])])


def _own_python(ctx: Ctx, mine: np.ndarray, py: np.ndarray, frames: np.ndarray
                ) -> tuple[float, int]:
    """(ns of the ``frames`` outside every other event of the thread in them, the Python
    tracer's events in that time).  Python frames the breakdown names as loading count:
    inside a wrapper they are its own walk (NNX's graph traversal calls ``next`` hundreds of
    times a call), and the total is capped at the breakdown's Python anyway."""
    s = ctx.trace.slices
    fs, fe = union(s.start[frames], s.end[frames])
    other = mine[s.kind[mine] != int(Kind.PYTHON)]
    inside = other[_within(s.start[other], fs, fe)]
    busy = union(s.start[inside], s.end[inside]) if len(inside) else (inside, inside)
    wall = float((fe - fs).sum())
    own = wall - float(measure_in(busy[0], busy[1], fs, fe).sum()) if len(inside) else wall
    return max(own, 0.0), int(_within(s.start[py], fs, fe).sum())


def _within(t: np.ndarray, fs: np.ndarray, fe: np.ndarray) -> np.ndarray:
    """Whether each time in ``t`` falls inside one of the sorted disjoint spans."""
    k = np.searchsorted(fs, t, side="right") - 1
    return (k >= 0) & (t < fe[np.maximum(k, 0)])


@rule("wrapper_overhead_bound", "Python around each compiled call", 0.05, 0.20,
      f"same grading as per-op overhead; the wrappers' own Python >= {WRAPPED_SHARE:.0%} of "
      f"the steady iterations, around {WRAPPED_CALLS:.0%} or more of the compiled calls")
def wrapped_call_overhead(ctx: Ctx, spec: Rule) -> Finding | None:
    w = wrapped_calls(ctx)
    if w is None or w.python < WRAPPED_SHARE * w.wall:
        return None
    n = max(len(ctx.rows), 1)
    ratio = PYTHON_LOOP_UNPROFILED
    before = w.wall - w.python * (1.0 - ratio)
    after = max(w.wall - w.python, 1.0)
    summary = (f"Each compiled call of {w.call} is made from {w.frame}, a Python function "
               f"between the loop's body and the call that spends {fmt_ns(w.python / n)} "
               f"per iteration in Python of its own, outside the call and any op "
               f"({pct(w.python / w.wall)} of the step, {w.events / n:,.0f} Python events "
               f"an iteration): a jit wrapper that prepares each call in Python (Flax NNX's "
               f"nnx.jit splitting and merging the model's object graph, Equinox's "
               f"filter_jit partitioning its pytree) or the program's own code around the "
               f"call. A plain jax.jit of a pure function called on the C++ fast path "
               f"leaves only the call. Estimate: the step without the profiler "
               f"({fmt_ns(before / n)}: that Python at {ratio:.0%} of its captured time, "
               f"as measured for loops the Python tracer records) over the step without it "
               f"({fmt_ns(after / n)}).")
    return make_finding(ctx, spec, min(w.python / w.wall, 1.0), summary,
                        longest_evidence(ctx, w.frames, f" around a call of {w.call}"),
                        speedup=before / after)
