"""What balancing the ranks of a synchronous job would make its step: the estimate behind
a straggler's speed-up, in ``analyze`` of a multi-rank folder and in ``fleet``.

In synchronous data parallelism every rank waits for the slowest at each collective, so
the job's step is the slow rank's own time (the step less its exposed communication) plus
the collective's own cost.  What the slow rank does with its extra own time decides what
balancing can gain, and the trace tells the two kinds apart:

* **work that moves**: framework ops (forward, backward, optimizer, copies, launches; on a
  device its kernels and copies) that take longer on the slow rank because it has more
  data.  Balanced, every rank does the mean of the ranks' op work: the extra work moves
  to the other ranks, it does not disappear.
* **time that is not work**: main-thread time with no op under it (Python outside the
  framework, a sleep, I/O), waits for input and host syncs; on a device its idle time.  It
  goes only when its cause goes; balanced, the slow rank has as much of it as the typical
  rank (the lower median rank; of two ranks, the other one).

The collective's own cost stays: in each iteration the least exposed wait of any rank
(the slow rank arrives last and waits only for the transfer; the others wait for that
plus the skew).  Per iteration, balanced step = mean op work + the typical rank's time
outside ops + the collective's own cost, at most the step now; the speed-up is the sum of
the steps now (the median rank's) over the sum of the balanced steps.  Assumed: each rank's
work runs at the speed the trace shows (ranks do not share cores or devices), op time
moves in proportion to the data, and the collective costs what it costs the slow rank.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..units import fmt_ns

#: Breakdown categories that are framework work, host side and device side: the work
#: that moves between ranks when their data is balanced.  Every other category but the
#: collective wait is time that is not work.
WORK_CATEGORIES = frozenset({
    "forward", "backward", "optimizer", "memcpy", "runtime",
    "compute", "memcpy_h2d", "memcpy_d2h", "memcpy_d2d", "memcpy_p2p", "memcpy_other",
    "memset"})
#: Shapes of a straggler's extra time: its fixes differ.
MOVES, NOT_WORK = "work", "not_work"
#: The shapes in words: what a straggler's cause is called in summaries.
SHAPE_WORDS = {MOVES: "op work that moves", NOT_WORK: "time that is not work"}
#: A rank straggles when its own time exceeds the typical rank's by more than this share
#: of the iteration (``fleet``'s per-iteration test; ``analyze`` asks it of the slow
#: rank's extra time per step).
STRAGGLER_MIN_FRACTION = 0.05


def work_of(categories, times: np.ndarray) -> np.ndarray:
    """Per row of ``times`` (rows x ``categories``): the time in work categories."""
    cols = [k for k, c in enumerate(categories) if c in WORK_CATEGORIES]
    return times[:, cols].sum(axis=1) if cols else np.zeros(times.shape[0], times.dtype)


@dataclass
class Balanced:
    """The balanced-step estimate of one job, ns summed over the iterations it read.

    ``now``: the median rank's steps; ``balanced``: the same steps balanced;
    ``mean_work``: the ranks' mean op work; ``slow_work`` / ``slow_rest``: the slow
    rank's op work and own time outside ops; ``typical_rest``: the typical rank's time
    outside ops; ``collective``: the collective's own cost."""

    slow: int
    iterations: int
    now: float
    balanced: float
    mean_work: float
    slow_work: float
    slow_rest: float
    typical_rest: float
    collective: float

    @property
    def speedup(self) -> float:
        return self.now / max(self.balanced, 1.0)

    @property
    def moved(self) -> float:
        """The slow rank's op work above the mean: it moves to the other ranks."""
        return max(self.slow_work - self.mean_work, 0.0)

    @property
    def removed(self) -> float:
        """The slow rank's time outside ops above the typical rank's: it goes with its
        cause."""
        return max(self.slow_rest - self.typical_rest, 0.0)

    @property
    def shape(self) -> str:
        """:data:`MOVES` when most of the slow rank's extra time is op work, else
        :data:`NOT_WORK`."""
        return shape_of(self.moved, self.removed)

    def excess_fraction(self) -> float:
        """The slow rank's extra time (moved + removed) per step, as a share of the step."""
        return (self.moved + self.removed) / max(self.now, 1.0)

    def basis(self) -> str:
        """The estimate in words, per step."""
        n = max(self.iterations, 1)

        def t(v):
            return fmt_ns(v / n)

        kind = ("op work that moves (balanced, each rank does the mean)"
                if self.shape == MOVES else
                "time with no op on it (a gap, a sleep, Python outside the framework, I/O or "
                "a host stall), which goes only when its cause goes")
        return (f"With the ranks balanced, the step would be {t(self.balanced)} instead of "
                f"{t(self.now)} "
                f"({self.speedup:.2f}x). Rank {self.slow}'s extra time is mostly {kind}: "
                f"it spends {t(self.slow_work)} a step in ops against a mean of "
                f"{t(self.mean_work)} per rank (+{t(self.moved)} moves to the other ranks) "
                f"and {t(self.slow_rest)} outside ops against {t(self.typical_rest)} on the "
                f"typical rank (+{t(self.removed)} goes with its cause); the collective's own "
                f"cost, {t(self.collective)} (the least any rank waits in it), stays.")


def shape_of(moved: float, removed: float) -> str:
    """:data:`MOVES` when op work above the mean is most of a rank's extra time."""
    return MOVES if moved >= removed else NOT_WORK


def _split(own: np.ndarray, work: np.ndarray):
    """Per rank (rows) and iteration: (op work, time outside ops), and per iteration the
    ranks' mean op work and the typical rank's time outside ops (the lower median rank)."""
    w = np.minimum(work, own)
    rest = own - w
    return w, rest, w.mean(axis=0), np.sort(rest, axis=0)[(own.shape[0] - 1) // 2]


def excess_of(row: int, own, work) -> tuple[float, float]:
    """(moved, removed): ns summed over the iterations (columns, every rank present) of
    rank ``row``'s op work above the ranks' mean and its time outside ops above the
    typical rank's: the two kinds of a straggler's extra time."""
    w, rest, mean_work, typical_rest = _split(np.asarray(own, np.float64),
                                              np.asarray(work, np.float64))
    return (max(float(w[row].sum() - mean_work.sum()), 0.0),
            max(float(rest[row].sum() - typical_rest.sum()), 0.0))


def balance(ranks: list[int], durations, comm, work) -> Balanced | None:
    """The balanced-step estimate from per-rank (rows) x iteration (columns) ns: own
    iteration time, exposed communication and op work (NaN where a rank lacks an
    iteration; only iterations every rank has count).  None with fewer than two ranks,
    no such iteration or no time."""
    d, c, w = (np.asarray(a, np.float64) for a in (durations, comm, work))
    if d.ndim != 2 or d.shape[0] < 2 or d.shape != c.shape or d.shape != w.shape:
        return None
    both = np.all(np.isfinite(d) & np.isfinite(c) & np.isfinite(w), axis=0)
    if not both.any():
        return None
    d, c, w = d[:, both], c[:, both], w[:, both]
    own = np.maximum(d - c, 0.0)
    w, rest, mean_work, typical_rest = _split(own, w)
    slow = int(np.argmax(own.sum(axis=1)))
    now = np.median(d, axis=0)
    coll = c.min(axis=0)
    balanced = np.minimum(mean_work + typical_rest + coll, now)
    if now.sum() <= 0:
        return None
    return Balanced(int(ranks[slow]), int(both.sum()), float(now.sum()),
                    float(balanced.sum()), float(mean_work.sum()), float(w[slow].sum()),
                    float(rest[slow].sum()), float(typical_rest.sum()), float(coll.sum()))


def peer_input(bd, side) -> tuple[np.ndarray, np.ndarray]:
    """Per iteration (ns, rows of ``side``): (``side``'s collective wait that the rank
    arriving last spent waiting for its own batch, ``side``'s wait beyond the collective's
    own cost).  ``side`` is one rank's host breakdown of a host-only job (``bd``, a
    :class:`.breakdown.TraceBreakdown`).  The rank that arrives last at a collective waits
    least in it (only for the transfer); every other rank waits for that plus the skew, the
    time the last rank's own step ran longer.  The part of the skew the last rank spent in
    its data-loading wait beyond ``side``'s own (a DataLoader whose workers fall behind on
    that rank) is input seen through the collective, not communication: no faster
    collective shortens it, a faster loader does.  Zeros on a device run, with one rank or
    when a rank lacks a host breakdown."""
    n = len(getattr(side, "starts", ()))
    zero = np.zeros(n, np.float64)
    rs = bd.ranks
    hosts = {h.rank: h for h in bd.hosts}
    if rs is None or bd.devices or side.rank not in rs.ranks \
            or any(r not in hosts for r in rs.ranks):
        return zero, zero
    m = min([n, rs.comm.shape[1]] + [len(hosts[r].starts) for r in rs.ranks])
    comm = rs.comm[:, :m].astype(np.float64)
    cols = np.arange(m)
    me = rs.ranks.index(side.rank)
    last = np.argmin(comm, axis=0)
    skew = np.maximum(comm[me] - comm[last, cols], 0.0)
    loading = np.vstack([hosts[r].column("data_loading")[:m] for r in rs.ranks])
    behind = np.maximum(loading[last, cols] - loading[me], 0.0).astype(np.float64)
    through, beyond = zero.copy(), zero.copy()
    through[:m], beyond[:m] = np.minimum(skew, behind), skew
    return through, beyond
