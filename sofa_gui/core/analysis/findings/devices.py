"""What several device-side rules measure alike: the breakdown categories each family reads,
device work and busy time, runtime threads of XLA/PjRt runs, call sites, one-off calls in
host-bound gaps."""

from __future__ import annotations

import re

import numpy as np

from ...trace import Kind
from ..device_side import DeviceBreakdown
from ..intervals import measure_in, union
from .context import (
    Ctx,
)
from .work import one_off_calls

#: The breakdown categories each family measures (partition ``device_time``).
INPUT_CATEGORIES = ("idle_input",)
COPY_CATEGORIES = ("memcpy_h2d", "memcpy_d2h", "idle_copy")
LAUNCH_CATEGORIES = ("idle_launch", "idle_host")
SYNC_CATEGORIES = ("idle_sync",)
COMM_CATEGORIES = ("communication",)
TF_PROFILER = "TensorFlow profiler"



DEVICE_WORK = [int(Kind.KERNEL), int(Kind.MEMCPY), int(Kind.MEMSET), int(Kind.COMMUNICATION)]


def device_work(ctx: Ctx, lanes) -> np.ndarray:
    """Slices of ``lanes`` that keep a device busy (kernels, copies, sets, collectives),
    found once per trace and lane set."""
    cache = ctx.trace.memo("device_work", dict)
    key = tuple(sorted({int(x) for x in lanes}))
    if key not in cache:
        s = ctx.trace.slices
        cache[key] = np.flatnonzero(np.isin(s.lane, key) & np.isin(s.kind, DEVICE_WORK))
    return cache[key]


def device_busy(ctx: Ctx, lanes) -> tuple[np.ndarray, np.ndarray]:
    """Union of the time :func:`device_work` on ``lanes`` keeps a device busy, once per
    trace and lane set."""
    cache = ctx.trace.memo("device_busy", dict)
    key = tuple(sorted({int(x) for x in lanes}))
    if key not in cache:
        s = ctx.trace.slices
        busy = device_work(ctx, key)
        cache[key] = union(s.start[busy], s.end[busy])
    return cache[key]


def call_site(ctx: Ctx, j: int) -> str:
    """"cudaMemcpyAsync in ## sparse_data_dist ##"."""
    return call_sites(ctx, np.array([j]))[0]


def call_sites(ctx: Ctx, idx: np.ndarray) -> list[str]:
    """:func:`call_site` for many slices at once (one annotation lookup per lane)."""
    from .causes import enclosing_annotations
    idx = np.asarray(idx, np.int64)
    names = [ctx.trace.name_of(j) for j in idx.tolist()]
    return [f"{n} in {w}" if w else n
            for n, w in zip(names, enclosing_annotations(ctx, idx))]


# -- JAX / XLA host dispatch -----------------------------------------------------------------
RUNTIME_THREAD = re.compile(r"^(py_xla_execute|tf_pjrt|pjrt|Host Threads|tf_XLA|xla_)", re.I)
#: Runtime-thread spans that wait rather than work: a BufferSequencingEvent task waits for
#: its buffer's definition event (the copy it runs, when there is one, is its own child
#: span), thread-pool markers are instants.
RUNTIME_WAIT = re.compile(r"^(BufferSequencingEvent::Execute|ThreadpoolListener::|"
                           r"Wait for |.*::Await|.*BlockHostUntilDone)")


def runtime_waits(ctx: Ctx) -> np.ndarray:
    """Name ids of :data:`RUNTIME_WAIT` spans, found once per trace."""
    return ctx.trace.memo("runtime_wait_ids", lambda: ctx.trace.name_ids(RUNTIME_WAIT.match))


def runtime_work(ctx: Ctx, lanes) -> np.ndarray:
    """Slices of the runtime threads that are work (dispatch, copies, allocation), not
    waits (:data:`RUNTIME_WAIT`)."""
    s = ctx.trace.slices
    work = np.flatnonzero(np.isin(s.lane, lanes))
    return work[~np.isin(s.name[work], runtime_waits(ctx))]


def runtime_lanes(ctx: Ctx) -> list[int]:
    names = ctx.trace.lanes.name
    main = {h.lane for h in ctx.bd.hosts}
    return [k for k, n in enumerate(names) if RUNTIME_THREAD.search(n) and k not in main]


def dispatch_idle(ctx: Ctx, d: DeviceBreakdown) -> float:
    """Share of steady time ``d`` idles while XLA/PjRt runtime threads are busy dispatching,
    allocating or copying: host work, not a sync (capped at the sync + host idle)."""
    cache = ctx.trace.memo("dispatch_idle", dict)
    key = (d.rank, d.device, tuple(ctx.rows.tolist()))
    if key in cache:
        return cache[key]
    lanes = runtime_lanes(ctx)
    r = ctx.rows
    wall = int((d.ends[r] - d.starts[r]).sum()) or 1
    if not lanes or not len(r):
        cache[key] = 0.0
        return 0.0
    s = ctx.trace.slices
    work = runtime_work(ctx, lanes)
    ws, we = union(s.start[work], s.end[work])
    bs, be = device_busy(ctx, d.lanes)
    a, b = clip_to_rows(ws, we, d.starts[r], d.ends[r])
    covered = int((b - a).sum()) - int(measure_in(bs, be, a, b).sum())
    cap = float(sum(d.column(c)[r].sum() for c in ("idle_sync", "idle_host"))) / wall
    cache[key] = min(covered / wall, cap)
    return cache[key]


def clip_to_rows(ws: np.ndarray, we: np.ndarray, lo: np.ndarray,
                  hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The pieces of the disjoint sorted intervals ``[ws, we)`` inside each row
    ``[lo, hi)``: a binary search per row for the intervals it meets, no rows x intervals
    pass."""
    lo, hi = np.asarray(lo, np.int64), np.asarray(hi, np.int64)
    k0 = np.searchsorted(we, lo, side="right")  # first interval ending after lo
    k1 = np.searchsorted(ws, hi, side="left")  # first interval starting at or after hi
    n = np.where(hi > lo, np.maximum(k1 - k0, 0), 0)
    row = np.repeat(np.arange(len(lo)), n)
    k = k0[row] + np.arange(int(n.sum())) - np.repeat(np.cumsum(n) - n, n)
    return np.maximum(ws[k], lo[row]), np.minimum(we[k], hi[row])


def runtime_dispatch_in_sync(ctx: Ctx, d: DeviceBreakdown) -> float:
    """The part of sync idle that is runtime-thread dispatch (the main thread waiting while
    the XLA/PjRt runtime still works): host work, not a sync."""
    dispatch = dispatch_idle(ctx, d)
    if not dispatch:
        return 0.0
    r = ctx.rows
    wall = int((d.ends[r] - d.starts[r]).sum()) or 1
    return min(dispatch, float(d.column("idle_sync")[r].sum()) / wall)


def one_off_in_gaps(ctx: Ctx, d: DeviceBreakdown) -> float:
    """Share of steady time the device idles (host-bound gaps) while a one-off call runs."""
    calls = one_off_calls(ctx)
    if not len(calls):
        return 0.0
    s = ctx.trace.slices
    g = d.gaps
    sel = g.of("idle_host")
    sel = sel[ctx.in_steady(g.start[sel], d.starts, d.ends)]
    cs, ce = union(s.start[calls], s.end[calls])
    r = ctx.rows
    wall = int((d.ends[r] - d.starts[r]).sum()) or 1
    return float(measure_in(cs, ce, g.start[sel], g.end[sel]).sum()) / wall



