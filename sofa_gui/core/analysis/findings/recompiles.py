"""Compilation that recurs in steady state, measured: the same function traced and
compiled again step after step (a jitted function called with a new input shape each step,
a ``torch.compile`` region whose guards fail on every new shape, a ``tf.function`` handed a
new Python number each step, which it traces into a new graph).

The work counted is, on the main thread, every compile span (XLA's ``backend_compile``,
JAX's lowering, TorchDynamo's frame compile) and, when the compile runs inside the call of
a jitted function (``PjitFunction(f)``, a ``tf.function``), that call from its start to its
next recorded event after the compile: the call traces the function first, then lowers and
compiles it, then loads the new executable, and only then runs it.  A JAX call that
compiled dispatches that run through JAX's Python path (``ExecuteReplicated.__call__``),
which a warm call skips: up to the run's dispatch, that path counts too.  A ``tf.function``
traced again is the call that holds its graph building, from its start (its cache lookup,
which missed) to where the first call of the new graph runs its kernels (the concrete
function made, instantiated, and its executor created on its first run).  The new
program's first run itself is read in :mod:`.first_runs`.  It
recurs when one function compiles in at least half of the steady iterations (and two): the
compile calls ``startup_cost`` leaves out as not one-off.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from ..host_side import window_of
from ..intervals import measure_in, union
from ..iterations.dispatch import dispatch_ids
from ..one_off import is_compile
from .context import Ctx
from .work import outermost

#: TensorFlow tracing a ``tf.function`` into a graph.
TF_BUILD = re.compile(r"^tf\.function-graph_building$")
#: A call of one concrete function of a ``tf.function``: ``__inference_<function>_<number>``.
TF_CONCRETE = re.compile(r"^(?:EagerLocalExecute: )?__inference_(.+)_\d+$")
#: Where a TensorFlow function call starts running its graph's kernels.
TF_RUN = re.compile(r"^(KernelAndDeviceFunc::Run|EagerKernelExecute)$")
#: Where a TensorFlow function's run has its executor and starts the graph's kernels (the
#: first run of a concrete function creates its executor before this).
TF_READY = re.compile(r"^FunctionRun$")
#: JAX's Python dispatch path, which a jitted call takes after it compiled (a warm call
#: dispatches from C++, with no such frame).
SLOW_PATH = re.compile(r"^ExecuteReplicated\.__call__$")
#: Where a jitted call dispatches its program's run, on either path.
RUN_DISPATCH = re.compile(r"^CommonPjRtLoadedExecutable::ExecuteHelperOnSingleDevice$")
#: A compile span shorter than this is bookkeeping, not compilation.
MIN_COMPILE_NS = 100_000


@dataclass
class Recompiles:
    """What recurring compiles cost the steady iterations."""

    function: int  # name id of the function compiled again (its jitted call, else the span)
    n_rows: int  # steady iterations that compile it
    spans: np.ndarray  # the steady compile spans (slice indexes)
    span_ns: np.ndarray  # per span, ns of its compile work
    per_row: np.ndarray  # ns of compile work per steady row (``ctx.rows`` order)
    starts: np.ndarray  # the compile work as disjoint intervals
    ends: np.ndarray
    wall: float  # ns of the steady rows

    @property
    def spent(self) -> float:
        return float(self.per_row.sum())

    @property
    def share(self) -> float:
        return min(self.spent / self.wall, 1.0)


def recompiles(ctx: Ctx) -> Recompiles | None:
    """The steady iterations' recurring compile work (None: none recurs); once per
    analysis."""
    return ctx.once("recompiles", lambda: _measure(ctx))


def _measure(ctx: Ctx) -> Recompiles | None:
    host = ctx.bd.host
    if host is None or ctx.bd.whole_trace or not len(ctx.rows):
        return None
    comp, lo, hi, fn = _compiles(ctx, host.lane)
    if not len(comp):
        return None
    w = window_of(lo, ctx.bd.starts, ctx.bd.ends)
    steady = (w >= 0) & ctx.ph.steady[np.maximum(w, 0)]
    key = _recurring(ctx, fn[steady], w[steady])
    if key is None:
        return None
    us_, ue = union(lo, hi)
    r = ctx.rows
    per_row = measure_in(us_, ue, ctx.bd.starts[r], ctx.bd.ends[r]).astype(np.float64)
    wall = float((ctx.bd.ends[r] - ctx.bd.starts[r]).sum()) or 1.0
    n_rows = len(np.unique(w[steady & (fn == key)]))
    return Recompiles(key, n_rows, comp[steady], (hi - lo)[steady], per_row, us_, ue, wall)


def _compiles(ctx: Ctx, lane: int) -> tuple[np.ndarray, ...]:
    """The compile work of ``lane``: (its spans, the work's starts and ends, the name id of
    the function each compiles).  A compile span's work reaches back to the start of the
    jitted-function call that holds it (that call traces first); TensorFlow's graph
    building counts only where it traces a ``tf.function`` again (:func:`_tf_retraces`)."""
    t, s = ctx.trace, ctx.trace.slices
    mine = t.lane_slices(lane)
    comp = outermost(s.start, s.end, mine[np.isin(s.name[mine], t.name_ids(is_compile))
                                          & (s.dur[mine] >= MIN_COMPILE_NS)])
    calls = outermost(s.start, s.end, mine[np.isin(s.name[mine], dispatch_ids(t))])
    built = np.isin(s.name[comp], t.name_ids(TF_BUILD.match))
    comp, tf_built = comp[~built], comp[built]
    lo, hi, fn = s.start[comp].copy(), s.end[comp].copy(), s.name[comp].copy()
    if len(comp) and len(calls):
        k = np.searchsorted(s.start[calls], s.start[comp], side="right") - 1
        held = (k >= 0) & (s.end[calls[np.maximum(k, 0)]] >= s.end[comp])
        lo[held], fn[held] = s.start[calls[k[held]]], s.name[calls[k[held]]]
        hi[held] = _loaded(s.start[mine], hi[held], s.end[calls[k[held]]])
        hi[held] = _slow_path(t, mine, hi[held], s.end[calls[k[held]]])
    parts = [(comp, lo, hi, fn), _tf_retraces(ctx, lane, tf_built, calls)]
    return tuple(np.concatenate(col) for col in zip(*parts))


def _loaded(starts: np.ndarray, after: np.ndarray, until: np.ndarray) -> np.ndarray:
    """Where a jitted call goes on after its compile (``after``): its next recorded event
    (``starts``: the lane's, sorted), at most the call's end (``until``).  The time between
    is the new program's loading (JAX wraps and caches the executable), which records
    nothing with the Python tracer off."""
    j = np.searchsorted(starts, after, side="left")
    nxt = starts[np.minimum(j, len(starts) - 1)] if len(starts) else until
    return np.minimum(np.where(j < len(starts), nxt, until), until)


def _slow_path(t, mine: np.ndarray, after: np.ndarray, until: np.ndarray) -> np.ndarray:
    """Where a jitted call that compiled dispatches its run: a call that missed its cache
    goes on through JAX's Python path (``ExecuteReplicated.__call__``, its ``shard_args``)
    up to the run's dispatch (``ExecuteHelperOnSingleDevice``), where a warm call, from
    C++, parses its arguments and dispatches at once.  That path is the miss's, counted
    with the compile; ``after`` where the call (ending at ``until``) records none, and
    where the trace holds host callbacks: a compiled function with callbacks (effects)
    takes the Python path on every call, warm too."""
    from .callback_rules import CALLBACK  # here: importing that rule module above would
    # register its rule ahead of this family's

    s = t.slices
    if np.isin(s.name, t.name_ids(CALLBACK.match)).any():
        return after
    py = np.sort(s.start[mine[np.isin(s.name[mine], t.name_ids(SLOW_PATH.match))]])
    run = np.sort(s.start[mine[np.isin(s.name[mine], t.name_ids(RUN_DISPATCH.match))]])
    if not len(py) or not len(run):
        return after
    j = np.searchsorted(py, after, side="left")
    a = py[np.minimum(j, len(py) - 1)]
    r = run[np.minimum(np.searchsorted(run, a, side="left"), len(run) - 1)]
    ok = (j < len(py)) & (a <= until) & (r >= a) & (r <= until)
    return np.where(ok, r, after)


def _tf_retraces(ctx: Ctx, lane: int, built: np.ndarray, calls: np.ndarray
                 ) -> tuple[np.ndarray, ...]:
    """Graph building that traces a ``tf.function`` again: each trace makes a new concrete
    function, named ``__inference_<function>_<number>`` with a new number, run by the call
    after it.  Such a build counts when that call is the first of its concrete function and
    its function has several, from the start of the ``tf.function`` call that holds both
    (its cache lookup, which missed) to where that first call runs its kernels: the new
    concrete function made and instantiated, and on its first run its executor created
    (up to ``FunctionRun``).  A pipeline's map functions or a step function traced once are
    set-up, not recompilation.  Keyed by the function's first concrete function."""
    t, s = ctx.trace, ctx.trace.slices
    out: list[list] = [[], [], [], []]
    if not len(built) or not len(calls):
        return tuple(np.asarray(col, np.int64) for col in out)
    calls = calls[np.argsort(s.start[calls], kind="stable")]
    first, base = _concrete_functions(t, calls)
    mine = t.lane_slices(lane)
    runs = np.sort(s.start[mine[np.isin(s.name[mine], t.name_ids(TF_RUN.match))]])
    ready = np.sort(s.start[mine[np.isin(s.name[mine], t.name_ids(TF_READY.match))]])
    for b in built.tolist():
        k = int(np.searchsorted(s.start[calls], s.end[b], side="left"))
        if k >= len(calls) or not first[k] or base[k] is None:
            continue
        call = int(calls[k])
        ran = _run_start(runs, int(s.start[call]), int(s.end[call]))
        ran = _run_start(ready, ran, int(s.end[call])) if ran > s.start[call] else ran
        held = _holder_start(t, mine, b, calls[max(k - 1, 0):k + 2], call)
        for span, a, z in ((b, held, s.end[b]), (call, s.end[b], ran)):
            for col, v in zip(out, (span, a, z, base[k])):
                col.append(v)
    return tuple(np.asarray(col, np.int64) for col in out)


def _holder_start(t, mine: np.ndarray, built: int, near: np.ndarray, call: int) -> int:
    """The start of the call that holds a graph build and the ``call`` after it, and no
    other of the ``near`` calls (the ``tf.function`` call: the build's parent); the build's
    own start when there is no such call (a loop that holds them all is no such call)."""
    s = t.slices
    up = mine[s.depth[mine] == s.depth[built] - 1]
    k = int(np.searchsorted(s.start[up], s.start[built], side="right")) - 1
    if k < 0 or s.end[up[k]] < s.end[call]:
        return int(s.start[built])
    a, z = s.start[up[k]], s.end[up[k]]
    others = near[near != call]
    if np.any((s.start[others] < z) & (s.end[others] > a)):
        return int(s.start[built])
    return int(a)


def _concrete_functions(t, calls: np.ndarray) -> tuple[np.ndarray, list]:
    """Per call (sorted by start): whether it is the first call of its concrete function,
    and the name id of its function's first concrete function where that function has
    several concrete functions (else None)."""
    s = t.slices
    names = [t.names[int(n)] for n in s.name[calls]]
    fns = [m.group(1) if (m := TF_CONCRETE.match(n)) else None for n in names]
    seen: set[str] = set()
    first = np.zeros(len(calls), bool)
    rep: dict[str, int] = {}
    variants: dict[str, set] = {}
    for i, (n, f) in enumerate(zip(names, fns)):
        first[i] = n not in seen
        seen.add(n)
        if f is not None:
            rep.setdefault(f, int(s.name[calls[i]]))
            variants.setdefault(f, set()).add(n)
    base = [rep[f] if f is not None and len(variants[f]) > 1 else None for f in fns]
    return first, base


def _run_start(runs: np.ndarray, start: int, end: int) -> int:
    """Where a call from ``start`` to ``end`` starts running its graph: the first kernel run
    (``runs``: the lane's run starts, sorted) inside it; the call's start when none is."""
    k = int(np.searchsorted(runs, start, side="left"))
    return int(runs[k]) if k < len(runs) and runs[k] <= end else start


def _recurring(ctx: Ctx, fn: np.ndarray, rows: np.ndarray) -> int | None:
    """The name id of the function compiled in the most steady rows (the jitted call that
    holds the compile; the compile span itself outside one), when those are at least half
    of the steady rows and two; else None."""
    if not len(fn):
        return None
    counts = {nid: len(np.unique(rows[fn == nid])) for nid in np.unique(fn).tolist()}
    best = max(counts, key=lambda nid: (counts[nid], -nid))
    return int(best) if counts[best] >= max(2, ctx.ph.n_steady / 2) else None
