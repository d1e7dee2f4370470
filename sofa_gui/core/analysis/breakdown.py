"""Per-iteration time breakdown, device side and host side, for every rank.

:func:`compute_breakdown` returns a :class:`TraceBreakdown`:

* one :class:`~.device_side.DeviceBreakdown` per (rank, device): compute,
  communication, memcpy per direction, memset and idle split by cause (input,
  copy call, sync, launch gap, host-bound, other; see :mod:`.device_side` for
  the overlap priority and the idle rules);
* one :class:`~.host_side.HostBreakdown` per rank: the main thread's data
  loading, forward, backward, optimizer, memcpy, runtime, sync, Python, other
  (see :mod:`.host_side`);
* per-rank iteration times and stragglers when there are several ranks;
* counter series (CPU/GPU utilisation...) summarised per iteration.

Each category row sums exactly to the iteration's wall time (int64 ns).  When
no iterations were found, the whole trace is analyzed as one span
(``whole_trace``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..progress import NullProgress, Progress
from ..trace import DEVICE_KINDS, Kind, LaneKind, Trace
from .balance import work_of
from .codec import register
from .device_side import (
    COPY_DIRECTIONS,
    DEVICE_CATEGORIES,
    IDLE_CATEGORIES,
    LAUNCH_GAP_NS,
    SYNC_SLACK_NS,
    DeviceBreakdown,
    compute_device,
)
from .host_side import HOST_CATEGORIES, HostBreakdown, compute_host, window_of
from .intervals import clean_windows
from .palette import label_of
from .ranks import RankStats, rank_stats, rank_windows
from .results import Iterations, lower_median_index, us

OVERLAP_PRIORITY = ("device: compute > communication > memcpy (h2d > d2h > d2d > p2p > other) "
                    "> memset > idle (input > copy call > sync / launch / host / other); "
                    "host: data loading > sync > memcpy > runtime > optimizer > backward > "
                    "forward > python > other")


@dataclass
class CounterSummary:
    """One counter series per iteration: sample mean, min and max (NaN: no sample)."""

    name: str
    unit: str
    lane: int
    mean: np.ndarray
    min: np.ndarray
    max: np.ndarray

    def to_dict(self) -> dict:
        def clean(a):
            return [None if np.isnan(v) else round(float(v), 4) for v in a]
        return {"name": self.name, "unit": self.unit, "lane": self.lane,
                "mean": clean(self.mean), "min": clean(self.min), "max": clean(self.max)}


@dataclass
class TraceBreakdown:
    """Everything the breakdown found; what the CLI, reports and GUI read.

    ``starts``/``ends`` are the analyzed windows (the iterations, or the whole
    trace when ``whole_trace``) on the host clock.  When the device lags its host
    (``device_clock``), each device uses its own windows (its ``starts``/``ends``:
    :meth:`Iterations.device_windows`, finish to finish of each step's device
    work) so the device side of an iteration is what the device did with that
    step; host sides keep these.  :attr:`device` and :attr:`host` are the
    primary device / main thread (the busiest device and its rank's host);
    :meth:`times` gives their (n_iter, n_categories) ns matrices.
    """

    starts: np.ndarray
    ends: np.ndarray
    whole_trace: bool
    note: str
    devices: list[DeviceBreakdown] = field(default_factory=list)
    hosts: list[HostBreakdown] = field(default_factory=list)
    ranks: RankStats | None = None
    counters: list[CounterSummary] = field(default_factory=list)
    device_categories: tuple[str, ...] = DEVICE_CATEGORIES
    host_categories: tuple[str, ...] = HOST_CATEGORIES
    device_clock: bool = False  # devices use device-clock windows (the device lags its host)

    # -- the primary view ---------------------------------------------------------
    def __len__(self) -> int:
        return len(self.starts)

    @property
    def durations(self) -> np.ndarray:
        return self.ends - self.starts

    @property
    def device(self) -> DeviceBreakdown | None:
        """The busiest device (first in :attr:`devices`), None on CPU-only traces."""
        return self.devices[0] if self.devices else None

    @property
    def host(self) -> HostBreakdown | None:
        """Main thread of the primary device's rank (first in :attr:`hosts`)."""
        return self.hosts[0] if self.hosts else None

    def _side(self, side: str | None):
        if side is None:
            side = "device" if self.device is not None else "host"
        obj = self.device if side == "device" else self.host if side == "host" else None
        if side not in ("device", "host"):
            raise ValueError(f"side must be 'device' or 'host', not {side!r}")
        return obj

    def categories(self, side: str | None = None) -> tuple[str, ...]:
        """Category names in display order (``side``: "device", "host", None = primary)."""
        obj = self._side(side)
        return obj.categories if obj is not None else ()

    def times(self, side: str | None = None) -> np.ndarray:
        """(n_iter, n_categories) int64 ns of the primary device or host."""
        obj = self._side(side)
        return obj.times if obj is not None else np.zeros((len(self), 0), np.int64)

    def bytes(self, side: str | None = None) -> np.ndarray:
        """(n_iter, n_categories) int64 bytes: copies / memsets on the device side,
        copies launched by copy and read-back calls on the host side."""
        obj = self._side(side)
        return obj.bytes if obj is not None else np.zeros((len(self), 0), np.int64)

    @property
    def median_iteration(self) -> int:
        """Index of the iteration with the median duration (lower median), -1 if none."""
        return lower_median_index(self.durations)

    def iteration_breakdown(self, i: int, side: str | None = None) -> dict[str, int]:
        """{category: ns} of iteration ``i``."""
        return dict(zip(self.categories(side), self.times(side)[i].tolist()))

    def dominant_category(self, i: int, side: str | None = None) -> str:
        """The category with the most time in iteration ``i`` ("" when nothing is known)."""
        t = self.times(side)
        if t.shape[1] == 0 or i < 0 or i >= len(t) or t[i].sum() == 0:
            return ""
        return self.categories(side)[int(np.argmax(t[i]))]

    @property
    def window_clock(self) -> str:
        """Which clock the device windows are on: "device" or "host"."""
        return "device" if self.device_clock else "host"

    def windows_of(self, side: str | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(starts, ends) of the windows the side's rows cover."""
        obj = self._side(side)
        return (obj.starts, obj.ends) if obj is not None else (self.starts, self.ends)

    # -- JSON -----------------------------------------------------------------------
    def annotate_items(self, items: list[dict]) -> None:
        """Add ``breakdown`` (µs per category; host ones prefixed ``host_``),
        ``dominant`` and ``bytes`` (non-zero bytes per category) to each iteration
        item of ``Iterations.to_dict()``."""
        if self.whole_trace:
            return
        sides = [(prefix, obj.categories, obj.times.tolist(), obj.bytes.tolist())
                 for side, prefix in (("device", ""), ("host", "host_"))
                 if (obj := self._side(side)) is not None]
        dominant = self._dominant_all()
        window = None
        if self.device is not None:
            window = [x.tolist() for x in self.windows_of("device")]
        for item in items:
            i = item["index"]
            if i >= len(self):
                continue
            bd, moved = {}, {}
            for prefix, cats, times, nbytes in sides:
                bd.update({prefix + c: round(v / 1000, 3) for c, v in zip(cats, times[i])})
                moved.update({prefix + c: v for c, v in zip(cats, nbytes[i]) if v})
            item["breakdown"] = bd
            if window is not None:
                item["device_window"] = {"start_us": us(window[0][i]),
                                         "end_us": us(window[1][i]), "clock": self.window_clock}
            item["dominant"] = dominant[i]
            item["bytes"] = moved

    def _dominant_all(self) -> list[str]:
        """:meth:`dominant_category` of every iteration at once."""
        t, cats = self.times(), self.categories()
        if t.shape[1] == 0:
            return [""] * len(t)
        top = np.argmax(t, axis=1).tolist()
        return [cats[k] if any_time else "" for k, any_time in zip(top, (t.sum(1) != 0).tolist())]

    def to_dict(self) -> dict:
        return {
            "scope": "whole_trace" if self.whole_trace else "iterations",
            "note": self.note,
            "overlap_priority": OVERLAP_PRIORITY,
            "launch_gap_max_us": us(LAUNCH_GAP_NS),
            "sync_slack_us": us(SYNC_SLACK_NS),
            "windows": _windows(self.starts, self.ends),
            "device_window_clock": self.window_clock,
            "device_windows": (_windows(*self.windows_of("device"))
                               if self.device is not None else []),
            "median_iteration": self.median_iteration,
            "device_categories": list(self.device_categories),
            "category_labels": {c: label_of(c) for c in (*self.device_categories,
                                                         *self.host_categories)},
            "host_categories": list(self.host_categories),
            "devices": [_device_dict(d) for d in self.devices],
            "hosts": [_host_dict(h) for h in self.hosts],
            "ranks": self.ranks.to_dict() if self.ranks is not None else None,
            "counters": [c.to_dict() for c in self.counters],
        }


def _windows(starts: np.ndarray, ends: np.ndarray) -> list[dict]:
    return [{"start_us": us(s), "end_us": us(e)} for s, e in zip(starts.tolist(), ends.tolist())]


def _totals(times: np.ndarray, cats) -> tuple[dict, dict]:
    tot = times.sum(axis=0)
    wall = int(tot.sum())
    return ({c: us(v) for c, v in zip(cats, tot.tolist())},
            {c: round(v / wall, 4) if wall else 0.0 for c, v in zip(cats, tot.tolist())})


def _median_row(obj) -> dict:
    d = obj.ends - obj.starts
    if not len(d):
        return {}
    m = int(np.argsort(d, kind="stable")[(len(d) - 1) // 2])
    return {c: us(v) for c, v in zip(obj.categories, obj.times[m].tolist())}


def _device_dict(d: DeviceBreakdown) -> dict:
    total, share = _totals(d.times, d.categories)
    c = d.copies
    copies = {}
    for k, name in enumerate(COPY_DIRECTIONS):
        if c.count[:, k].sum():
            copies[name] = {
                "count": int(c.count[:, k].sum()), "bytes": int(c.bytes[:, k].sum()),
                "busy_us": us(c.busy[:, k].sum()),
                "bandwidth_gbps": round(c.bandwidth_gbps(name), 3),
                "pageable_bytes": int(c.pageable_bytes[:, k].sum()),
                "pinned_bytes": int(c.pinned_bytes[:, k].sum()),
            }
    comm_total = int(d.comm_total.sum())
    overlap = int(d.comm_overlap.sum())
    gaps = {cat: int((d.gaps.cause == k).sum()) for k, cat in enumerate(IDLE_CATEGORIES)
            if cat not in ("idle_input", "idle_copy")}
    return {
        "label": d.label, "rank": d.rank, "device": d.device, "lanes": d.lanes,
        "total_us": total, "share": share, "median_iteration_us": _median_row(d),
        "copies": copies,
        "communication": {
            "total_us": us(comm_total), "exposed_us": us(comm_total - overlap),
            "overlap_us": us(overlap),
            "overlap_fraction": round(overlap / comm_total, 4) if comm_total else 0.0,
        },
        "kernels": {"count": int(d.kernel_count.sum()), "median_us": us(d.kernel_median_ns)},
        "idle_gaps": gaps,
    }


def _host_dict(h: HostBreakdown) -> dict:
    total, share = _totals(h.times, h.categories)
    return {
        "label": h.label, "rank": h.rank, "lane": h.lane, "helper_lanes": h.helper_lanes,
        "total_us": total, "share": share, "median_iteration_us": _median_row(h),
        "runtime_calls": int(h.launches.sum()),
    }


# -- computation ---------------------------------------------------------------------
def compute_breakdown(trace: Trace, iters: Iterations,
                      progress: Progress | None = None) -> TraceBreakdown:
    """Break every iteration down on every device and every rank's main thread."""
    progress = progress or NullProgress()
    if len(iters):
        ws, we = clean_windows(iters.starts, iters.ends)
        whole, note = False, f"{len(ws)} iterations ({iters.method})"
    else:
        ws = np.array([trace.start_ns], np.int64)
        we = np.array([max(trace.end_ns, trace.start_ns)], np.int64)
        whole = True
        note = ("no iterations found" + (f" ({iters.reason})" if iters.reason else "")
                + ": the whole trace is analyzed as one span")
    ranks = sorted({int(r) for r in trace.lanes.rank.tolist()}) or [-1]
    groups = _device_groups(trace)
    hosts: dict[int, HostBreakdown] = {}
    devices: list[DeviceBreakdown] = []
    n_steps = len(ranks) + len(groups)
    done = 0
    windows = {}
    for r in ranks:
        windows[r] = rank_windows(trace, iters, r, ws, we) if len(ranks) > 1 else (ws, we)
        h = compute_host(trace, r, *windows[r])
        if h is not None:
            hosts[r] = h
        done += 1
        progress.update(done / n_steps, "host breakdown")
    only_host = next(iter(hosts.values())) if len(hosts) == 1 else None
    dev_w = _device_clock_windows(iters, ws, windows, whole)
    for (r, dev), idx in groups.items():
        rws, rwe = dev_w or windows.get(r, (ws, we))
        host = hosts.get(r, only_host)  # one host process drives all devices
        devices.append(compute_device(trace, idx, r, dev, host, rws, rwe))
        done += 1
        progress.update(done / n_steps, "device breakdown")
    devices.sort(key=lambda d: (-int(d.busy.sum()), d.rank, d.device))
    host_list = _order_hosts(hosts, devices)
    if dev_w is not None:
        note += "; device windows on the device clock (the device lags its host)"
    bd = TraceBreakdown(ws, we, whole, note, devices, host_list,
                        _rank_stats(ranks, windows, hosts, devices),
                        _counter_summaries(trace, ws, we), device_clock=dev_w is not None)
    progress.update(1.0, "breakdown done")
    return bd


def _device_clock_windows(iters: Iterations, ws: np.ndarray, windows: dict,
                          whole: bool) -> tuple[np.ndarray, np.ndarray] | None:
    """The device-clock windows when the device lags and every rank uses the global
    host windows (ranks with their own step spans keep host windows); else None."""
    if whole or len(ws) != len(iters) or not np.array_equal(ws, iters.starts):
        return None
    if any(not np.array_equal(w[0], ws) for w in windows.values()):
        return None  # some rank has its own step spans
    return iters.device_windows()


def _device_groups(trace: Trace) -> dict[tuple[int, int], np.ndarray]:
    """Device slices (and device-lane sync events) per (rank, device)."""
    s = trace.slices
    lanes = trace.lanes
    on_dev_lane = np.isin(lanes.kind[s.lane], [int(LaneKind.GPU), int(LaneKind.MEMCPY)])
    mask = np.isin(s.kind, [int(k) for k in DEVICE_KINDS])
    mask |= (s.kind == int(Kind.SYNC)) & on_dev_lane
    idx = np.flatnonzero(mask)
    if not len(idx):
        return {}
    dev = s.device[idx].astype(np.int64)
    dev = np.where(dev >= 0, dev, lanes.device[s.lane[idx]])
    rank = lanes.rank[s.lane[idx]].astype(np.int64)
    key = (rank + 1) * (1 << 20) + (dev + 1)
    out = {}
    for k in np.unique(key).tolist():
        sel = idx[key == k]
        if np.any(s.kind[sel] != int(Kind.SYNC)):
            out[(k >> 20) - 1, (k & ((1 << 20) - 1)) - 1] = sel
    return out


def _order_hosts(hosts: dict[int, HostBreakdown], devices: list[DeviceBreakdown]):
    first = devices[0].rank if devices else None
    return sorted(hosts.values(), key=lambda h: (h.rank != first, h.rank))


def _rank_stats(ranks, windows, hosts, devices) -> RankStats | None:
    real = [r for r in ranks if r >= 0]
    if len(real) < 2:
        return None
    durs, busy, comm, total, overlap, work = [], [], [], [], [], []
    for r in real:
        ws, we = windows[r]
        durs.append(we - ws)
        zero = np.zeros(len(ws), np.int64)
        dev = [d for d in devices if d.rank == r]
        if dev:  # the rank's busiest device (devices are sorted busiest first)
            d = dev[0]
            busy.append(d.busy - d.column("communication"))
            work.append(work_of(d.categories, d.times))
            comm.append(d.column("communication"))
            total.append(d.comm_total)
            overlap.append(d.comm_overlap)
            continue
        h = hosts.get(r)
        if h is None:
            busy.append(zero)
            comm.append(zero)
            work.append(zero)
        else:  # CPU collectives (gloo, MPI): the main thread waits in them or for them;
            waits = h.column("communication")  # the rest, traced or not, is its own work
            busy.append(h.times.sum(axis=1) - waits)
            comm.append(waits)
            work.append(work_of(h.categories, h.times))
        total.append(comm[-1])
        overlap.append(zero)
    return rank_stats(real, durs, busy, comm, total, overlap, work)


def _counter_summaries(trace: Trace, ws: np.ndarray, we: np.ndarray) -> list[CounterSummary]:
    c = trace.counters
    out = []
    n = len(ws)
    we = we.copy()
    if n:
        we[-1] += 1  # a sample at the very end of the last window belongs to it
    for sid, name in enumerate(c.table.name):
        t, v = c.samples(sid)
        w = window_of(t, ws, we)
        ok = w >= 0
        w, v = w[ok], v[ok].astype(np.float64)
        cnt = np.bincount(w, minlength=n)
        with np.errstate(invalid="ignore", divide="ignore"):
            mean = np.bincount(w, weights=v, minlength=n) / cnt
        lo = np.full(n, np.inf)
        hi = np.full(n, -np.inf)
        np.minimum.at(lo, w, v)
        np.maximum.at(hi, w, v)
        empty = cnt == 0
        lo[empty] = hi[empty] = mean[empty] = np.nan
        out.append(CounterSummary(name, c.table.unit[sid], int(c.table.lane[sid]), mean, lo, hi))
    return out


register(TraceBreakdown, CounterSummary)  # result types the analysis cache may store
