"""Pick the event stream that repeats once per iteration, and the host ops around it.

Preference: device work (kernels, copies, memsets) of the busiest device, all its
streams merged in time order; else the top-level CPU ops of the busiest host
thread; else every top-level slice. Each device event also carries the host call
that launched it (from launch flows), so iteration boundaries can be moved to the
host-side work that starts the step.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from ...builder import assign_depths
from ...trace import DEVICE_KINDS, Kind, LaneKind, Trace
from ...units import lane_title
from ..roles import STEP_NAME, step_driver_counts

#: Host ranges of the optimizer step (the last work of an iteration).
OPTIMIZER_NAME = re.compile(r"^Optimizer\.step#|#+\s*optimizer\s*#+|\boptimizer[._ ]step\b", re.I)
#: Device kernels of optimizers, used when no optimizer range is recorded.
OPTIMIZER_KERNEL = re.compile(
    r"multi_tensor_apply|adamw?(?![a-z])|(?<![a-z])sgd(?![a-z])|lamb(?!da)|adagrad|rmsprop", re.I)
#: Host calls that fetch the next batch.
LOADER_NAME = re.compile(r"dataloader|data_loader|__next__|next_batch|get_batch|"
                         r"fetch_batch|load_batch|copy_batch|batch_to_(gpu|device)|"
                         r"IteratorGetNext", re.I)


def is_step_name(name: str) -> bool:
    return bool(STEP_NAME.match(name.strip().strip("#").strip()))


@dataclass
class EventStream:
    """The chosen events, in time order, with their launching host calls (-1: none)."""

    kind: str  # "device" | "host" | "all"
    description: str
    index: np.ndarray  # int64 slice indexes
    start: np.ndarray  # int64 ns
    end: np.ndarray  # int64 ns
    launcher: np.ndarray  # int64 slice index of the host call that launched it, -1 none

    def __len__(self) -> int:
        return len(self.index)

    @property
    def has_launchers(self) -> bool:
        return len(self) > 0 and float((self.launcher >= 0).mean()) >= 0.5


def pick_stream(trace: Trace) -> EventStream | None:
    """The densest repetitive stream of ``trace``; None when it has no slices."""
    s = trace.slices
    if len(s) == 0:
        return None
    return _device_stream(trace) or _host_stream(trace) or _all_stream(trace)


def _device_stream(trace: Trace) -> EventStream | None:
    """Device events of the busiest device, in launch order when launches are linked.

    Launch order is program order, so it is the same in every iteration even when
    several device streams interleave differently; events whose launch is not in
    the trace (launched before it began) are left out in that case.
    """
    s = trace.slices
    dev = np.flatnonzero(np.isin(s.kind, [int(k) for k in DEVICE_KINDS]))
    if len(dev) == 0:
        return None
    per_lane = np.bincount(s.lane[dev], minlength=len(trace.lanes))
    lane_dev = trace.lanes.device.astype(np.int64)
    lane_key = (trace.lanes.rank.astype(np.int64) + 1) * 65536 + lane_dev
    keys, inv = np.unique(lane_key, return_inverse=True)
    best = int(np.argmax(np.bincount(inv, weights=per_lane, minlength=len(keys))))
    idx = dev[inv[s.lane[dev]] == best]
    r = int(trace.lanes.rank[np.flatnonzero(inv == best)[0]])
    d = int(s.device[idx[0]])
    launcher = np.full(len(s), -1, np.int64)
    f = trace.flows
    launch = f.kind == 0
    launcher[f.dst[launch]] = f.src[launch]
    lau = launcher[idx]
    streams = len(np.unique(s.stream[idx]))
    where = f"GPU {d}" + (f" of rank {r}" if r >= 0 and len(trace.meta.ranks) > 1 else "")
    what = (f"{where}: kernels, copies and memsets on {streams} stream"
            f"{'s' if streams != 1 else ''}")
    linked = lau >= 0
    if linked.mean() >= 0.5:
        dropped = int((~linked).sum())
        idx, lau = idx[linked], lau[linked]
        order = np.lexsort((s.start[idx], lau, s.start[lau]))
        idx, lau = idx[order], lau[order]
        desc = f"{what}, in launch order ({len(idx):,} events"
        desc += f"; {dropped:,} launched before the trace began left out)" if dropped else ")"
    else:
        desc = f"{what}, in time order ({len(idx):,} events)"
    return EventStream("device", desc, idx, s.start[idx], s.end[idx], lau)


def _host_stream(trace: Trace) -> EventStream | None:
    ops = HostOps(trace)
    drivers = step_driver_counts(trace)  # TF/JAX: the thread that runs the step
    lane = ops.busiest_lane(drivers, min_top=2)
    if lane < 0:
        return None
    idx = ops.top_level(lane)
    s = trace.slices
    title = lane_title(trace.lanes.name[lane], trace.lanes.group[lane])
    desc = f"top-level CPU ops of {title} ({len(idx):,} events)"
    return EventStream("host", desc, idx, s.start[idx], s.end[idx], idx.copy())


def _all_stream(trace: Trace) -> EventStream | None:
    s = trace.slices
    top = s.depth == 0
    steps = trace.name_ids(is_step_name)
    if len(steps):  # step markers are annotations, which pattern mode must not see
        top &= ~np.isin(s.name, steps)
    idx = np.flatnonzero(top)
    if len(idx) < 2:
        return None
    desc = f"all top-level slices ({len(idx):,} events)"
    return EventStream("all", desc, idx, s.start[idx], s.end[idx], np.full(len(idx), -1))


@dataclass
class HostOps:
    """Host ops per thread at the shallowest level of real work.

    Python frames and step annotations are left out (they wrap everything), so
    "top level" means the outermost framework ops, e.g. ``aten::conv2d`` or
    ``enumerate(DataLoader)...``, not ``ProfilerStep#5``.
    """

    trace: Trace
    _level: tuple | None = None

    def __post_init__(self):
        s = self.trace.slices
        ann = s.kind == int(Kind.ANNOTATION)
        op = (s.kind == int(Kind.CPU_OP)) | ann
        if ann.any():
            step_ids = self.trace.name_ids(is_step_name)
            op &= ~(ann & np.isin(s.name, step_ids))
        op &= self.trace.lanes.kind[s.lane] == int(LaneKind.CPU)
        self._idx = np.flatnonzero(op)
        # grouped by lane once (start order kept): per-lane scans of all ops were
        # quadratic in the thread count (100k threads: minutes)
        lane_of = s.lane[self._idx]
        order = self._order = np.argsort(lane_of, kind="stable")
        self._by_lane = self._idx[order]
        self._lane_ids, self._first, self._count = np.unique(
            lane_of[order], return_index=True, return_counts=True)

    def lanes(self) -> list[int]:
        return self._lane_ids.tolist()

    def busiest_lane(self, priority: np.ndarray | None = None, min_top: int = 1) -> int:
        """The lane with most top-level ops (at least ``min_top``), or -1.

        With ``priority`` (per lane) the key is (priority, top-level count); ties go
        to the lowest lane id. Top-level counts of all lanes come from one nesting
        pass (per lane, 100k one-op threads took minutes in the CLI).
        """
        ids = self._lane_ids
        top = self._levels()[2]
        pri = priority[ids] if priority is not None else np.zeros(len(ids), np.int64)
        cand = np.flatnonzero(top >= min_top)
        if not len(cand):
            return -1
        first = np.lexsort((ids[cand], -top[cand], -pri[cand]))[0]
        return int(ids[cand[first]])

    def _levels(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(depth of each op in ``_by_lane`` order, top level per lane, ops at it per lane).

        A lane's top level is its shallowest depth holding at least a quarter as many
        ops as its fullest depth (Python frames and wrappers sit above the real ops).
        """
        if self._level is None and not len(self._idx):
            empty = np.zeros(0, np.int64)
            self._level = (empty, empty, empty)
        if self._level is None:
            s = self.trace.slices
            pos = np.searchsorted(self._lane_ids, s.lane[self._idx])
            depth, _ = assign_depths(s.start[self._idx], s.dur[self._idx], pos,
                                     len(self._lane_ids))
            depth = depth.astype(np.int64)[self._order]
            lane_pos = pos[self._order]
            width = int(depth.max()) + 1 if len(depth) else 1
            keys, counts = np.unique(lane_pos * width + depth, return_counts=True)
            pair_lane, pair_depth = keys // width, keys % width
            heads = np.flatnonzero(np.r_[True, pair_lane[1:] != pair_lane[:-1]])
            fullest = np.maximum.reduceat(counts, heads)
            ok = counts >= 0.25 * fullest[np.searchsorted(pair_lane[heads], pair_lane)]
            lanes_ok, at = np.unique(pair_lane[ok], return_index=True)
            level = np.zeros(len(self._lane_ids), np.int64)
            top = np.zeros(len(self._lane_ids), np.int64)
            level[lanes_ok] = pair_depth[ok][at]
            top[lanes_ok] = counts[ok][at]
            self._level = (depth, level, top)
        return self._level

    def top_level(self, lane: int) -> np.ndarray:
        """Slice indexes of the lane's top-level ops, in start order."""
        i = int(np.searchsorted(self._lane_ids, lane))
        if i == len(self._lane_ids) or self._lane_ids[i] != lane:
            return self._idx[:0]
        depth, level, _ = self._levels()
        lo, hi = self._first[i], self._first[i] + self._count[i]
        seg = self._by_lane[lo:hi]
        return seg[depth[lo:hi] == level[i]]

    def optimizer_ranges(self, lanes: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Merged (start, end) ranges of optimizer steps on any host thread (of ``lanes``
        when given: one rank's, whose steps are not merged with another rank's)."""
        s = self.trace.slices
        ids = self.trace.name_ids(lambda n: bool(OPTIMIZER_NAME.search(n)))
        hit = np.flatnonzero(np.isin(s.name, ids)) if len(ids) else np.zeros(0, np.int64)
        if lanes is not None:
            hit = hit[np.isin(s.lane[hit], lanes)]
        if len(hit) == 0:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        a, b = s.start[hit], s.end[hit]
        order = np.argsort(a, kind="stable")
        a, b = a[order], np.maximum.accumulate(b[order])
        new = np.r_[True, a[1:] > b[:-1]]
        starts = a[new]
        ends = np.r_[b[np.flatnonzero(new)[1:] - 1], b[-1]]
        return starts, ends

    def loader_starts(self, lanes: np.ndarray | None = None) -> np.ndarray:
        """Start times of data-loader calls on any host thread (of ``lanes``), sorted."""
        s = self.trace.slices
        ids = self.trace.name_ids(lambda n: bool(LOADER_NAME.search(n)))
        if len(ids) == 0:
            return np.zeros(0, np.int64)
        hit = self._idx[np.isin(s.name[self._idx], ids)]
        if lanes is not None:
            hit = hit[np.isin(s.lane[hit], lanes)]
        return np.sort(s.start[hit])
