"""Accelerator-side breakdown: what one device does with each iteration's wall time.

Overlap priority (the first layer covering an instant owns it, so the
categories of an iteration sum exactly to its wall time):

    compute kernel > communication > memcpy (H2D > D2H > D2D > P2P > other)
    > memset > idle

Compute wins over communication so that ``communication`` is the *exposed*
collective time (not hidden behind compute); the hidden part is reported as
``comm_overlap``.  Idle time (nothing running on any stream of the device)
is split by cause, looking at what the rank's main thread does meanwhile:

* ``idle_input``  -- the host is in data loading: nothing is queued because it
  is still fetching the next batch;
* ``idle_copy``   -- the host is inside a host-to-device copy call
  (``cudaMemcpyAsync``...): from pageable memory it stages the data before the
  device copy can start;
* ``idle_sync``   -- the host is blocked in a synchronisation (device/stream/event
  sync, ``.item()``, a device-to-host read-back); also the rest of any gap in
  which such a call returns: the host drained the queue and waited, so the
  device starves until the next launch;

the rest of each idle gap (a maximal stretch idle for other reasons) is then
classified as a whole:

* ``idle_launch`` -- a gap up to :data:`LAUNCH_GAP_NS`: the device outruns the
  launch rate (tiny kernels, per-launch latency);
* ``idle_host``   -- the part of a longer gap in which the host runs framework
  work (ops, launches, Python, autograd): per-op CPU overhead is slower than
  the kernels it issues, so the device waits for the host;
* ``idle_other``  -- the rest: the host is idle or doing untraced work.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..trace import CopyKind, Kind, Trace
from .codec import register
from .host_side import HostBreakdown, window_of
from .intervals import measure_in, paint, union
from .roles import copy_memory_kind, stream_wait_ids

DEVICE_CATEGORIES = ("compute", "communication", "memcpy_h2d", "memcpy_d2h", "memcpy_d2d",
                     "memcpy_p2p", "memcpy_other", "memset", "idle_input", "idle_copy",
                     "idle_sync", "idle_launch", "idle_host", "idle_other")
BUSY_CATEGORIES = DEVICE_CATEGORIES[:8]
IDLE_CATEGORIES = DEVICE_CATEGORIES[8:]
COPY_DIRECTIONS = ("h2d", "d2h", "d2d", "p2p", "other")

#: Longest idle gap still counted as launch overhead.  A kernel launch costs
#: roughly 5-20 µs of host time, so a gap of a few launches means the device
#: is waiting for the launch stream rather than for a host phase.
LAUNCH_GAP_NS = 50_000
#: A sync call may return this much before the gap starts (host/device clock skew).
SYNC_SLACK_NS = 5_000

_COPY_LAYER = {CopyKind.H2D: 2, CopyKind.D2H: 3, CopyKind.D2D: 4, CopyKind.P2P: 5}
# Host layers painted below every device layer: data loading, copy calls, sync calls,
# framework work.
_INPUT_LAYER, _COPY_CALL_LAYER, _SYNC_CALL_LAYER, _WORK_LAYER = 8, 9, 10, 11
_GAP_SYNC, _GAP_LAUNCH, _GAP_HOST, _GAP_OTHER = 2, 3, 4, 5  # IDLE_CATEGORIES indexes


@dataclass
class CopyStats:
    """Memory copies per iteration and direction (:data:`COPY_DIRECTIONS` columns).

    ``busy`` sums copy durations (ns; overlapping copies count twice), so
    ``bytes / busy`` is the achieved bandwidth of the copies themselves.
    """

    bytes: np.ndarray  # (n_iter, 5) int64
    busy: np.ndarray  # (n_iter, 5) int64 ns
    count: np.ndarray  # (n_iter, 5) int64
    pageable_bytes: np.ndarray  # (n_iter, 5) int64
    pinned_bytes: np.ndarray  # (n_iter, 5) int64

    def bandwidth_gbps(self, direction: str) -> float:
        """Achieved GB/s (1e9 bytes/s) over all iterations, 0 when unknown."""
        c = COPY_DIRECTIONS.index(direction)
        busy = int(self.busy[:, c].sum())
        return float(self.bytes[:, c].sum()) / busy if busy else 0.0


@dataclass
class IdleGaps:
    """Every idle gap of the device (idle for reasons other than input or copy calls):
    span, cause (an index into :data:`IDLE_CATEGORIES`; a long gap is ``idle_host``
    when host work covers at least half of it) and, for sync gaps, the host sync
    slice that returned in it (-1 otherwise)."""

    start: np.ndarray
    end: np.ndarray
    cause: np.ndarray  # int8 index into IDLE_CATEGORIES
    sync_slice: np.ndarray  # int64

    def of(self, category: str) -> np.ndarray:
        return np.flatnonzero(self.cause == IDLE_CATEGORIES.index(category))


@dataclass
class DeviceBreakdown:
    """One device's time per iteration and category (ns), plus copies and collectives.

    ``times[i, c]`` is ns of iteration ``i`` in ``categories[c]``; each row sums to
    ``ends[i] - starts[i]``.  ``bytes[i, c]`` is the bytes moved by the copies
    (memcpy_*) and memsets that start in iteration ``i`` (0 for other columns).
    ``comm_total`` is all collective time (union), ``comm_overlap`` the part
    hidden behind compute kernels.
    """

    rank: int
    device: int
    label: str
    lanes: list[int]
    starts: np.ndarray
    ends: np.ndarray
    times: np.ndarray
    bytes: np.ndarray
    copies: CopyStats
    comm_total: np.ndarray
    comm_overlap: np.ndarray
    kernel_count: np.ndarray
    kernel_median_ns: float
    gaps: IdleGaps
    categories: tuple[str, ...] = DEVICE_CATEGORIES

    def column(self, category: str) -> np.ndarray:
        return self.times[:, self.categories.index(category)]

    @property
    def busy(self) -> np.ndarray:
        """Non-idle ns per iteration."""
        return self.times[:, :len(BUSY_CATEGORIES)].sum(axis=1)


def compute_device(trace: Trace, idx: np.ndarray, rank: int, device: int,
                   host: HostBreakdown | None, ws: np.ndarray, we: np.ndarray) -> DeviceBreakdown:
    """Breakdown of one device's slices ``idx`` over windows ``ws``/``we``.

    ``idx`` may include the device lanes' sync events (Kineto ``cuda_sync``); they
    are not device work, only evidence for ``idle_sync``.
    """
    s = trace.slices
    is_sync = s.kind[idx] == int(Kind.SYNC)
    dev_syncs, idx = idx[is_sync], idx[~is_sync]
    kind, start, end = s.kind[idx], s.start[idx], s.end[idx]
    ck = s.copy_kind[idx]
    layer = np.full(len(idx), 6, np.int8)  # memcpy_other unless told otherwise
    layer[kind == int(Kind.KERNEL)] = 0
    layer[kind == int(Kind.COMMUNICATION)] = 1
    for copy_kind, li in _COPY_LAYER.items():
        layer[(kind == int(Kind.MEMCPY)) & (ck == int(copy_kind))] = li
    layer[kind == int(Kind.MEMSET)] = 7
    layers = [(start[layer == li], end[layer == li]) for li in range(8)]
    layers += _host_layers(trace, host)
    p = paint(layers, ws, we)
    sync_ends, sync_ids = _sync_points(trace, host, dev_syncs)
    owner, gaps = _classify_idle(p, sync_ends, sync_ids)
    times = _per_window(owner, p, len(ws))
    comm = union(*layers[1])
    comm_total = measure_in(*comm, ws, we)
    comm_exposed = times[:, DEVICE_CATEGORIES.index("communication")]
    copies, nbytes = _copy_stats(trace, idx, layer, ws, we)
    kwin = window_of(start[layer == 0], ws, we)
    kdur = (end - start)[(layer == 0) | (layer == 1)]
    lanes = np.unique(s.lane[idx])
    return DeviceBreakdown(
        rank=rank, device=device, label=_label(rank, device), lanes=lanes.tolist(),
        starts=ws, ends=we, times=times, bytes=nbytes, copies=copies,
        comm_total=comm_total, comm_overlap=np.maximum(comm_total - comm_exposed, 0),
        kernel_count=np.bincount(kwin[kwin >= 0], minlength=len(ws)).astype(np.int64),
        kernel_median_ns=float(np.median(kdur)) if len(kdur) else 0.0, gaps=gaps)


def _host_layers(trace: Trace, host: HostBreakdown | None) -> list:
    """Data-loading, copy-call, sync-call and framework-work intervals of the main thread."""
    empty = np.zeros(0, np.int64)
    if host is None:
        return [(empty, empty)] * 4
    s = trace.slices
    out = []
    for ids in (host.role_slices.get("data_loading", empty),
                host.role_slices.get("memcpy", empty), host.role_slices.get("sync", empty),
                host.work):
        out.append((s.start[ids], s.end[ids]))
    return out


def _sync_points(trace: Trace, host: HostBreakdown | None,
                 dev_syncs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """End times of host sync calls and device-lane sync events, sorted, with slice ids.

    Kineto's device-side "Stream Wait Event" is one stream waiting for another
    (``cudaStreamWaitEvent``), not the host blocking, so it is no sync point.
    """
    s = trace.slices
    parts = [dev_syncs[~np.isin(s.name[dev_syncs], stream_wait_ids(trace))]]
    if host is not None:
        parts.append(host.role_slices.get("sync", np.zeros(0, np.int64)))
    ids = np.concatenate(parts).astype(np.int64)
    ends = s.end[ids]
    order = np.argsort(ends, kind="stable")
    return ends[order], ids[order]


def _classify_idle(p, sync_ends: np.ndarray, sync_ids: np.ndarray):
    """Owner per segment in DEVICE_CATEGORIES indexes, and the idle gaps."""
    n_busy = len(BUSY_CATEGORIES)
    owner = p.owner.astype(np.int16)
    idle = owner >= _WORK_LAYER  # input, copy-call and sync-call time is set apart
    prev_idle = np.concatenate([[False], idle[:-1]])
    next_idle = np.concatenate([idle[1:], [False]])
    first = np.flatnonzero(idle & ~prev_idle)
    last = np.flatnonzero(idle & ~next_idle)
    g_start, g_end = p.seg_start[first], p.seg_end[last]
    gap_of_seg = np.cumsum(idle & ~prev_idle) - 1
    work = idle & (owner == _WORK_LAYER)
    host_ns = np.bincount(gap_of_seg[work], weights=p.seg_len[work].astype(np.float64),
                          minlength=len(first))
    lo = np.searchsorted(sync_ends, g_start - SYNC_SLACK_NS, side="left")
    hi = np.searchsorted(sync_ends, g_end, side="right")
    has_sync = hi > lo
    short = g_end - g_start <= LAUNCH_GAP_NS
    long_cause = np.where(2 * host_ns >= g_end - g_start, _GAP_HOST, _GAP_OTHER)
    cause = np.where(has_sync, _GAP_SYNC, np.where(short, _GAP_LAUNCH, long_cause))
    sync_slice = np.full(len(first), -1, np.int64)
    sync_slice[has_sync] = sync_ids[lo[has_sync]]
    g = np.maximum(gap_of_seg, 0)
    if len(first):
        seg_cause = np.where(has_sync[g], _GAP_SYNC, np.where(
            short[g], _GAP_LAUNCH, np.where(owner == _WORK_LAYER, _GAP_HOST, _GAP_OTHER)))
    else:
        seg_cause = np.full(len(owner), _GAP_OTHER)
    owner = np.where(owner == _INPUT_LAYER, n_busy,
                     np.where(owner == _COPY_CALL_LAYER, n_busy + 1,
                              np.where(owner == _SYNC_CALL_LAYER, n_busy + _GAP_SYNC,
                                       np.where(idle, n_busy + seg_cause, owner))))
    return owner, IdleGaps(g_start, g_end, cause.astype(np.int8), sync_slice)


def _per_window(owner: np.ndarray, p, n_windows: int) -> np.ndarray:
    k = len(DEVICE_CATEGORIES)
    ok = p.window >= 0
    per = np.bincount(p.window[ok].astype(np.int64) * k + owner[ok],
                      weights=p.seg_len[ok].astype(np.float64), minlength=n_windows * k)
    return np.rint(per).astype(np.int64).reshape(n_windows, k)


def _copy_stats(trace: Trace, idx, layer, ws, we) -> tuple[CopyStats, np.ndarray]:
    s = trace.slices
    n, nd = len(ws), len(COPY_DIRECTIONS)
    copy = (layer >= 2) & (layer <= 6)
    cidx = idx[copy]
    direction = (layer[copy] - 2).astype(np.int64)
    w = window_of(s.start[cidx], ws, we)
    ok = w >= 0
    key = w[ok] * nd + direction[ok]
    nbytes = np.maximum(s.bytes[cidx], 0)[ok]
    mem = copy_memory_kind(trace, cidx)[ok]

    def table(weights):
        return np.bincount(key, weights=weights, minlength=n * nd).astype(np.int64).reshape(n, nd)

    stats = CopyStats(
        bytes=table(nbytes.astype(np.float64)),
        busy=table(s.dur[cidx][ok].astype(np.float64)),
        count=table(np.ones(len(key))),
        pageable_bytes=table(np.where(mem == 1, nbytes, 0).astype(np.float64)),
        pinned_bytes=table(np.where(mem == 2, nbytes, 0).astype(np.float64)),
    )
    out = np.zeros((n, len(DEVICE_CATEGORIES)), np.int64)
    out[:, 2:7] = stats.bytes
    ms = idx[layer == 7]
    mw = window_of(s.start[ms], ws, we)
    mok = mw >= 0
    out[:, 7] = np.bincount(mw[mok], weights=np.maximum(s.bytes[ms], 0)[mok].astype(np.float64),
                            minlength=n).astype(np.int64)
    return stats, out


def _label(rank: int, device: int) -> str:
    dev = f"GPU {device}" if device >= 0 else "device"
    return f"rank {rank} / {dev}" if rank >= 0 else dev


register(DeviceBreakdown, CopyStats, IdleGaps)  # result types the analysis cache may store
