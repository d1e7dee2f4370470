"""What iterations do, shared by the trace rules: one-off calls, the work some iterations
have on top of the steady ones, and outermost slices."""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from ...trace import Kind
from ...units import fmt_ns
from ..host_side import window_of
from ..intervals import covered
from ..iterations.recurring import name_base, recurs
from ..one_off import is_one_off
from ..results import Cause, Evidence
from .causes import self_times
from .context import MAX_CAUSES, Ctx


def outermost(starts: np.ndarray, ends: np.ndarray, idx: np.ndarray,
              disjoint: bool = False) -> np.ndarray:
    """``idx`` sorted by start, outermost only: a slice inside an earlier one is dropped
    (a compile inside a compile counts once); with ``disjoint`` also one that starts
    before every earlier one has ended."""
    idx = np.asarray(idx, np.int64)
    if not len(idx):
        return idx
    idx = idx[np.argsort(starts[idx], kind="stable")]
    reach = np.maximum.accumulate(ends[idx])
    later = starts[idx[1:]] >= reach[:-1] if disjoint else ends[idx[1:]] > reach[:-1]
    return idx[np.concatenate([[True], later])]


def innermost(starts: np.ndarray, ends: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """``idx`` (slices of one thread) sorted by start, innermost only: a slice with another
    of them inside is dropped (the kernel under its wrappers)."""
    idx = np.asarray(idx, np.int64)
    idx = idx[np.argsort(starts[idx], kind="stable")]
    if len(idx) < 2:
        return idx
    return idx[~np.append(starts[idx[1:]] < ends[idx[:-1]], False)]


#: An op this short is dominated by its fixed dispatch cost.
TINY_NS = 50_000


def name_medians(names: np.ndarray, dur: np.ndarray) -> np.ndarray:
    """Per slice, the median duration of the slices of its name."""
    return name_quantiles(names, dur, 0.5)


def name_quantiles(names: np.ndarray, dur: np.ndarray, q: float) -> np.ndarray:
    """Per slice, the ``q`` quantile (linear between neighbours) of the durations of the
    slices of its name."""
    if not len(names):
        return np.zeros(0)
    _, inv = np.unique(names, return_inverse=True)
    order = np.lexsort((dur, inv))  # by name, then duration: one sort for every name
    d = np.asarray(dur, np.float64)[order]
    n = np.bincount(inv)
    pos = np.cumsum(n) - n + (n - 1) * q
    lo = np.floor(pos).astype(np.int64)
    hi = np.ceil(pos).astype(np.int64)
    return (d[lo] + (d[hi] - d[lo]) * (pos - lo))[inv]


#: A call this long and this many times its name's median is a one-off.
ONE_OFF_NS = 10_000_000
ONE_OFF_RATIO = 100


def one_off_calls(ctx: Ctx) -> np.ndarray:
    """Every one-off slice, outermost only: named one-off work (:func:`is_one_off`, >= 100
    µs, not sampled Python frames) and runtime calls >= 10 ms and >= 100x their name's
    median."""
    cache = ctx.trace.memo("one_off", dict)
    if "idx" in cache:
        return cache["idx"]
    s = ctx.trace.slices
    ids = ctx.trace.name_ids(is_one_off)
    named = np.flatnonzero(np.isin(s.name, ids) & (s.dur >= 100_000)
                           & (s.kind != int(Kind.PYTHON)))
    rt = np.flatnonzero((s.kind == int(Kind.RUNTIME)) & (s.dur >= ONE_OFF_NS))
    if len(rt):
        all_rt = np.flatnonzero(s.kind == int(Kind.RUNTIME))
        med = {nid: float(np.median(s.dur[all_rt[s.name[all_rt] == nid]]))
               for nid in np.unique(s.name[rt]).tolist()}
        rt = rt[[s.dur[j] >= ONE_OFF_RATIO * med[int(s.name[j])] for j in rt.tolist()]]
    idx = _not_recurring(ctx, np.union1d(named, rt).astype(np.int64))
    idx = outermost(s.start, s.start + s.dur, idx)
    cache["idx"] = idx
    return idx


def _not_recurring(ctx: Ctx, idx: np.ndarray) -> np.ndarray:
    """Drop names that recur in at least half of the steady-state iterations (a cudaMalloc
    every step is allocator churn, a per-step cost, not start-up)."""
    if ctx.bd.whole_trace or not len(idx):
        return idx
    s = ctx.trace.slices
    w = window_of(s.start[idx], ctx.bd.starts, ctx.bd.ends)
    steady = (w >= 0) & ctx.ph.steady[np.maximum(w, 0)]
    keep = np.ones(len(idx), bool)
    limit = max(2, ctx.ph.n_steady / 2)
    for nid in np.unique(s.name[idx[steady]]).tolist():
        mine = steady & (s.name[idx] == nid)
        if len(np.unique(w[mine])) >= limit:
            keep &= s.name[idx] != nid
    return idx[keep]


def host_work(ctx: Ctx) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(slices of the main and helper threads sorted by index, the iteration each starts
    in (-1: none), their exclusive ns): computed once per analysis, shared by the rules
    that compare iterations' work."""
    if "host_work" not in ctx.memo:
        host, s = ctx.bd.host, ctx.trace.slices
        idx = np.flatnonzero(np.isin(s.lane, [host.lane] + list(host.helper_lanes)))
        w = window_of(s.start[idx], ctx.bd.starts, ctx.bd.ends)
        ctx.memo["host_work"] = (idx, w, self_times(ctx, idx).astype(np.float64))
    return ctx.memo["host_work"]


def grown_work(ctx: Ctx, extra_rows: np.ndarray, steady_rows: np.ndarray,
                what: str = "extra") -> list[Cause]:
    """Host work (by exclusive time per name) that the ``extra_rows`` iterations have on top
    of a steady-state one; time in no traced op (Python, I/O) as its own cause."""
    host = ctx.bd.host
    if host is None:
        return []
    s = ctx.trace.slices
    idx, w, own = host_work(ctx)
    n = len(ctx.trace.names)
    in_ex, in_st = np.isin(w, extra_rows), np.isin(w, steady_rows)
    per_ex = np.bincount(s.name[idx[in_ex]], weights=own[in_ex], minlength=n) / len(extra_rows)
    per_st = np.bincount(s.name[idx[in_st]], weights=own[in_st], minlength=n) / len(steady_rows)
    grown = per_ex - per_st
    dur = ctx.bd.durations.astype(np.float64)
    bare = (dur[extra_rows].mean() - dur[steady_rows].mean()) - float(np.maximum(grown, 0).sum())
    total = float(np.maximum(grown, 0).sum()) + max(bare, 0.0) or 1.0
    out = []
    for nid in np.argsort(-grown)[:MAX_CAUSES].tolist():
        if grown[nid] <= 0:
            break
        mine = idx[in_ex & (s.name[idx] == nid)]
        j = int(mine[np.argmax(s.dur[mine])]) if len(mine) else -1
        ev = (Evidence(f"{ctx.trace.names[nid]} ({fmt_ns(int(s.dur[j]))})", int(s.start[j]),
                       int(s.start[j] + s.dur[j]), ctx.it(int(w[np.searchsorted(idx, j)])),
                       [int(s.lane[j])]) if j >= 0 else None)
        threads = len(np.unique(s.lane[mine]))
        par = f", summed over {threads} threads" if threads > 1 else ""
        out.append(Cause(f"{ctx.trace.names[nid]}: +{fmt_ns(grown[nid])} per {what} "
                         f"iteration{par}", int(grown[nid] * len(extra_rows)), int(len(mine)),
                         float(grown[nid]) / total, ev))
    if bare > 0.05 * total:
        i = int(extra_rows[0])
        out.append(Cause(f"outside any traced op (Python, I/O such as torch.save): "
                         f"+{fmt_ns(bare)} per {what} iteration", int(bare * len(extra_rows)),
                         len(extra_rows), bare / total,
                         Evidence(f"iteration {i}", int(ctx.bd.starts[i]), int(ctx.bd.ends[i]),
                                  ctx.it(i), [host.lane])))
    out.sort(key=lambda c: -c.total_ns)
    return out[:MAX_CAUSES]


def extra_calls_share(ctx: Ctx, extra_rows: np.ndarray, steady_rows: np.ndarray) -> float:
    """Fraction of the host time the ``extra_rows`` iterations have on top of a steady one
    that is work the steady ones do not do (more calls of a name, a name they lack);
    the rest is the same calls, each slower, which points outside the program (other
    processes, CPU clock, the profiler).  Names are compared without trailing numbers
    (``ProfilerStep#4``, ``train step 4``, ``fusion.2``); 1.0 when nothing grew."""
    g = _call_growth(ctx, extra_rows, steady_rows)
    if g is None or g.grown.sum() <= 0:
        return 1.0
    return min(float(g.calls.sum()) / float(g.grown.sum()), 1.0)


#: Calls made in at least this share of the steady iterations recur: set-up work they
#: repeat is no one-off work.
RECUR_ROWS = 0.25


def recurring_calls_share(ctx: Ctx, extra_rows: np.ndarray, steady_rows: np.ndarray) -> float:
    """Fraction of the calls the ``extra_rows`` iterations make on top of a steady one (their
    time, as :func:`extra_calls_share` counts it) whose names at least :data:`RECUR_ROWS`
    of the steady iterations make too: set-up that recurs (a high-level call per few
    iterations making its input pipeline and function anew), paid again, not once.  0.0
    when no calls grew."""
    g = _call_growth(ctx, extra_rows, steady_rows)
    if g is None or g.calls.sum() <= 0:
        return 0.0
    pairs = np.unique(np.stack([g.steady_names, g.steady_rows]), axis=1)
    rows_with = np.bincount(pairs[0], minlength=len(g.calls))
    recurs = rows_with >= max(2.0, RECUR_ROWS * len(steady_rows))
    return float(g.calls[recurs].sum() / g.calls.sum())


@dataclass(frozen=True)
class CallGrowth:
    """Per name (without trailing numbers): the host time the extra rows have on top of a
    steady one (``grown``) and the part of it that is more calls (``calls``); the steady
    rows' slices' names and rows."""

    grown: np.ndarray
    calls: np.ndarray
    steady_names: np.ndarray
    steady_rows: np.ndarray


def _call_growth(ctx: Ctx, extra_rows: np.ndarray, steady_rows: np.ndarray) -> CallGrowth | None:
    """:class:`CallGrowth` of ``extra_rows`` over ``steady_rows``, measured once per
    analysis for each pair (the start-up rule reads both its shares of it)."""
    key = ("call_growth", tuple(np.asarray(extra_rows).tolist()),
           tuple(np.asarray(steady_rows).tolist()))
    return ctx.once(key, lambda: _measure_call_growth(ctx, extra_rows, steady_rows))


def _measure_call_growth(ctx: Ctx, extra_rows: np.ndarray,
                         steady_rows: np.ndarray) -> CallGrowth | None:
    host = ctx.bd.host
    if host is None or not len(extra_rows) or not len(steady_rows):
        return None
    s = ctx.trace.slices
    idx, w, own = host_work(ctx)
    base = ctx.trace.memo("name_base", lambda: name_base(ctx.trace.names))
    names, n = base[s.name[idx]], int(base.max()) + 1 if len(base) else 1
    ex, st = np.isin(w, extra_rows), np.isin(w, steady_rows)
    cnt_ex = np.bincount(names[ex], minlength=n) / len(extra_rows)
    cnt_st = np.bincount(names[st], minlength=n) / len(steady_rows)
    t_ex = np.bincount(names[ex], weights=own[ex], minlength=n) / len(extra_rows)
    t_st = np.bincount(names[st], weights=own[st], minlength=n) / len(steady_rows)
    grown = np.maximum(t_ex - t_st, 0.0)
    per_call = np.divide(t_ex, cnt_ex, out=np.zeros(n), where=cnt_ex > 0)
    calls = np.minimum(np.maximum(cnt_ex - cnt_st, 0.0) * per_call, grown)
    return CallGrowth(grown, calls, names[st], w[st])


def confirm_extras(ctx: Ctx) -> None:
    """Keep as periodic extras only iterations whose extra work recurs
    (:func:`..iterations.recurring.recurs`); the others are steady again (slower steps of
    the same work are jitter, not checkpointing).  Changes ``ctx.ph`` in place."""
    ph, host = ctx.ph, ctx.bd.host
    if not len(ph.extras) or ctx.bd.whole_trace:
        return
    regular = np.flatnonzero(ph.steady)
    lane = host.lane if host is not None else -1
    ok, why = recurs(ctx.trace, lane, ctx.bd.starts, ctx.bd.ends, ctx.bd.durations,
                     ph.extras, regular)
    if ok:
        return
    ph.steady[ph.extras] = True
    ph.extras = np.zeros(0, np.int64)
    ph.source += f"; no periodic extras: {why}"


def starts_inside(ctx: Ctx, regions: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """Per slice of ``idx``: starts inside one of the slices ``regions``."""
    s = ctx.trace.slices
    if not len(regions) or not len(idx):
        return np.zeros(len(idx), bool)
    return covered(s.start[idx], s.start[regions], s.end[regions])


#: The optimizer's own step as PyTorch records it (``Optimizer.step#AdamW.step``).
OPTIMIZER_STEP = re.compile(r"^Optimizer\.step#")


def optimizer_steps(ctx: Ctx, lane: int) -> np.ndarray:
    """The optimizer steps recorded on ``lane``."""
    s = ctx.trace.slices
    mine = ctx.trace.lane_slices(lane)
    return mine[np.isin(s.name[mine], ctx.trace.name_ids(OPTIMIZER_STEP.match))]


def slice_args(ctx: Ctx, j: int) -> dict:
    """Slice ``j``'s recorded args ({} where it has none, or they are not a mapping)."""
    k = int(ctx.trace.slices.args[j])
    args = ctx.trace.args.get(k) if k >= 0 else None
    return args if isinstance(args, dict) else {}


def input_dims(ctx: Ctx, j: int) -> list[list[int]]:
    """The shapes of a slice's recorded tensor inputs (``Input Dims``; scalars, lists and
    unrecorded inputs left out)."""
    dims = slice_args(ctx, j).get("Input Dims")
    if not isinstance(dims, list):
        return []
    return [d for d in dims if isinstance(d, list) and all(isinstance(x, int) for x in d)]


def elements(shape: list[int]) -> int:
    """Elements of a tensor of ``shape`` (1 for a scalar)."""
    return int(np.prod(shape, dtype=np.int64))


#: PyTorch's matrix products.
MATMUL = re.compile(r"^aten::(addmm|mm|bmm|baddbmm|addbmm|addmv|mv)$")


def matmul_work(dims: list[list[int]]) -> tuple[float, int] | None:
    """(FLOPs, rows) of a matmul from its inputs' shapes: the last two inputs of two or
    more dimensions whose inner dimensions agree (``addmm``'s first input is its bias);
    None where the shapes say nothing."""
    mats = [d for d in dims if len(d) >= 2]
    if len(mats) < 2 or mats[-2][-1] != mats[-1][-2]:
        return None
    a, b = mats[-2], mats[-1]
    return 2.0 * elements(a) * b[-1], int(elements(a[:-1]))


#: A framework op's call as the main thread records it: PyTorch's ``aten::select``,
#: TensorFlow's eager ``EagerLocalExecute: StridedSlice``, JAX's ``PjitFunction(squeeze)``.
_OP_CALL = re.compile(r"^(?:aten::_*(\w+)|EagerLocalExecute: _*(\w+)|PjitFunction\(_*(\w+)\))$")
#: Where a CamelCase name starts a word: before an upper-case letter that follows a
#: lower-case letter or digit, or that starts a word after an acronym (``RGBToHSV``).
_WORD_START = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")


def op_kind(name: str) -> str:
    """What a framework op does, spelt one way for PyTorch, TensorFlow and JAX: its name
    without the framework's prefix and leading underscores, CamelCase words joined by
    ``_``, in lower case (``aten::slice`` and TensorFlow's ``EagerLocalExecute: Slice``
    are ``slice``, ``StridedSlice`` is ``strided_slice``, ``GatherV2`` ``gather_v2``,
    ``RGBToHSV`` ``rgb_to_hsv``); "" for a name that is no framework op's call."""
    m = _OP_CALL.match(name)
    word = next((g for g in m.groups() if g), "") if m else ""
    return _WORD_START.sub("_", word).lower()


def op_kinds(ctx: Ctx, kinds: frozenset[str]) -> np.ndarray:
    """Ids of the names of the framework ops whose :func:`op_kind` is one of ``kinds``."""
    return ctx.trace.name_ids(lambda n: op_kind(n) in kinds)
