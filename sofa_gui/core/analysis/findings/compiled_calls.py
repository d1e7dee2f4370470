"""Inference made of calls of a compiled TensorFlow function, each paying a fixed cost that
its ops do not: a SavedModel's restored signature or a ``tf.function`` called once per
request.

Each call converts its arguments, dispatches the function and has the runtime's executor
run its graph: a few hundred microseconds whatever the batch, while the model's ops for
one input (on the runtime's pool threads, ``tf_Compute``) may take a few tens.  Called
once per request, that fixed cost is paid per request; one call on the stacked requests
pays it once.  It is the per-request overhead of :mod:`.small_batch` (its share, its
batching fix and estimate), found by what the trace shows of the calls rather than by
the ops' shapes, which the executor's ops do not record.

A call is the main thread's outermost event for the function: the frame named after it
(``restored_function_body``, ``one_step_on_data_distributed``) that holds its dispatch
(``EagerLocalExecute: __inference_<name>_<id>``), else the dispatch itself.  Its fixed
cost is its time with none of the model's ops running on the pool threads (the executor's
work measured on the threads that run it; the runtime's per-op work there, variable reads
and ops of a few microseconds, is part of the cost of calling: :func:`.host_estimate.pool_math`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from ..intervals import measure_in, union
from .batch_estimate import unshaped_ns
from .causes import self_times
from .context import Ctx
from .host_estimate import pool_math
from .work import outermost, starts_inside

#: The dispatch of a compiled TF function; group 1 is the function's name.
INFERENCE_CALL = re.compile(r"^EagerLocalExecute: __inference_(.+)_\d+$")
#: The calls hold at least this share of the steady steps' main-thread time.
CALLS_COVER = 0.5
#: At least this share of the calls' time runs none of the model's ops.
FIXED_SHARE = 0.5
#: A call's fixed cost (argument conversion, dispatch, executor set-up) is at most this
#: (ns, median); longer time without pool work is work the trace puts elsewhere (kernels
#: run inline on the calling thread, an XLA cluster), not the cost of calling.
FIXED_MAX_NS = 2_000_000


@dataclass(frozen=True)
class CompiledCalls:
    """The steady steps' calls of a compiled function: ``name`` the function, ``calls`` the
    main thread's call events, ``per_step`` calls per steady step, ``call_ns`` /
    ``fixed_ns`` / ``work_ns`` a call's median time, fixed cost and ops' work on the pool
    threads, ``pool_ns`` that work in the steady steps (ns, all of it) and ``grow_ns`` the
    part of a call's ops' work that grows with its input (:func:`.batch_estimate.
    unshaped_ns`: each op's median time over its fastest calls', per call)."""

    name: str
    calls: np.ndarray
    per_step: float
    call_ns: float
    fixed_ns: float
    work_ns: float
    pool_ns: float
    grow_ns: float = 0.0


def compiled_calls(ctx: Ctx, host) -> CompiledCalls | None:
    """The steady steps' compiled-function calls whose time is mostly their fixed cost
    (:data:`CALLS_COVER`, :data:`FIXED_SHARE`, :data:`FIXED_MAX_NS`), or None."""
    r = ctx.rows
    calls = function_calls(ctx, host)
    if len(calls) < 2 or not len(r):
        return None
    s = ctx.trace.slices
    wall = float((host.ends[r] - host.starts[r]).sum()) or 1.0
    dur = s.dur[calls].astype(np.float64)
    if dur.sum() < CALLS_COVER * wall:
        return None
    pool = pool_math(ctx, host)
    ps, pe = union(s.start[pool], s.end[pool]) if len(pool) else (pool, pool)
    work = measure_in(ps, pe, s.start[calls], s.end[calls]) if len(pool) else 0.0 * dur
    fixed = dur - work
    if fixed.sum() < FIXED_SHARE * dur.sum() or np.median(fixed) > FIXED_MAX_NS:
        return None
    in_steps = (float(measure_in(ps, pe, host.starts[r], host.ends[r]).sum())
                if len(pool) else 0.0)
    name = ctx.trace.names[int(np.bincount(s.name[calls]).argmax())]
    ops = pool[starts_inside(ctx, calls, pool)] if len(pool) else pool
    grow = unshaped_ns(s.name[ops], self_times(ctx, ops).astype(np.float64)) / len(calls)
    return CompiledCalls(name, calls, len(calls) / len(r), float(np.median(dur)),
                         float(np.median(fixed)), float(np.median(work)), in_steps, grow)


def function_calls(ctx: Ctx, host) -> np.ndarray:
    """The steady steps' outermost events of the main thread that call a compiled TF
    function: the frames named after a function one of its dispatches runs, and
    dispatches outside any such frame."""
    t = ctx.trace
    s = t.slices
    mine = ctx.steady_slices(host)
    dispatch = mine[np.isin(s.name[mine], t.name_ids(INFERENCE_CALL.match))]
    if not len(dispatch):
        return dispatch
    names = {INFERENCE_CALL.match(t.names[int(n)]).group(1)
             for n in np.unique(s.name[dispatch]).tolist()}
    frames = mine[np.isin(s.name[mine], t.name_ids(names.__contains__))]
    return outermost(s.start, s.end, np.union1d(frames, dispatch))
