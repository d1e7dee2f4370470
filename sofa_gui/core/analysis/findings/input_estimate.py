"""What a tf.data fix can gain on a run without an accelerator, from the threads the trace
shows: the pipeline's worker threads and the runtime's compute threads share the cores.

A fix that overlaps or parallelises the input (``prefetch``, ``num_parallel_calls``)
moves no work off the machine: the step cannot get shorter than

* the step's own part (what it does besides waiting for input);
* the work of every pipeline and compute thread spread over the usable cores (their busy
  time per step / cores, counting at any instant no more threads busy than there are
  cores: a thread beyond them waits for a core inside its event): on a CPU-only run the
  input's work already takes cores from the compute;
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

Busy time counts a thread descheduled (with no more threads busy than cores) or waiting
for the GIL inside an event as busy, so these floors can only make the estimate smaller
than the gain: a stated, conservative reading.
"""

from __future__ import annotations

import numpy as np

from ...units import fmt_pct as pct
from ..intervals import measure_in, union
from ..tfdata import InputPipeline, pyfunc_ids, tf_data_lanes
from .context import Ctx
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
    sel = np.isin(s.lane, lanes) & (s.dur > 0)
    sel &= np.isin(s.name, names) if names is not None else s.depth == 0
    idx = np.flatnonzero(sel)
    ws, we = host.starts[r], host.ends[r]
    per_lane = [union(s.start[m], s.end[m]) for m in
                (idx[s.lane[idx] == lane] for lane in np.unique(s.lane[idx]).tolist())]
    total = _at_most(per_lane, cores, ws, we)
    a, b = union(s.start[idx], s.end[idx])
    return total, float(measure_in(a, b, ws, we).sum())


def _at_most(per_lane: list, cores: float | None, ws: np.ndarray, we: np.ndarray) -> float:
    """ns inside the windows of the lanes' busy time (each a disjoint set), counting at
    most ``cores`` lanes at any instant (all of them without ``cores``): the sum over
    k = 1..cores of the time at least k lanes are busy, the last level weighted by the
    fraction of a core left."""
    if cores is None:
        return sum(float(measure_in(a, b, ws, we).sum()) for a, b in per_lane)
    if not per_lane:
        return 0.0
    x = np.concatenate([np.concatenate([a, b]) for a, b in per_lane])
    step = np.concatenate([np.concatenate([np.ones(len(a)), -np.ones(len(b))])
                           for a, b in per_lane])
    order = np.argsort(x, kind="stable")
    x, level = x[order], np.cumsum(step[order])
    total, k = 0.0, 1
    while k - 1 < cores:
        at = level[:-1] >= k
        a, b = union(x[:-1][at], x[1:][at])
        total += min(cores - (k - 1), 1.0) * float(measure_in(a, b, ws, we).sum())
        k += 1
    return total


def _cores(ctx: Ctx) -> tuple[float, str]:
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
    lanes = np.union1d(helpers, pool)
    cores, _ = _cores(ctx)
    work, _ = _busy(ctx, lanes, cores=cores)
    _, serial = _busy(ctx, pool)
    py = pyfunc_ids(ctx.trace)
    _, python = _busy(ctx, tf_data_lanes(ctx.trace), py) if len(py) else (0.0, 0.0)
    return {"work": work / cores / wall, "serial": serial / wall, "python": python / wall,
            "graph": _graph_work(ctx, helpers, pool, py, cores) / cores / wall}


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
    bounds = {"the step's own part": 1.0 - share,
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
    sp = max(1.0 / max(floor, 1e-6), 1.0)
    _, where = _cores(ctx)
    told = "; ".join(f"{k} {pct(v)}" for k, v in bounds.items())
    return sp, (f"the step cannot get shorter than {what} ({pct(floor)} of it; {told}; "
                f"{where})"), 0.9
