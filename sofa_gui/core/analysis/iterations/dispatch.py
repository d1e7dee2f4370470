"""Landmarks of loops that record no optimizer step and no input fetch (JAX, TF functions).

Two host-side events mark such a step:

* the call of the Python function that runs one step of the loop (the loop body), when
  the profiler's Python tracer recorded frames: each call is one step, whatever the
  step does inside (an un-jitted step dispatches dozens of primitives, a jitted one may
  be followed by per-sample reads that each dispatch a small compiled function);
* the dispatch of the compiled step: the jitted function / ``tf.function`` whose compiled
  module does the most work. Compiled work is read from the XLA ops' ``hlo_module``
  when the trace has it, so a small function dispatched many times per step (an indexing
  op per read-back element, a transfer per batch) does not outweigh the step's module
  by its dispatch overhead; without it, host time in the dispatch calls decides.
"""

from __future__ import annotations

import re

import numpy as np

from ...trace import Kind, Trace

#: Calls that run one compiled TF/JAX step: a jitted function, a tf.function.
_DISPATCH = re.compile(r"^(PjitFunction\(|EagerLocalExecute: __inference_|__inference_)")
#: The compiled module an XLA op belongs to, in its event's arguments.
_MODULE = re.compile(rb'"hlo_module":"([^"\\]{1,200})"')
#: Events whose arguments are read for their module, at most (evenly spread beyond).
MAX_ARGS_READ = 100_000
#: The loop body's calls cover at least this share of the loop thread's traced time.
LOOP_SHARE = 0.5
#: Single calls that wrap the loop (``main``, ``train``) are looked into this deep.
MAX_WRAPPERS = 4
#: A Python frame of the profiler starting or stopping itself (JAX's ``$profiler.py:271
#: stop_trace``, ``torch/profiler/profiler.py(750): __exit__``): its time is the
#: profiler's (writing the trace out), not the program's.
_PROFILER_CONTROL = re.compile(r"(^|\W)(start_trace|stop_trace)$|"
                               r"profiler(_v2)?\.py[(:]\d+\)?:? (__enter__|__exit__|start|stop)$")
_EMPTY = np.zeros(0, np.int64)


def dispatch_ids(trace: Trace) -> np.ndarray:
    """Name ids of the calls that run one compiled step (:data:`_DISPATCH`), matched once
    per trace."""
    return trace.memo("dispatch.ids", lambda: trace.name_ids(_DISPATCH.match))


def step_dispatches(trace: Trace, lane: int) -> np.ndarray:
    """Starts of the main thread's calls of the jitted function / tf.function whose compiled
    work is largest (host time in its calls where the trace names no modules), among
    those called at least twice; outermost calls only."""
    return np.sort(trace.slices.start[compiled_step_calls(trace, lane)])


def step_marks(trace: Trace, lane: int) -> np.ndarray:
    """Sorted starts that mark the steps of a loop with no other landmark: the compiled
    step's dispatches (:func:`step_dispatches`), or, where a rarer jitted function
    recurs between their runs (:func:`_rarest_between`: a k-means fit's assignment after
    its updates, a policy update after a rollout's policy calls), the first dispatch
    after each of its calls (and the first dispatch, when it comes before them)."""
    d = step_dispatches(trace, lane)
    r = _rarest_between(trace, lane, d)
    if not len(r):
        return d
    k = np.searchsorted(d, r, side="right")
    first = d[k[k < len(d)]]
    return np.unique(np.r_[d[:1], first] if d[0] < r[0] else first)


def _rarest_between(trace: Trace, lane: int, d: np.ndarray) -> np.ndarray:
    """Sorted starts of the calls of the jitted function called least often (at least
    twice, at most half as often as the compiled step) with a step dispatch between
    every two of its calls: the step's once-a-step call beside a function it calls in a
    loop; empty where there is none."""
    if len(d) < 4:
        return _EMPTY
    calls = _outermost_dispatches(trace, lane)
    s = trace.slices
    cnt = np.bincount(s.name[calls])
    for nid in np.argsort(cnt, kind="stable").tolist():  # the rarest first
        c = int(cnt[nid])
        if c < 2:
            continue
        if 2 * c > len(d):
            break
        t = np.sort(s.start[calls[s.name[calls] == nid]])
        between = np.searchsorted(d, t[1:], "left") - np.searchsorted(d, t[:-1], "right")
        if (between > 0).all():
            return t.astype(np.int64)
    return _EMPTY


def _outermost_dispatches(trace: Trace, lane: int) -> np.ndarray:
    """The outermost dispatch calls on ``lane`` (slice indexes, by start)."""
    s = trace.slices
    idx = trace.lane_slices(lane)
    idx = idx[np.isin(s.name[idx], dispatch_ids(trace))]
    if not len(idx):
        return _EMPTY
    idx = idx[np.argsort(s.start[idx], kind="stable")]
    reach = np.r_[np.iinfo(np.int64).min, np.maximum.accumulate(s.end[idx])[:-1]]
    return idx[s.start[idx] >= reach]  # a jitted call nests its own name


def compiled_step_calls(trace: Trace, lane: int) -> np.ndarray:
    """The calls (slice indexes) of the compiled step's function on ``lane``, the whole
    trace's: the ones whose starts :func:`step_dispatches` gives."""
    if lane < 0:
        return _EMPTY
    s = trace.slices
    idx = _outermost_dispatches(trace, lane)
    if not len(idx):
        return _EMPTY
    cnt = np.bincount(s.name[idx])
    weight = _compiled_work(trace, cnt)
    if weight is None:
        weight = np.bincount(s.name[idx], weights=s.dur[idx].astype(float))
    weight[cnt < 2] = 0
    if weight.max() <= 0:
        return _EMPTY
    return idx[s.name[idx] == int(np.argmax(weight))].astype(np.int64)


def _compiled_work(trace: Trace, called: np.ndarray) -> np.ndarray | None:
    """Per dispatch name id (``called`` > 0): time of the XLA ops of its module
    (``PjitFunction(f)`` runs module ``jit_f``); None when no called function's module
    is in the trace."""
    work = trace.memo("dispatch.module_work", lambda: _module_work(trace))
    out = np.zeros(len(called), float)
    for i in np.flatnonzero(called).tolist():
        out[i] = work.get(_plain(_function_of(trace.names[i])), 0.0)
    return out if out.any() else None


def function_module(name: str) -> str:
    """The compiled module a dispatch call runs (``PjitFunction(f)``: ``jit_f``), as
    :func:`module_key` writes it."""
    return _plain(_function_of(name))


def module_key(module: str) -> str:
    """A module name as compared with a dispatch call's (:func:`function_module`)."""
    return _plain(module)


def module_of(trace: Trace, rows: np.ndarray) -> list[str]:
    """Per slice of ``rows``: the compiled module its XLA op belongs to, as
    :func:`module_key` writes it ("" where its arguments name none)."""
    s = trace.slices
    out = []
    for i in rows.tolist():
        m = _MODULE.search(trace.args.raw(int(s.args[i]))) if s.args[i] >= 0 else None
        out.append(_plain(m.group(1).decode("utf-8", "replace")) if m else "")
    return out


def _function_of(name: str) -> str:
    m = re.match(r"PjitFunction\((.*)\)$", name)
    return "jit_" + m.group(1) if m else name.split(": ", 1)[-1]


def _plain(name: str) -> str:
    """A module or function name compared without case and punctuation (``<lambda>``
    becomes module ``jit__lambda``)."""
    return re.sub(r"[^0-9a-z]", "", name.lower())


def _module_work(trace: Trace) -> dict[str, float]:
    """Executed time per compiled module, from the ``hlo_module`` of XLA op events (a
    byte scan of their arguments; evenly sampled beyond :data:`MAX_ARGS_READ` events)."""
    s = trace.slices
    rows = np.flatnonzero((s.args >= 0) & np.isin(s.kind, [int(Kind.CPU_OP), int(Kind.KERNEL)]))
    if len(rows) > MAX_ARGS_READ:
        rows = rows[np.linspace(0, len(rows) - 1, MAX_ARGS_READ).astype(np.int64)]
    if not len(rows) or not trace.args.may_hold(s.args[rows], (b"hlo_module",)):
        return {}
    work: dict[str, float] = {}
    for i, key in zip(rows.tolist(), module_of(trace, rows)):
        if key:
            work[key] = work.get(key, 0.0) + float(s.dur[i])
    return work


def loop_calls(trace: Trace, lane: int, dispatches: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(starts, ends) of the calls of the loop body's Python function on ``lane``; empty
    when the trace has no Python frames or none runs the loop.

    The loop body is the outermost Python function called at least twice whose calls
    cover at least :data:`LOOP_SHARE` of the thread's traced time (single calls that
    cover it, such as ``main`` or ``train``, are looked into). When the trace has step
    dispatches, every one must lie inside a call: frames of an inner per-sample loop
    written straight in the traced block do not hold the step's dispatch.
    """
    if lane < 0:
        return _EMPTY, _EMPTY
    s = trace.slices
    idx = trace.lane_slices(lane)
    py = idx[s.kind[idx] == int(Kind.PYTHON)]
    if len(py) < 2:
        return _EMPTY, _EMPTY
    level, control = _program_frames(trace, py)
    span = float(s.end[idx].max() - s.start[idx].min()) - control
    level = level[s.depth[level] == s.depth[level].min()] if len(level) else level
    for _ in range(MAX_WRAPPERS + 1):
        names, inv = np.unique(s.name[level], return_inverse=True)
        total = np.bincount(inv, weights=s.dur[level].astype(float))
        top = int(np.argmax(total))
        if total[top] < LOOP_SHARE * span:
            break
        calls = level[inv == top]
        calls = calls[np.argsort(s.start[calls], kind="stable")]
        if len(calls) >= 2:
            starts, ends = s.start[calls].astype(np.int64), s.end[calls].astype(np.int64)
            return (starts, ends) if _holds_all(starts, ends, dispatches) else (_EMPTY, _EMPTY)
        level = _inner_frames(s, py, int(calls[0]))
        if not len(level):
            break
    return _EMPTY, _EMPTY


def _program_frames(trace: Trace, py: np.ndarray) -> tuple[np.ndarray, float]:
    """(the Python frames ``py`` that hold none of the profiler's own start / stop frames,
    ns those frames' outermost holders take): a ``with profiler`` block's exit can take
    longer than the steps it recorded, and is no loop body."""
    s = trace.slices
    ctl = py[np.isin(s.name[py], trace.name_ids(_PROFILER_CONTROL.search))]
    if not len(ctl):
        return py, 0.0
    k = np.searchsorted(np.sort(s.start[ctl]), s.start[py], side="left")
    first = np.r_[np.sort(s.start[ctl]), np.iinfo(np.int64).max][k]
    holds = first < s.end[py]
    top = py[holds]
    top = top[s.depth[top] == s.depth[top].min()]
    return py[~holds], float(s.dur[top].sum())


def _inner_frames(s, py: np.ndarray, parent: int) -> np.ndarray:
    """The outermost Python frames inside frame ``parent``."""
    inside = py[(s.start[py] >= s.start[parent]) & (s.end[py] <= s.end[parent])
                & (s.depth[py] > s.depth[parent])]
    return inside[s.depth[inside] == s.depth[inside].min()] if len(inside) else inside


def _holds_all(starts: np.ndarray, ends: np.ndarray, marks: np.ndarray) -> bool:
    k = np.searchsorted(starts, marks, side="right") - 1
    return bool(np.all((k >= 0) & (marks < ends[np.maximum(k, 0)])))
