"""Multi-rank views: each rank's own iteration windows, per-rank times and stragglers."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..trace import Kind, Trace
from .intervals import clean_windows
from .results import Iterations, us


def rank_windows(trace: Trace, iters: Iterations, rank: int,
                 ws: np.ndarray, we: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``rank``'s own spans of the iterations when its step annotations carry the same
    labels (ranks' clocks and step boundaries differ); else the global windows."""
    labels = list(iters.labels)
    if not labels or len(labels) != len(ws):
        return ws, we
    s = trace.slices
    wanted = set(labels)
    ids = trace.name_ids(lambda n: n in wanted)
    on_rank = trace.lanes.rank[s.lane] == rank
    ann = np.flatnonzero(on_rank & (s.kind == int(Kind.ANNOTATION)) & np.isin(s.name, ids))
    spans: dict[str, tuple[int, int]] = {}
    for i in ann.tolist():
        name = trace.names[int(s.name[i])]
        if name in wanted:
            b, e = int(s.start[i]), int(s.end[i])
            if name not in spans or e - b > spans[name][1] - spans[name][0]:
                spans[name] = (b, e)
    if len(spans) != len(wanted):
        return ws, we
    rs = np.array([spans[lb][0] for lb in labels], np.int64)
    re_ = np.array([spans[lb][1] for lb in labels], np.int64)
    if np.any(np.diff(rs) < 0):
        return ws, we
    return clean_windows(rs, re_)


@dataclass
class RankStats:
    """Per rank (rows, in ``ranks`` order) and iteration (columns).

    ``busy`` is the rank's own work: device time not idle and not exposed
    communication (host non-``other`` time on CPU-only ranks).  In synchronous
    data parallelism every rank waits for the slowest at each collective, so
    the rank with the most busy time is the iteration's straggler; ``lag`` is
    how much longer it worked than the median rank.
    """

    ranks: list[int]
    durations: np.ndarray  # (n_ranks, n_iter) ns
    busy: np.ndarray  # (n_ranks, n_iter) ns
    comm: np.ndarray  # (n_ranks, n_iter) ns exposed communication
    straggler: np.ndarray  # (n_iter,) rank id
    lag: np.ndarray  # (n_iter,) ns

    def to_dict(self) -> dict:
        return {
            "ranks": list(self.ranks),
            "iteration_us": {str(r): [us(v) for v in row] for r, row in
                             zip(self.ranks, self.durations.tolist())},
            "busy_us": {str(r): [us(v) for v in row] for r, row in
                        zip(self.ranks, self.busy.tolist())},
            "communication_us": {str(r): [us(v) for v in row] for r, row in
                                 zip(self.ranks, self.comm.tolist())},
            "straggler": [int(r) for r in self.straggler],
            "straggler_lag_us": [us(v) for v in self.lag],
        }


def rank_stats(ranks: list[int], durations: list[np.ndarray], busy: list[np.ndarray],
               comm: list[np.ndarray]) -> RankStats | None:
    """Stack per-rank rows; None for fewer than two ranks."""
    if len(ranks) < 2:
        return None
    d = np.vstack(durations)
    b = np.vstack(busy)
    c = np.vstack(comm)
    worst = np.argmax(b, axis=0)
    lag = b.max(axis=0) - np.median(b, axis=0)
    return RankStats(list(ranks), d, b, c, np.array(ranks)[worst],
                     np.rint(lag).astype(np.int64))
