"""What taking the loading out of the step gains (a cache of pre-processed data: the step
only reads ready tensors), by where the loading ran.

* **In the main process** (a single-process DataLoader, a Python generator, a sampler
  drawing the next indices after the batch arrived): the loading and the step's own work
  add up in the trace, the profiler's cost per op lies on both, and the step after the
  fix is its own work: Amdahl on the captured shares.
* **In DataLoader worker processes that pace the run** (the loading is at least half of
  the step, and most of it the main thread waits for a batch before it arrives): the
  workers are not profiled, so the step lasts their time per batch with or without the
  profiler, and they are busy all through it (a loader that keeps a queue of requests
  and still makes the main thread wait never catches up).  The cache takes them off the
  machine, and with the wait goes what they did to the step's own work:

  - its share of the cores: the busy workers take the main process's core for whole
    scheduler slices in some steps (a step's own work then takes twice or three times
    its median), so the step's own work is read at its median over the steady steps;
  - the profiler's cost of that work, which the wait hid: without the profiler it is its
    math as captured and its per-op work at the recorder's measured ratio
    (:class:`.host_estimate.HostFix`), the step before the fix still the workers' time
    per batch;
  - the slow-down of a core while another one works: the machine's calibration, else
    :data:`DEFAULT_INTERFERENCE` assumed;
  - the time away from it: the main thread waited most of each step and the step's code
    and data went cold meanwhile; after the fix it is away only while it reads the batch,
    as long as it now receives one from a worker at the quickest (the part of a fetch
    after the batch arrives), the warming every host-side fix's estimate counts.

  Adding workers (:mod:`.loader_plan`) keeps the workers beside the step and the main
  thread waiting, so none of this applies to that fix.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ...units import fmt_ns
from ...units import fmt_pct as pct
from ..intervals import union
from .causes import nested_in
from .context import Ctx, amdahl
from .host_estimate import HostFix, rest_math
from .input_estimate import tf_removal_gain
from .recorder_cost import tracer_per_event_ns

#: Compute on one core runs this much slower while another core is busy, when the trace
#: carries no measured factor (run fact ``cpu_interf``): separate cores still share the
#: last-level cache and memory bandwidth, SMT siblings and many VMs' vCPUs share a core.
#: A stated assumption (the order of what ``recorder.calibrate`` measures on machines
#: with shared caches), not a figure fitted to any run.
DEFAULT_INTERFERENCE = 1.15
#: The workers pace the run when the loading is at least this share of the step and the
#: wait before their batch arrives at least this share of the loading: the main thread
#: waits for them most of the step, so they are behind all through it.
PACED = 0.5
#: The workers are behind when the steady steps wait for their batch at least this share of
#: the step (highly input-bound on the wait alone).
BEHIND = 0.2
AMDAHL_WHY = "no extra core: the work is done once, not every step, if the data can be " \
             "prepared ahead"


def _in_process(ctx: Ctx, host, share: float) -> tuple[float, str, float]:
    """Amdahl on the loading share ``share`` of a loading run on the loop's thread.  Where
    JAX's Python tracer records the thread (:func:`.recorder_cost.tracer_per_event_ns`),
    its cost per event lies where the events are, not evenly: a batch made in Python
    records thousands of frames a step beside the compiled step's few, so both sides are
    read without it (their captured time less the cost of the events each records; a
    ``share`` of part of the loading with its part of the loading's events)."""
    per_event = tracer_per_event_ns(ctx, host.lane)
    r, s = ctx.rows, ctx.trace.slices
    dl = host.role_slices.get("data_loading", np.zeros(0, np.int64))
    if per_event is None or not len(r) or not len(dl):
        return amdahl(share), AMDAHL_WHY, 0.9
    st = s.start[ctx.trace.lane_slices(host.lane)]
    steady = ctx.in_steady(st, host.starts, host.ends)
    a, b = union(s.start[dl], s.end[dl])
    k = np.searchsorted(a, st, side="right") - 1
    loading_events = float((steady & (k >= 0) & (st < b[np.maximum(k, 0)])).sum())
    wall = float((host.ends[r] - host.starts[r]).sum())
    loading = float(host.column("data_loading")[r].sum())
    bare_wall = wall - float(steady.sum()) * per_event
    # the part ``share`` is of the loading keeps its part of the loading's own events
    bare = share * wall * max(loading - loading_events * per_event, 0.0) / max(loading, 1.0)
    if bare_wall <= 0 or bare >= bare_wall:
        return amdahl(share), AMDAHL_WHY, 0.9
    return amdahl(bare / bare_wall), (
        f"{AMDAHL_WHY}; the loading {pct(bare / bare_wall)} of the step without the Python "
        f"tracer's {per_event / 1e3:.2f} µs for each of the events it records "
        f"({loading_events / len(r):,.0f} a step in the loading, "
        f"{(float(steady.sum()) - loading_events) / len(r):,.0f} in the rest)"), 0.9


def core_interference(ctx: Ctx) -> tuple[float, str, float]:
    """(how many times slower the main thread's work runs while another core works, why,
    its confidence factor): the calibration's factor, else :data:`DEFAULT_INTERFERENCE`."""
    f = ctx.facts.get("cpu_interf")
    if f.known:  # under 1 is the calibration's noise: a busy core never speeds another up
        slow = max(float(f.value), 1.0)
        return slow, (f"the main thread's work {slow:.2f}x slower while another core works "
                      f"({f.proof})"), 1.0
    return DEFAULT_INTERFERENCE, (f"the main thread's work assumed {DEFAULT_INTERFERENCE:.2f}x "
                                  f"slower while another core works (not measured on this "
                                  f"machine)"), 0.9


@dataclass(frozen=True)
class WorkerWait:
    """Shares of the steady step: ``wait`` before each fetch's first batch arrives from a
    worker, ``receipt`` the main process receiving a batch per fetch, at the quickest
    (a fetch's time from its batch's arrival to its end: longer where the busy workers
    keep the main process off the cores, or where it also takes a batch that arrived out
    of order, kept for a later step)."""

    wait: float
    receipt: float


def worker_wait(ctx: Ctx, host, fetches: np.ndarray) -> WorkerWait:
    """Where the steady fetches' time goes: a fetch's first nested event is a batch
    arriving (its tensors rebuilt from shared memory), before it the main thread waits."""
    r, s = ctx.rows, ctx.trace.slices
    wall = float((host.ends[r] - host.starts[r]).sum()) or 1.0
    if not len(fetches):
        return WorkerWait(0.0, 0.0)
    inner = nested_in(ctx, fetches)
    first = np.asarray(s.end[fetches], np.int64).copy()
    if len(inner):
        k = np.searchsorted(s.start[fetches], s.start[inner], side="right") - 1
        np.minimum.at(first, k, s.start[inner])
    wait = float((first - s.start[fetches]).sum())
    came = first < s.end[fetches]
    receipt = float((s.end[fetches] - first)[came].min()) * len(fetches) if came.any() else 0.0
    return WorkerWait(wait / wall, receipt / wall)


def workers_behind(ctx: Ctx) -> bool:
    """Whether the steady steps wait for the DataLoader workers' batch at least
    :data:`BEHIND` of the step: the workers never get ahead, no prefetch queue fills, so a
    first step's longer wait is no one-off filling of it (the workers are as slow then)."""
    host = ctx.bd.host
    if host is None or not len(ctx.rows):
        return False
    fetches = _fetches(ctx, host)
    return bool(len(fetches)) and worker_wait(ctx, host, fetches).wait >= BEHIND


def removal_gain(ctx: Ctx, host, share: float) -> tuple[float, str, float]:
    """(speed-up, why, confidence factor) of taking the loading share ``share`` out of the
    step (see the module docstring)."""
    if (tf := tf_removal_gain(ctx, share, core_interference(ctx))) is not None:
        return tf
    fetches = _fetches(ctx, host)
    if ctx.facts.value("dataloader") != "workers" or not len(fetches):
        return _in_process(ctx, host, share)
    w = worker_wait(ctx, host, fetches)
    if share < PACED or w.wait < PACED * share:
        return _in_process(ctx, host, share)
    r, s = ctx.rows, ctx.trace.slices
    rows = (host.ends[r] - host.starts[r]).astype(np.float64)
    wall = float(rows.sum()) or 1.0
    loading = host.column("data_loading")[r].astype(np.float64)
    kept = max(float(loading.sum()) / wall - share, 0.0)  # what the fix leaves (restarts)
    rest = min(float(np.median(rows - loading)) * len(r) / wall, 1.0 - share - kept)
    a, b = union(s.start[fetches], s.end[fetches])
    math = rest_math(ctx, host, host.starts[r], host.ends[r], a, b) / wall
    fix = HostFix(1.0 - rest, math, replacement=w.receipt + kept,
                  what="the wait for the workers", step_ns=ctx.call_ns(wall, len(r)))
    # the step before the fix is the workers' time per batch: without the profiler the
    # wait grows by what the profiler cost the step's own work
    m, ops = fix.parts()
    fix = replace(fix, unprofiled=(1.0 - m - ops) / fix.removed)
    slow, slow_why, conf = core_interference(ctx)
    _, after = fix.times()
    # the receipt, too, was measured beside the busy workers
    after = (after - kept) / slow + kept
    sp = max(1.0 / max(after, 1e-6), amdahl(share))
    was, _ = fix.away_ns()
    return sp, (f"the workers, which pace the run (the main thread waits for their batch "
                f"before it arrives {pct(w.wait)} of the step), go with the loading: the step "
                f"is their time per batch with or without the profiler, and after the fix "
                f"its own work at its median over the steady steps ({pct(rest)} of the "
                f"step; busy workers take its core in some), without the profiler (the math "
                f"ops' own time as captured, the per-op work {fix.per_op:.0%}), without the "
                f"workers beside it ({slow_why}) and warmer without the {fmt_ns(was)} a step "
                f"it waited (per-op work up to {fix.cold:g}x slower after 3 ms or more away, "
                f"as measured on a shared 2-core machine), plus reading each batch as long "
                f"as the main process receives one now at the quickest ({pct(w.receipt)} of "
                f"the step): {pct(after)} of the captured step"), 0.9 * conf


def _fetches(ctx: Ctx, host) -> np.ndarray:
    """The main thread's steady loader fetches (its data-loading slices)."""
    s = ctx.trace.slices
    dl = host.role_slices.get("data_loading", np.zeros(0, np.int64))
    return dl[ctx.in_steady(s.start[dl], host.starts, host.ends)] if len(dl) else dl
