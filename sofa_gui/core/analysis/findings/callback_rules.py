"""Host callbacks inside a compiled step: ``jax.debug.callback``, ``jax.experimental.
io_callback`` and ``jax.pure_callback`` stop the compiled program to run Python on the host
and hand it the callback's arguments (a host round trip per call).

What the trace shows of a round trip:

* the callback's own thunk on the runtime's threads, named after its HLO instruction
  (``debug_callback.1``, ``io_callback``, ``pure_callback``,
  ``xla_python_cpu_callback``): the arguments' copy to the host and the Python function;
* JAX's Python dispatch (``pjit.py`` ``cache_miss`` around the executable's run) in the
  steps that call back: a compiled function with host callbacks (effects) does not take
  JAX's C++ fast path, so every call goes through the Python dispatch.

The share is both, over the steady steps' time (the thunks' union; the dispatch outside
the executable's run).  It is a secondary cost beside the step's own bound (the verdict
keeps that): the fix returns the metrics as outputs of the step (accumulated on the device)
and reads them every N steps, or, where an order of the calls is not needed, an
``io_callback`` / ``debug.callback`` with ``ordered=False``.

Where the Python tracer records the host function under JAX's call of it (the frames
nested in ``callback.py``'s ``__call__``) and that function's own work is at least half
the callbacks' time, the callback is work the step hands to the host and waits for (a
SciPy filter on the step's images): ``host_callback_work``, host overhead, in place of the
round trip.  Its share is the function's own work over the steady steps' time; its fix
writes that work in ``jax.numpy`` inside the compiled step.  The estimate is the step
without the function's work: the round trip (the arguments' copy, the result's
``device_put``) that the fix saves too is counted as paying for the moved work's cost in
the compiled program, which the trace does not show (an upper bound where that costs more).
"""

from __future__ import annotations

import re

import numpy as np

from ...units import fmt_ns
from ...units import fmt_pct as pct
from ..host_side import window_of
from ..intervals import measure_in, union
from ..results import Evidence, Finding
from .context import MAX_EVIDENCE, Ctx, make_finding
from .registry import Rule, rule

#: The thunk of a host callback, by its HLO instruction's name.
CALLBACK = re.compile(r"^(debug_callback|io_callback|pure_callback|"
                      r"xla_(ffi_)?python_[cg]pu_callback)(\.\d+)?$")
#: JAX's Python dispatch of a jitted call (the C++ fast path missed) and the executable's
#: run inside it.
PY_DISPATCH = re.compile(r"^\$(\S*/)?pjit\.py:\d+ cache_miss$")
EXECUTE = re.compile(r"^(ExecuteReplicated\.__call__|\S*ExecuteHelper\S*)$")
#: JAX's Python call of a callback's host function (``_FlatCallback.__call__``): what it
#: calls is the host function's own work.
HOST_CALL = re.compile(r"^\$(\S*/)?callback\.py:\d+ __call__$")
#: Host-function work at least this part of the callbacks' time: host work, not a round trip.
WORK_PART = 0.5


@rule("host_callback_round_trip", "Host callback round trips in the compiled step", 0.03,
      0.15, "synchronisation thresholds: a host callback is a host round trip per call")
def host_callback_round_trip(ctx: Ctx, spec: Rule) -> Finding | None:
    cb = _callbacks(ctx)
    if cb is None or _is_host_work(*cb[3:]):
        return None
    calls, ws, we, thunks, _ = cb
    host = ctx.bd.host
    s = ctx.trace.slices
    wall = float((we - ws).sum()) or 1.0
    thunks /= wall
    dispatch = _python_dispatch(ctx, host, ws, we) / wall
    share = min(thunks + dispatch, 1.0)
    per = len(calls) / max(ctx.ph.n_steady, 1)
    name = ctx.trace.name_of(int(calls[0]))
    evidence = _evidence(ctx, calls)
    via = (f"; and every step goes through JAX's Python dispatch (pjit cache_miss), "
           f"{pct(dispatch)} outside the executable's run: a compiled function with host "
           f"callbacks does not take the C++ fast path" if dispatch >= 0.01 else "")
    summary = (f"The compiled step calls back into Python on the host {per:.1f} times per "
               f"steady-state iteration ({name}, "
               f"{fmt_ns(float(np.median(s.dur[calls])))} median): a host round trip each "
               f"time, {pct(thunks)} of the step in the callbacks{via}; {pct(share)} in all. "
               f"Returning the metrics from the step (accumulated on the device) and reading "
               f"them every N steps removes the round trips.")
    return make_finding(ctx, spec, share, summary, evidence)


@rule("host_callback_work", "Host work in a callback of the compiled step", 0.05, 0.25,
      "host-overhead thresholds: the step stops for a host function's own work")
def host_callback_work(ctx: Ctx, spec: Rule) -> Finding | None:
    cb = _callbacks(ctx)
    if cb is None or not _is_host_work(*cb[3:]):
        return None
    calls, ws, we, thunks, work = cb
    wall = float((we - ws).sum()) or 1.0
    share = min(work / wall, 1.0)
    s = ctx.trace.slices
    per = len(calls) / max(ctx.ph.n_steady, 1)
    summary = (f"The compiled step hands work to Python on the host {per:.1f} times per "
               f"steady-state iteration ({ctx.trace.name_of(int(calls[0]))}, "
               f"{fmt_ns(float(np.median(s.dur[calls])))} median, {pct(thunks / wall)} of "
               f"the step) and waits for it: the host function's own work under JAX's call "
               f"of it is {pct(share)} of the step, the rest the round trip (the arguments' "
               f"copy, the result put back on the device). Writing that work in jax.numpy "
               f"inside the step keeps it in the compiled program. Estimate: the step without "
               f"the host function's work, the round trip's saving counted as paying for the "
               f"moved work in the program, which the trace does not show (an upper bound "
               f"where that work costs more there).")
    return make_finding(ctx, spec, share, summary, _evidence(ctx, calls))


def _callbacks(ctx: Ctx):
    """The steady steps' callback thunks: (thunks, step starts, step ends, ns in the
    thunks, ns of the host functions' own work in them), or None where there are none."""
    def measure():
        host = ctx.bd.host
        s = ctx.trace.slices
        calls = np.flatnonzero(np.isin(s.name, ctx.trace.name_ids(CALLBACK.match))
                               & (s.dur > 0))
        if host is None or not len(calls) or not len(ctx.rows):
            return None
        ws, we = host.starts[ctx.rows], host.ends[ctx.rows]
        calls = calls[ctx.in_steady(s.start[calls], host.starts, host.ends)]
        if not len(calls):
            return None
        thunks = float(measure_in(*union(s.start[calls], s.end[calls]), ws, we).sum())
        return calls, ws, we, thunks, _host_work(ctx, calls, ws, we)
    return ctx.once("host_callbacks", measure)


def _is_host_work(thunks: float, work: float) -> bool:
    """The host functions' own work is :data:`WORK_PART` or more of the thunks' time."""
    return work >= WORK_PART * thunks


def _host_work(ctx: Ctx, calls: np.ndarray, ws: np.ndarray, we: np.ndarray) -> float:
    """ns of the host functions' own work in the callback thunks ``calls``: what runs
    nested in JAX's call of them on the thunk's thread (none where no Python tracer
    recorded it)."""
    s = ctx.trace.slices
    call = np.isin(s.name, ctx.trace.name_ids(HOST_CALL.match))
    starts, ends, lanes = [], [], {}
    for c in calls.tolist():
        lane = int(s.lane[c])
        if lane not in lanes:
            lanes[lane] = ctx.trace.lane_slices(lane)
        mine = lanes[lane]
        for f in mine[call[mine] & (s.start[mine] >= s.start[c])
                      & (s.end[mine] <= s.end[c])].tolist():
            inner = mine[(s.start[mine] >= s.start[f]) & (s.end[mine] <= s.end[f])
                         & (mine != f)]
            starts += s.start[inner].tolist()
            ends += s.end[inner].tolist()
    if not starts:
        return 0.0
    return float(measure_in(*union(np.asarray(starts, np.int64), np.asarray(ends, np.int64)),
                            ws, we).sum())


def _evidence(ctx: Ctx, calls: np.ndarray) -> list[Evidence]:
    s, host = ctx.trace.slices, ctx.bd.host
    return [Evidence(f"{ctx.trace.name_of(j)} runs {fmt_ns(int(s.dur[j]))} on the host",
                     int(s.start[j]), int(s.end[j]),
                     ctx.it(int(window_of(s.start[j:j + 1], host.starts, host.ends)[0])),
                     [int(s.lane[j])])
            for j in calls[np.argsort(-s.dur[calls], kind="stable")][:MAX_EVIDENCE].tolist()]


def _python_dispatch(ctx: Ctx, host, ws: np.ndarray, we: np.ndarray) -> float:
    """ns of the main thread in JAX's Python dispatch of jitted calls, outside the
    executable's run, in the windows ``ws``/``we``."""
    s = ctx.trace.slices
    mine = ctx.trace.lane_slices(host.lane)
    miss = mine[np.isin(s.name[mine], ctx.trace.name_ids(PY_DISPATCH.match))]
    if not len(miss):
        return 0.0
    run = mine[np.isin(s.name[mine], ctx.trace.name_ids(EXECUTE.match))]
    total = measure_in(*union(s.start[miss], s.end[miss]), ws, we).sum()
    inside = measure_in(*union(s.start[run], s.end[run]), ws, we).sum() if len(run) else 0
    return max(float(total - inside), 0.0)
