"""A data loader started again inside the loop: the main thread's time between two input
fetches of one iteration that it spends on neither the step nor a traced op.

A loop over epochs (``for epoch ...: for x, y in loader``) ends each epoch with a fetch
that finds the iterator exhausted and begins the next with ``iter(loader)`` and a fetch
of its first batch.  A PyTorch ``DataLoader(num_workers > 0)`` with the default
``persistent_workers=False`` shuts its worker processes down in that last fetch, starts
new ones in ``iter(loader)`` (untraced: the profiler records the fetches, not the
iterator's construction; only a few small ops of its sampler and seed show) and waits for
their first batches in the next fetch.  So two fetches in one iteration with no step work
between them, the time between them mostly untraced, are a restart of the loader: input
time, whether it recurs every epoch or happens once.  A step that fetches twice with work
between (gradient accumulation, an evaluation over its own loader) is not one: its ops
cover the time between the fetches.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..trace import LaneKind, Trace
from . import roles as R
from .intervals import measure_in, union

#: Between two fetches of one iteration, traced ops covering less than this share of the
#: time leave it to the loader's restart (the iterator's construction and its workers').
MAX_TRACED = 0.5


@dataclass(frozen=True)
class Restarts:
    """Restarts of the loader on one thread: per restart, the untraced time between its
    two fetches (``gap_start``/``gap_end``), the span from the first fetch's start to the
    last one's end (``span_start``/``span_end``, a chain of back-to-back fetches) and the
    iteration it is in (``window``); ``fetch_ns`` is a typical fetch outside restarts
    (the median one), what a kept loader still costs the step."""

    gap_start: np.ndarray
    gap_end: np.ndarray
    span_start: np.ndarray
    span_end: np.ndarray
    window: np.ndarray
    fetch_ns: float

    def __len__(self) -> int:
        return len(self.window)

    def excess_ns(self) -> np.ndarray:
        """Per restart: its span less one typical fetch (what a loader whose workers are
        kept would still take for the batch)."""
        return np.maximum(self.span_end - self.span_start - self.fetch_ns, 0.0)


def fetch_intervals(trace: Trace, lane: int) -> tuple[np.ndarray, np.ndarray]:
    """The disjoint input fetches on ``lane`` (data-loading slices, nested ones merged);
    found once per lane (restarts and the iteration grouping both read them)."""
    cache, lane = trace.memo("loader_restarts.fetches", dict), int(lane)
    if lane not in cache:
        s = trace.slices
        idx = trace.lane_slices(lane)
        idx = idx[R.host_roles(trace, idx) == R.DATA_LOADING]
        cache[lane] = union(s.start[idx], s.end[idx])
    return cache[lane]


def restarts(trace: Trace, lane: int, ws: np.ndarray, we: np.ndarray) -> Restarts:
    """The loader's restarts on ``lane`` inside the windows ``ws``/``we`` (sorted); found
    once per lane and windows (the breakdown, iteration grouping and findings all ask)."""
    cache = trace.memo("loader_restarts", dict)
    key = (int(lane), ws.dtype.str, ws.tobytes(), we.dtype.str, we.tobytes())
    if key not in cache:
        cache[key] = _find(trace, lane, ws, we)
    return cache[key]


def _find(trace: Trace, lane: int, ws: np.ndarray, we: np.ndarray) -> Restarts:
    a, b = fetch_intervals(trace, lane) if lane >= 0 else (np.zeros(0, np.int64),) * 2
    w = _window(a, ws, we)
    pair = np.flatnonzero((w[:-1] >= 0) & (w[:-1] == w[1:])) if len(a) > 1 else a[:0]
    g0, g1 = b[pair], a[pair + 1]
    quiet = _traced(trace, lane, g0, g1) < MAX_TRACED * np.maximum(g1 - g0, 1)
    pair, g0, g1 = pair[quiet], g0[quiet], g1[quiet]
    first, last = _chains(pair)
    in_restart = np.zeros(len(a), bool)
    for f, la in zip(first.tolist(), last.tolist()):
        in_restart[f:la + 1] = True
    plain = (b - a)[(w >= 0) & ~in_restart]
    fetch = float(np.median(plain)) if len(plain) else 0.0
    return Restarts(g0, g1, a[first], b[last], w[first] if len(first) else first, fetch)


def _window(t: np.ndarray, ws: np.ndarray, we: np.ndarray) -> np.ndarray:
    if not len(ws):
        return np.full(len(t), -1, np.int64)
    k = np.searchsorted(ws, t, side="right") - 1
    ok = (k >= 0) & (t < we[np.maximum(k, 0)])
    return np.where(ok, k, -1)


def _traced(trace: Trace, lane: int, g0: np.ndarray, g1: np.ndarray) -> np.ndarray:
    """ns of each gap ``[g0, g1)`` covered by slices that start inside it on ``lane`` or
    another traced thread of its process (a runtime pool or autograd thread running the
    step's work while the loop's thread waits is no restart)."""
    if not len(g0):
        return np.zeros(0, np.int64)
    s = trace.slices
    idx = np.concatenate([trace.lane_slices(ln) for ln in _process_lanes(trace, lane)])
    st = s.start[idx]
    k = np.searchsorted(g0, st, side="right") - 1
    inside = (k >= 0) & (st < g1[np.maximum(k, 0)])
    idx = idx[inside]
    u0, u1 = union(s.start[idx], s.end[idx])
    return measure_in(u0, u1, g0, g1)


def _process_lanes(trace: Trace, lane: int) -> list[int]:
    """``lane`` and the other traced CPU threads of its process (sampled stacks of the
    same threads left out: they would show the loop's own thread again)."""
    lanes, sampled = trace.lanes, R.sampled_lanes(trace)
    if lanes.pid[lane] < 0:  # no process known: the thread alone
        return [int(lane)]
    same = (lanes.pid == lanes.pid[lane]) & (lanes.kind == int(LaneKind.CPU)) & ~sampled
    return sorted({int(lane), *np.flatnonzero(same).tolist()})


def _chains(pair: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(first fetch, last fetch) of each chain of back-to-back fetches: ``pair`` holds the
    fetch that begins each quiet gap, so consecutive ones join into one chain."""
    if not len(pair):
        return pair, pair
    new = np.concatenate([[True], np.diff(pair) > 1])
    starts = np.flatnonzero(new)
    ends = np.concatenate([starts[1:], [len(pair)]]) - 1
    return pair[starts], pair[ends] + 1
