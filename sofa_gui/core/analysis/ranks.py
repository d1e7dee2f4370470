"""Multi-rank views: each rank's own iteration windows, per-rank times and stragglers."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..trace import Kind, Trace
from .codec import register
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
    """Per rank (rows, in ``ranks`` order) and iteration (columns), ns.

    ``durations`` are each rank's own iteration windows (its own step annotations when
    they carry the same labels).  ``busy`` is the rank's own work: device time not
    idle and not exposed communication (on CPU-only ranks: main-thread time not waiting in or for
    collectives).
    In synchronous data parallelism every rank waits for the slowest at each
    collective, so the rank with the most busy time is the iteration's straggler;
    ``lag`` is how much longer it worked than the median rank.  ``comm`` is exposed
    communication (not hidden behind compute), ``comm_total`` all collective time
    (union) and ``comm_overlap`` the part of it hidden behind compute kernels.  ``work``
    is the part of the rank's own time in framework work (ops, copies, kernels): what
    moves between ranks when their data is balanced (:mod:`.balance`).

    JSON (``breakdown.ranks`` of ``sofa-gui analyze --json``; µs, lists per iteration,
    dicts keyed by the rank as a string): ``ranks``, ``iteration_us``,
    ``median_iteration_us``, ``busy_us``, ``communication_us`` (exposed),
    ``communication_total_us``, ``communication_overlap_us``, ``work_us``,
    ``overlap_fraction``
    (per rank, over all iterations), ``straggler`` (rank per iteration),
    ``straggler_lag_us``, ``slowest_iteration_rank`` (rank with the longest own
    iteration window, per iteration).
    """

    ranks: list[int]
    durations: np.ndarray  # (n_ranks, n_iter) ns
    busy: np.ndarray  # (n_ranks, n_iter) ns
    comm: np.ndarray  # (n_ranks, n_iter) ns exposed communication
    straggler: np.ndarray  # (n_iter,) rank id
    lag: np.ndarray  # (n_iter,) ns
    comm_total: np.ndarray | None = None  # (n_ranks, n_iter) ns, all communication
    comm_overlap: np.ndarray | None = None  # (n_ranks, n_iter) ns hidden behind compute
    work: np.ndarray | None = None  # (n_ranks, n_iter) ns of framework work

    def __post_init__(self):
        if self.comm_total is None:
            self.comm_total = self.comm.copy()
        if self.comm_overlap is None:
            self.comm_overlap = np.zeros_like(self.comm)
        if self.work is None:
            self.work = self.busy.copy()

    def overlap_fraction(self) -> np.ndarray:
        """Per rank: share of all its communication hidden behind compute (0 if none)."""
        tot = self.comm_total.sum(axis=1).astype(np.float64)
        ov = self.comm_overlap.sum(axis=1).astype(np.float64)
        return np.divide(ov, tot, out=np.zeros_like(tot), where=tot > 0)

    @property
    def slowest(self) -> np.ndarray:
        """Per iteration: the rank whose own iteration window is longest."""
        return np.array(self.ranks)[np.argmax(self.durations, axis=0)]

    def to_dict(self) -> dict:
        def per_rank(a):
            return {str(r): [us(v) for v in row] for r, row in zip(self.ranks, a.tolist())}

        return {
            "ranks": list(self.ranks),
            "iteration_us": per_rank(self.durations),
            "median_iteration_us": {str(r): us(float(np.median(row))) for r, row in
                                    zip(self.ranks, self.durations.tolist())},
            "busy_us": per_rank(self.busy),
            "communication_us": per_rank(self.comm),
            "communication_total_us": per_rank(self.comm_total),
            "communication_overlap_us": per_rank(self.comm_overlap),
            "work_us": per_rank(self.work),
            "overlap_fraction": {str(r): round(float(f), 4) for r, f in
                                 zip(self.ranks, self.overlap_fraction())},
            "straggler": [int(r) for r in self.straggler],
            "straggler_lag_us": [us(v) for v in self.lag],
            "slowest_iteration_rank": [int(r) for r in self.slowest],
        }


def rank_stats(ranks: list[int], durations: list[np.ndarray], busy: list[np.ndarray],
               comm: list[np.ndarray], comm_total: list[np.ndarray] | None = None,
               comm_overlap: list[np.ndarray] | None = None,
               work: list[np.ndarray] | None = None) -> RankStats | None:
    """Stack per-rank rows; None for fewer than two ranks."""
    if len(ranks) < 2:
        return None
    d = np.vstack(durations)
    b = np.vstack(busy)
    c = np.vstack(comm)
    worst = np.argmax(b, axis=0)
    lag = b.max(axis=0) - np.median(b, axis=0)
    return RankStats(list(ranks), d, b, c, np.array(ranks)[worst],
                     np.rint(lag).astype(np.int64),
                     np.vstack(comm_total) if comm_total is not None else None,
                     np.vstack(comm_overlap) if comm_overlap is not None else None,
                     np.vstack(work) if work is not None else None)


register(RankStats)  # result types the analysis cache may store
