"""What a tf.data fix can gain on a run without an accelerator, from the threads the trace
shows: the pipeline's worker threads and the runtime's compute threads share the cores.

A fix that overlaps or parallelises the input (``prefetch``, ``num_parallel_calls``)
moves no work off the machine: the step cannot get shorter than

* the step's own part (what it does besides waiting for input);
* the work of every pipeline and compute thread spread over the usable cores (their busy
  time per step / cores, counting at any instant no more threads busy than there are
  cores: a thread beyond them waits for a core inside its event): on a CPU-only run the
  input's work already takes cores from the compute.  An iterator thread's time counts
  only while none of the pipeline's worker threads is busy: while a worker runs the
  map's function, the iterator thread that asked for the element waits for it inside its
  own event (``PrefetchProduce``, ``Iterator::Map`` span the call), which is no work;
* for a fix that adds no parallelism (a prefetch of a serial pipeline), the time the
  pipeline's threads are busy at all (their union): a serial pipeline makes one batch at
  a time;
* while the map runs Python (``py_function``), the time some thread runs it: the GIL
  lets one thread run Python at a time, so parallel calls of it add no throughput.

A fix that replaces the map's Python by tf.data ops (``tf.image``, ``tf.io``) removes
that Python: the GIL floor goes, and the work floor counts the compute threads and the
pipeline's worker threads without their time in the Python calls (waits for the GIL
included: graph ops hold no GIL) and without the iterator threads, which then only wait
on the workers.  What the ops that replace the Python cost the trace cannot show; like a
cache's estimate, this one reads the Python's work as gone.

A fix that takes the pipeline's work off the machine (a cache: later epochs only read the
elements) gains more than the step's wait for input where the pipeline's worker threads
share the cores with the runtime's compute threads: while more threads are busy than
there are cores, the compute runs slower beside them, and the cache gives it back those
cores (:func:`map_contention`), however short the wait for a prefetched batch; a serial
pipeline's work runs on its prefetch's iterator thread, which then counts as its worker.  The
worker threads inside the map's Python hold one core together there: the GIL runs one of
them at a time, and the others wait for it off the cores.

The cache's estimate reads both steps without the profiler (:func:`unprofiled_steps`).
The step's own work (all but its wait for input) carries the profiler's cost of its
per-op work (dispatch, Python, the runtime's small ops; Keras' ``TensorBoard`` callback
traces each profiled batch), which :data:`.host_estimate.TF_UNPROFILED` takes off, its
math keeping its time.  Before the fix a step keeps that cost only beyond its wait for
input: where the pipeline makes the main thread wait, work of its own done sooner only
waits longer, so the step is the pipeline's time per batch either way.  After the fix the
step is its own work without that cost and, once the pipeline's threads no longer work
beside it, without the slow-down of a core while another one works (the machine's
calibration, else an assumed factor: :func:`.input_removal.core_interference`), beside
the compute threads' share of the cores given back (:func:`map_contention`).  That
share is read as captured and the work it is taken from without the profiler: it never
takes more off that work than the compute's slowest pace beside the pipeline's threads
allows (the step after the fix is at least that work at that pace), so many pipeline
threads on few cores cannot read as a step of nothing.  A Keras
``fit`` of a small MLP on cached CSV batches runs 1.25 ms a step under the profiler's
callback and 1.01 ms without it (``benchmarks/corpus/profiler_cost.py --tf``, medians of 3
rounds), what the ratio gives for its 0.9 ms of per-op work beside about 0.35 ms of math;
with the CSV parsed again each pass, the same ``fit`` spends 1.4-2.1 ms a step on its own
work as captured.

Busy time counts a thread descheduled (with no more threads busy than cores) or waiting
for the GIL inside an event as busy, so these floors can only make the estimate smaller
than the gain: a stated, conservative reading.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...units import fmt_ns
from ...units import fmt_pct as pct
from ..intervals import measure_in, union
from ..tfdata import InputPipeline, pyfunc_ids, tf_data_lanes
from .context import Ctx
from .host_estimate import TF_UNPROFILED, pool_math
from .tf_data import pipeline_of

#: The consumer-side thread of tf.data (``IteratorGetNextOp``): its time is the step's
#: wait for input, not the pipeline's work.
_CONSUMER_LANE = "tf_data_iterator_get_next"
#: Fixes that replace the map's Python by tf.data ops (so the GIL no longer bounds it).
_DROPS_PYTHON = ("tf.data ops in parallel",)
#: Cores assumed when the trace does not say (the least a machine with a core to spare for
#: the input has): a stated assumption that keeps the estimate from promising cores the
#: machine may not have.
ASSUMED_CORES = 2


def _busy(ctx: Ctx, lanes: np.ndarray, names: np.ndarray | None = None,
          cores: float | None = None) -> tuple[float, float]:
    """(sum over ``lanes`` of each lane's busy time, busy time of their union) inside the
    steady windows, ns; only slices named ``names`` when given (top-level slices else).
    With ``cores``, the sum counts at most that many lanes busy at once: threads beyond
    the cores wait for one inside their events, and that wait is no work."""
    host, r = ctx.bd.host, ctx.rows
    s = ctx.trace.slices
    idx = _selected(ctx, lanes, names)
    ws, we = host.starts[r], host.ends[r]
    total = _at_most(_per_lane(ctx, idx), cores, ws, we)
    a, b = union(s.start[idx], s.end[idx])
    return total, float(measure_in(a, b, ws, we).sum())


def lanes_busy_ns(ctx: Ctx, idx: np.ndarray, ws: np.ndarray, we: np.ndarray) -> float:
    """Thread-time (ns) the slices ``idx`` keep their lanes busy inside the windows
    ``ws``/``we``: each lane's busy time (the union of its slices) summed over the lanes."""
    return _at_most(_per_lane(ctx, idx), None, ws, we)


def _at_most(per_lane: list, cores: float | None, ws: np.ndarray, we: np.ndarray) -> float:
    """ns inside the windows of the lanes' busy time (each a disjoint set), counting at
    most ``cores`` lanes at any instant (all of them without ``cores``): the sum over
    k = 1..cores of the time at least k lanes are busy, the last level weighted by the
    fraction of a core left."""
    if cores is None:
        return sum(float(measure_in(a, b, ws, we).sum()) for a, b in per_lane)
    if not per_lane:
        return 0.0
    x, level = _levels(per_lane)
    total, k = 0.0, 1
    while k - 1 < cores:
        at = level[:-1] >= k
        a, b = union(x[:-1][at], x[1:][at])
        total += min(cores - (k - 1), 1.0) * float(measure_in(a, b, ws, we).sum())
        k += 1
    return total


def usable_cores(ctx: Ctx) -> tuple[float, str]:
    """(usable cores, where that comes from)."""
    cores, other = ctx.facts.get("cpu_cores"), ctx.facts.get("cpu_other")
    if not cores.known:
        return float(ASSUMED_CORES), (f"the trace does not say how many cores the machine has: "
                                      f"{ASSUMED_CORES} assumed, nothing else running")
    busy = float(other.value) if other.known else 0.0
    held = f", {busy:.1f} held by other processes" if other.known else ""
    return max(float(cores.value) - busy, 1.0), f"{int(cores.value)} cores ({cores.proof}{held})"


def pipeline_floors(ctx: Ctx, p: InputPipeline) -> dict[str, float] | None:
    """Per steady time: ``work`` (pipeline and compute threads' busy time over the usable
    cores), ``serial`` (pipeline threads busy at all), ``python`` (some thread in the
    map's Python); None without pipeline worker threads in the trace."""
    host, r = ctx.bd.host, ctx.rows
    if host is None or not len(r) or not p.worker_threads:
        return None
    wall = float((host.ends[r] - host.starts[r]).sum()) or 1.0
    names = ctx.trace.lanes.name
    helpers = np.asarray([h for h in host.helper_lanes if not names[h].startswith(_CONSUMER_LANE)],
                         np.int64)
    pool = tf_data_lanes(ctx.trace, workers_only=True)
    cores, _ = usable_cores(ctx)
    work = _thread_work(ctx, helpers, pool, cores)
    _, serial = _busy(ctx, pool)
    py = pyfunc_ids(ctx.trace)
    _, python = _busy(ctx, tf_data_lanes(ctx.trace), py) if len(py) else (0.0, 0.0)
    return {"work": work / cores / wall, "serial": serial / wall, "python": python / wall,
            "graph": _graph_work(ctx, helpers, pool, py, cores) / cores / wall}


def _thread_work(ctx: Ctx, helpers: np.ndarray, pool: np.ndarray, cores: float) -> float:
    """ns the compute threads, the pipeline's worker threads and its iterator threads work
    inside the steady windows, at most ``cores`` of them at once; an iterator thread's
    busy time only where no worker thread is busy (it waits for them meanwhile)."""
    host, r = ctx.bd.host, ctx.rows
    s = ctx.trace.slices
    iters = np.setdiff1d(np.intersect1d(helpers, tf_data_lanes(ctx.trace)), pool)
    others = np.setdiff1d(np.union1d(helpers, pool), iters)
    workers = _selected(ctx, pool)
    wa, wb = union(s.start[workers], s.end[workers])
    per = _per_lane(ctx, _selected(ctx, others)) + [
        _outside(a, b, wa, wb) for a, b in _per_lane(ctx, _selected(ctx, iters))]
    return _at_most(per, cores, host.starts[r], host.ends[r])


def _outside(a: np.ndarray, b: np.ndarray, wa: np.ndarray, wb: np.ndarray
             ) -> tuple[np.ndarray, np.ndarray]:
    """The parts of the disjoint sorted intervals ``a``/``b`` outside the disjoint sorted
    intervals ``wa``/``wb``."""
    out_a, out_b = [], []
    for x, y in zip(a.tolist(), b.tolist()):
        i = int(np.searchsorted(wb, x, side="right"))
        while i < len(wa) and wa[i] < y:
            if wa[i] > x:
                out_a.append(x)
                out_b.append(int(wa[i]))
            x = max(x, int(wb[i]))
            i += 1
        if x < y:
            out_a.append(x)
            out_b.append(y)
    return np.asarray(out_a, np.int64), np.asarray(out_b, np.int64)


def _graph_work(ctx: Ctx, helpers: np.ndarray, pool: np.ndarray, py: np.ndarray,
                cores: float) -> float:
    """ns the compute threads and the pipeline's worker threads are busy outside the map's
    Python: what stays once tf.data ops replace it.  The iterator threads are left out:
    without the Python they wait on the workers for the ops' time, no work of their own."""
    compute = np.setdiff1d(helpers, tf_data_lanes(ctx.trace))
    lanes = np.union1d(compute, pool)
    work, _ = _busy(ctx, lanes, cores=cores)
    in_python, _ = _busy(ctx, pool, py) if len(py) else (0.0, 0.0)
    return max(work - in_python, 0.0)


def tf_pipeline_speedup(ctx: Ctx, share: float, fix) -> tuple[float, str, float] | None:
    """(speed-up, why, confidence factor) of an overlapping / parallelising tf.data fix
    from the floors above; None when the trace has no pipeline threads to read."""
    host = ctx.bd.host
    p = pipeline_of(ctx, host)
    floors = pipeline_floors(ctx, p) if p is not None and not ctx.bd.devices else None
    if floors is None:
        return None
    drops = p.python and fix.name in _DROPS_PYTHON
    steps = unprofiled_steps(ctx)  # the step's own part and the step before, unprofiled
    saved = (steps.captured_own - steps.own) / max(steps.wall, 1.0)
    bounds = {"the step's own part without the profiler": max(1.0 - share - saved, 0.0),
              "the pipeline's and the compute's work over the cores": floors["work"]}
    if drops:  # the map's Python goes, and with it the threads' wait for the GIL
        del bounds["the pipeline's and the compute's work over the cores"]
        bounds["the pipeline's and the compute's work over the cores, less the map's Python "
               "(its threads' time in it, GIL waits included)"] = floors["graph"]
    if fix.gain == "core" and not p.parallel:
        bounds["the serial pipeline's busy time (one batch at a time)"] = floors["serial"]
    if p.python and not drops:
        bounds["the map's Python under the GIL (one thread at a time)"] = floors["python"]
    what, floor = max(bounds.items(), key=lambda kv: kv[1])
    before = steps.before / max(steps.wall, 1.0)
    sp = max(before / max(floor, 1e-6), 1.0)
    _, where = usable_cores(ctx)
    told = "; ".join(f"{k} {pct(v)}" for k, v in bounds.items())
    return sp, (f"the step cannot get shorter than {what} ({pct(floor)} of it; {told}; "
                f"{where}); the step before the fix without the profiler {pct(before)} of "
                f"it ({steps.sentence()})"), 0.9


def _levels(per_lane: list) -> tuple[np.ndarray, np.ndarray]:
    """(instants, how many of the lanes are busy from each instant to the next) of the
    lanes' busy time (each a disjoint set)."""
    if not per_lane:
        return np.zeros(1, np.int64), np.zeros(1)
    x = np.concatenate([np.concatenate([a, b]) for a, b in per_lane])
    step = np.concatenate([np.concatenate([np.ones(len(a)), -np.ones(len(b))])
                           for a, b in per_lane])
    order = np.argsort(x, kind="stable")
    return x[order], np.cumsum(step[order])


def map_contention(ctx: Ctx) -> tuple[float, float, float] | None:
    """(share of the steady step the compute threads lose to the pipeline's worker threads
    on the cores, those workers' busy cores per step, the slowest pace the compute kept
    beside them) on a run without an accelerator; None without both kinds of thread in
    the trace.

    Where ``n`` threads are busy on ``c`` cores, ``n_c`` of them the compute's, the compute
    progresses at ``n_c * min(1, c / n)`` cores against ``min(n_c, c)`` without the
    workers beside it: each instant the compute is busy lasts that ratio of itself once
    the workers' work is gone (a cache: later epochs only read the elements); the least
    of those ratios is the slowest pace.  Threads share the cores evenly (the scheduler's
    fair share); the workers inside the map's Python count one thread together
    (:func:`_pool_levels`).  Once per analysis (the input finding grades by it, the
    cache's estimate counts it)."""
    return ctx.once("map_contention", lambda: _contention(ctx))


def _contention(ctx: Ctx) -> tuple[float, float, float] | None:
    host, r = ctx.bd.host, ctx.rows
    if host is None or not len(r) or ctx.bd.devices:
        return None
    names = ctx.trace.lanes.name
    pool = _pipeline_workers(ctx)
    compute = np.setdiff1d(np.asarray(host.helper_lanes, np.int64), tf_data_lanes(ctx.trace))
    compute = np.asarray([c for c in compute.tolist() if not names[c].startswith(_CONSUMER_LANE)],
                         np.int64)
    if not len(pool) or not len(compute):
        return None
    cores, _ = usable_cores(ctx)
    xs, nc = _levels(_per_lane(ctx, _selected(ctx, compute)))
    xp, npool = _pool_levels(ctx, pool)
    x = np.union1d(xs, xp)
    n_c, n_p = _level_at(xs, nc, x), _level_at(xp, npool, x)
    n = n_c + n_p
    rate = np.where(n_c > 0, n_c * np.minimum(1.0, cores / np.maximum(n, 1.0))
                    / np.maximum(np.minimum(n_c, cores), 1.0), 1.0)
    ws, we = host.starts[r], host.ends[r]
    wall = float((we - ws).sum()) or 1.0
    # the step's wait for input goes with the fix as a whole: what the compute lost
    # meanwhile is not counted twice
    s = ctx.trace.slices
    dl = host.role_slices.get("data_loading", np.zeros(0, np.int64))
    wa, wb = union(s.start[dl], s.end[dl])
    seg = (x[1:] - x[:-1]).astype(np.float64)
    seg -= measure_in(wa, wb, x[:-1], x[1:])
    inside = measure_in(ws, we, x[:-1], x[1:]) / np.maximum(x[1:] - x[:-1], 1)
    lost = float((seg * inside * (1.0 - rate[:-1])).sum())
    crowded = (n_c[:-1] > 0) & (seg * inside > 0)
    slowest = float(rate[:-1][crowded].min()) if crowded.any() else 1.0
    busy, _ = _busy(ctx, pool)
    return lost / wall, busy / wall, slowest


def _pipeline_workers(ctx: Ctx) -> np.ndarray:
    """Lanes of the threads that do the pipeline's work: its private thread pool's, or,
    where it has none (a serial pipeline: no parallel ``map``), its iterator threads
    (``tf_data_iterator_resource``: the prefetch's thread runs every stage below it) but
    the consumer's, whose time is the step's wait for input."""
    pool = tf_data_lanes(ctx.trace, workers_only=True)
    if len(pool):
        return pool
    names = ctx.trace.lanes.name
    return np.asarray([i for i in tf_data_lanes(ctx.trace).tolist()
                       if not names[i].startswith(_CONSUMER_LANE)], np.int64)


def _pool_levels(ctx: Ctx, pool: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(instants, threads of the pipeline's workers that hold a core from each instant to
    the next): each busy worker counts one, but those inside the map's Python
    (``py_function``) count one together, since the GIL runs one of them at a time and the
    others wait for it off the cores (their wait is inside the event, not work)."""
    busy = _levels(_per_lane(ctx, _selected(ctx, pool)))
    py = pyfunc_ids(ctx.trace)
    in_python = _per_lane(ctx, _selected(ctx, pool, py)) if len(py) else []
    if not in_python:
        return busy
    xq, nq = _levels(in_python)
    x = np.union1d(busy[0], xq)
    n_busy, n_py = _level_at(*busy, x), _level_at(xq, nq, x)
    return x, n_busy - n_py + np.minimum(n_py, 1.0)


def _level_at(xs: np.ndarray, level: np.ndarray, x: np.ndarray) -> np.ndarray:
    """The level of ``(xs, level)`` (from :func:`_levels`) at each instant of ``x``: 0
    before its first instant."""
    return level[np.clip(np.searchsorted(xs, x, side="right") - 1, 0, None)] * (x >= xs[0])


def _selected(ctx: Ctx, lanes: np.ndarray, names: np.ndarray | None = None) -> np.ndarray:
    """The lanes' slices named ``names`` (top-level slices without ``names``)."""
    s = ctx.trace.slices
    sel = np.isin(s.lane, lanes) & (s.dur > 0)
    sel &= np.isin(s.name, names) if names is not None else s.depth == 0
    return np.flatnonzero(sel)


def _per_lane(ctx: Ctx, idx: np.ndarray) -> list:
    """Each lane's busy time: the union of its slices among ``idx``."""
    s = ctx.trace.slices
    return [union(s.start[m], s.end[m]) for m in
            (idx[s.lane[idx] == lane] for lane in np.unique(s.lane[idx]).tolist())]


def tf_removal_gain(ctx: Ctx, share: float,
                    slow: tuple[float, str, float]) -> tuple[float, str, float] | None:
    """(speed-up, why, confidence factor) of taking a tf.data pipeline's work off the
    machine (a cache: later epochs only read the elements) on a run without an
    accelerator: the wait for input goes, and with the pipeline's worker threads the
    cores they took from the compute (:func:`map_contention`); None where the trace
    shows no such threads sharing the cores with the compute.

    Both steps are read without the profiler (:func:`unprofiled_steps`): the step before
    the fix keeps the profiler's cost of its own work only where the step's wait for input
    could not hide it, the step after it is its own work without that cost and without
    the pipeline's threads working beside it (``slow``: how many times slower the main
    thread's work runs while another core works, why, its confidence factor)."""
    c = map_contention(ctx)
    if c is None:
        return None
    lost, busy, slowest = c
    steps = unprofiled_steps(ctx)
    factor, slow_why, conf = slow
    n, k, pass_ns = _pass_counts(ctx)
    before = steps.before * (n - k) + pass_ns  # the passes' rows: their wait hides it all
    own = steps.math + (steps.own - steps.math) / factor
    # the cores given back make the compute at most as much faster as it was slowed at
    # its most crowded: the time it lost, read as captured, never takes more than that
    # off the unprofiled work
    after = max(own - lost * steps.wall, own * slowest) * n
    passes, steady_part = _passes(ctx, share)
    share, lost = share * steady_part + passes[0], lost * steady_part
    _, where = usable_cores(ctx)
    sp = max(before / after if after > 0 else 1.0, 1.0 / max(1.0 - share, 1e-6))
    return sp, (f"the work is done once, not every step: the wait for input goes "
                f"({pct(share)} of the step{passes[1]}), and with it the pipeline's threads, "
                f"busy {busy:.1f} cores on average, which took {pct(lost)} of the step from "
                f"the compute's threads on the shared cores ({where}; threads share the "
                f"cores evenly); {steps.sentence()}; with the pipeline's threads gone from beside "
                f"it, that per-op work runs faster: {slow_why}"), 0.9 * conf


#: The start of a pipeline's iterator: made once per ``iter()`` over the whole dataset.
_ROOT_ITERATOR = ("EagerLocalExecute: MakeIterator", "MakeIterator::Root")


def pass_rows(ctx: Ctx) -> np.ndarray:
    """Rows outside the steady state in which a repeated, uncached pipeline starts a new
    pass over its data: its source's iterator is made again beneath the repeat (events
    ``MakeIterator::<dataset>``, with no iterator made for the pipeline's root) and the
    main thread waits for input most of the row.  Such a row recurs once per pass (every
    records-per-pass / batch steps), not once per run: it is no warm-up, and a cache
    that serves later passes removes it."""
    return ctx.once("pass_rows", lambda: _pass_rows(ctx))


def _pass_rows(ctx: Ctx) -> np.ndarray:
    host = ctx.bd.host
    p = pipeline_of(ctx, host) if host is not None and not ctx.bd.devices else None
    if p is None or p.cache or not any("Repeat" in st.kind for st in p.stages.values()):
        return np.zeros(0, np.int64)
    s, trace = ctx.trace.slices, ctx.trace
    made = np.flatnonzero(np.isin(s.name, trace.name_ids(
        lambda n: n.startswith("MakeIterator::"))))
    roots = np.flatnonzero(np.isin(s.name, trace.name_ids(
        lambda n: n.startswith(_ROOT_ITERATOR))))
    wait = host.column("data_loading")
    walls = host.ends - host.starts
    rows = [int(i) for i in np.union1d(ctx.ph.warmup, ctx.ph.extras).tolist()
            if _inside(s.start[made], host, i) and not _inside(s.start[roots], host, i)
            and wait[i] > 0.5 * walls[i]]
    return np.asarray(rows, np.int64)


def _inside(t_ns: np.ndarray, host, i: int) -> bool:
    """Whether any of the instants ``t_ns`` lies in row ``i`` of ``host``."""
    return bool(((t_ns >= host.starts[i]) & (t_ns < host.ends[i])).any())


def _pass_counts(ctx: Ctx) -> tuple[int, int, float]:
    """(steps one pass lasts at least, rows of them that start a new pass, ns those rows
    take): the steps the capture holds, each new pass over the data (:func:`pass_rows`)
    counted once (the next one begins after them); (steady rows, 0, 0.0) without one."""
    rows, host, r = pass_rows(ctx), ctx.bd.host, ctx.rows
    if not len(rows) or not len(r):
        return len(r), 0, 0.0
    n = max(len(ctx.bd.durations), len(rows) + len(r))
    return n, len(rows), float((host.ends[rows] - host.starts[rows]).sum())


def _passes(ctx: Ctx, share: float) -> tuple[tuple[float, str], float]:
    """((the passes' wait for input as a share of the steps of one pass, its words), the
    steady steps' part of those steps): each new pass over the data (:func:`pass_rows`)
    counted once, spread over the steps the capture holds (a pass lasts that long at
    least: the next one begins after them), the others at the steady steps' mean."""
    rows = pass_rows(ctx)
    host, r = ctx.bd.host, ctx.rows
    n, k, pass_ns = _pass_counts(ctx)
    if not k:
        return (0.0, ""), 1.0
    steady = float((host.ends[r] - host.starts[r]).sum()) / len(r) * (n - k)
    total = steady + pass_ns or 1.0
    waits = float(host.column("data_loading")[rows].sum())
    words = (f", with {k} new pass{'es' if k > 1 else ''} over the data "
             f"(the repeated source's iterator made again, {fmt_ns(waits)} of waiting) "
             f"spread over the {n} steps captured, not one-off warm-up")
    return (waits / total, words), steady / total


@dataclass(frozen=True)
class UnprofiledSteps:
    """The steady steps' means (ns): ``wall`` as captured; ``before`` without the
    profiler's cost of the step's own work where the step's wait for input could not hide
    it (a pipeline that makes the main thread wait sets the step: work done sooner only
    waits longer); ``own`` the step's own work (all but the wait) without that cost; and,
    as captured, ``captured_own`` that work and ``math`` the compute threads' math in it."""

    wall: float
    before: float
    own: float
    captured_own: float
    math: float

    def sentence(self) -> str:
        return (f"without the profiler the step's own work is its math as captured "
                f"({fmt_ns(self.math)}) and its per-op work (dispatch, Python, the "
                f"runtime's small ops) at {TF_UNPROFILED:.0%} of its captured time: "
                f"{fmt_ns(self.own)} a step against {fmt_ns(self.captured_own)} captured")


def unprofiled_steps(ctx: Ctx) -> UnprofiledSteps:
    """The steady steps without the profiler's cost of their own work: their math (the
    runtime pool threads' kernels of real size, :func:`.host_estimate.pool_math`) keeps its
    time, their per-op work takes :data:`.host_estimate.TF_UNPROFILED` of its captured
    time, and a step keeps what that saves only beyond its wait for input."""
    host, r, s = ctx.bd.host, ctx.rows, ctx.trace.slices
    ws, we = host.starts[r], host.ends[r]
    wall = (we - ws).astype(np.float64)
    wait = host.column("data_loading")[r].astype(np.float64)
    own = np.maximum(wall - wait, 0.0)
    dl = host.role_slices.get("data_loading", np.zeros(0, np.int64))
    math = np.minimum(_math_beside(ctx, host, ws, we, *union(s.start[dl], s.end[dl])), own)
    saved = (own - math) * (1.0 - TF_UNPROFILED)
    before = wall - np.maximum(saved - wait, 0.0)
    return UnprofiledSteps(float(wall.mean()), float(before.mean()),
                           float((own - saved).mean()), float(own.mean()), float(math.mean()))


def _math_beside(ctx: Ctx, host, ws: np.ndarray, we: np.ndarray, wa: np.ndarray,
                 wb: np.ndarray) -> np.ndarray:
    """ns per window of the runtime pool threads' math outside the main thread's wait for
    input (the intervals ``wa``/``wb``)."""
    pool = pool_math(ctx, host)
    if not len(pool):
        return np.zeros(len(ws))
    s = ctx.trace.slices
    ma, mb = union(s.start[pool], s.end[pool])
    both = union(np.concatenate([ma, wa]), np.concatenate([mb, wb]))
    in_math = measure_in(ma, mb, ws, we).astype(np.float64)
    overlap = in_math + measure_in(wa, wb, ws, we) - measure_in(*both, ws, we)
    return np.maximum(in_math - overlap, 0.0)
