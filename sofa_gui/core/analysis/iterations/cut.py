"""Turn pattern occurrences into iteration time spans.

Where in the period to cut is chosen from timing, not symbols: an iteration
starts where the host stops launching work to fetch the next batch (a
data-loader call between two launches), else at the largest typical pause in
launching (or, without launch links, on the device). Each boundary is then moved
to the host op that starts the step, so an iteration contains its input loading.
Iteration i ends where i+1 starts; the last one ends when its last event ends.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ...trace import Kind, Trace
from .pattern import Anchors, spaced
from .stream import OPTIMIZER_KERNEL, EventStream, HostOps, is_step_name
from .symbols import Symbols

MAX_STRETCH = 1.5  # a window longer than this many periods is an occurrence plus a gap
MIN_LAST = 0.8  # a trailing occurrence shorter than this share of a period is partial


@dataclass
class Timing:
    """Per stream event: pauses before it and what host work precedes it."""

    host_gap: np.ndarray  # ns the host spent not launching before this event's launch
    device_gap: np.ndarray  # ns the device was idle before this event
    loader: np.ndarray  # bool: a data-loader call started since the previous launch
    optimizer: np.ndarray  # bool: launched by an optimizer step
    launch_start: np.ndarray
    prev_launch_end: np.ndarray  # latest launch end among earlier events (int64 min: none)

    @classmethod
    def of(cls, trace: Trace, stream: EventStream, ops: HostOps) -> Timing:
        s = trace.slices
        lau = stream.launcher
        has = lau >= 0
        ls = np.where(has, s.start[np.maximum(lau, 0)], stream.start)
        le = np.where(has, s.end[np.maximum(lau, 0)], stream.start)
        prev_le = np.r_[np.iinfo(np.int64).min, np.maximum.accumulate(le)[:-1]]
        prev_end = np.r_[stream.start[:1], np.maximum.accumulate(stream.end)[:-1]]
        host_gap = np.maximum(ls - np.maximum(prev_le, ls.min()), 0)
        device_gap = np.maximum(stream.start - prev_end, 0)
        if len(ls):  # nothing is known before the first event: a typical pause
            every = max(1, len(ls) // 100_000)
            host_gap[0] = np.median(host_gap[::every])
            device_gap[0] = np.median(device_gap[::every])
        loads = ops.loader_starts()
        loader = np.zeros(len(ls), bool)
        if len(loads):
            after = np.searchsorted(loads, prev_le, side="right")
            loader = np.searchsorted(loads, ls, side="right") > after
        return cls(host_gap, device_gap, loader, _optimizer(trace, stream, ops, ls), ls, prev_le)


def _optimizer(trace: Trace, stream: EventStream, ops: HostOps, ls: np.ndarray) -> np.ndarray:
    """Events launched inside an optimizer step (or, without such ranges, named like one)."""
    a, b = ops.optimizer_ranges()
    if len(a):
        k = np.searchsorted(a, ls, side="right") - 1
        return (k >= 0) & (b[np.maximum(k, 0)] > ls) & (stream.launcher >= 0)
    ids = trace.name_ids(lambda n: bool(OPTIMIZER_KERNEL.search(n)))
    return np.isin(trace.slices.name[stream.index], ids)


@dataclass
class Cut:
    starts: np.ndarray  # int64 ns
    ends: np.ndarray  # int64 ns
    first_event: np.ndarray  # stream position of each iteration's first event
    symbols: np.ndarray  # symbols in each iteration's occurrence
    events: int  # stream events inside iterations
    phase_reason: str
    notes: list[str] = field(default_factory=list)


@dataclass
class CutScore:
    """Per symbol: how well an iteration would start there, by one criterion."""

    reason: str
    value: np.ndarray  # float; higher is better
    exact: bool  # True: a yes/no marker (take the nearest hit), False: a pause length


def cut_scores(symbols: Symbols, timing: Timing, use_host: bool) -> list[CutScore]:
    """The criteria in order of preference: data loader, optimizer end, longest pause."""
    ev = symbols.first
    prev = np.r_[0, ev[1:] - 1]
    pause = (timing.host_gap if use_host else timing.device_gap)[ev].astype(float)
    opt_end = timing.optimizer[prev] & ~timing.optimizer[ev]
    opt_end[0] = False
    where = "host launch" if use_host else "device"
    return [
        CutScore("after the data-loader call", timing.loader[ev].astype(float), True),
        CutScore("after the optimizer step", opt_end.astype(float), True),
        CutScore(f"at the longest typical {where} pause", pause, False),
    ]


MAX_PHASE_WINDOWS = 64  # occurrences sampled to choose where to cut


def choose_phase(n: int, anchors: Anchors, scores: list[CutScore]) -> tuple[int, CutScore]:
    """Offset (symbols after the anchor origin) where iterations start, and by what.

    A marker wins when it is near the same place in at least half the
    occurrences; among such places the one with the longest pause is taken. A
    pause must be long in (nearly) every occurrence, so one slow warm-up step
    does not decide. "Near": edits shift positions by a few symbols.
    """
    period = max(1, int(round(anchors.period)))
    origins = anchors.starts(0.0)
    full = origins[(origins >= 1) & (origins + period <= n)]
    if len(full) == 0:
        full = np.clip(origins, 1, max(n - period, 1))[:1]
    if len(full) > MAX_PHASE_WINDOWS:
        full = full[np.linspace(0, len(full) - 1, MAX_PHASE_WINDOWS).astype(np.int64)]
    q = np.clip(full[:, None] + np.arange(period)[None, :], 0, n - 1)
    reach = int(round(0.02 * period))  # short periods: no slack (one symbol is a lot)
    pause = scores[-1]
    exact = np.quantile(pause.value[q], 0.25, axis=0, method="lower")
    near = np.quantile(_spread(pause.value[q], reach), 0.25, axis=0, method="lower")
    gap = near + exact / (2 * max(float(exact.max()), 1.0))  # ties: where it is exact
    for score in scores[:-1]:
        share = _spread(score.value[q], reach).mean(axis=0)
        if share.max() >= 0.5:
            ok = share >= share.max() - 0.1
            return int(np.argmax(np.where(ok, gap, -1))), score
    return int(np.argmax(gap)), pause


def _spread(m: np.ndarray, reach: int) -> np.ndarray:
    """Row-wise maximum over columns j-reach..j+reach (doubling, O(cols log reach))."""
    rows, cols = m.shape
    pad = np.full((rows, cols + 4 * reach + 1), -np.inf)
    pad[:, reach: reach + cols] = m
    width, out = 1, pad
    while width < 2 * reach + 1:
        step = min(width, 2 * reach + 1 - width)
        shifted = np.full_like(out, -np.inf)
        shifted[:, :-step] = out[:, step:]
        out = np.maximum(out, shifted)
        width += step
    return out[:, :cols]


def refine(cuts: np.ndarray, score: CutScore, reach: int) -> np.ndarray:
    """Move each cut within ``reach`` to where its criterion holds best."""
    n = len(score.value)
    if len(cuts) == 0 or n == 0:
        return cuts
    offs = np.arange(-reach, reach + 1)
    pos = cuts[:, None] + offs[None, :]
    inside = (pos >= 0) & (pos < n)
    val = np.where(inside, score.value[np.clip(pos, 0, n - 1)], -np.inf)
    if score.exact:
        hit = val > 0
        near = np.where(hit, np.abs(offs)[None, :], reach + 1)
        k = np.argmin(near, axis=1)
        moved = hit[np.arange(len(cuts)), k]
    else:  # the longest pause; among equal ones the one nearest the cut
        k = np.lexsort((np.abs(offs)[None, :].repeat(len(cuts), 0), -val), axis=1)[:, 0]
        moved = np.isfinite(val[np.arange(len(cuts)), k])
    return np.where(moved, cuts + offs[k], cuts)


def windows(cuts: np.ndarray, n: int, period: float) -> list[tuple[int, int, bool]]:
    """(first, end, contiguous-with-next) symbol ranges of whole occurrences.

    An occurrence cut off by the start or end of the stream still counts when at
    least ``MIN_LAST`` of it is there.
    """
    cuts = np.unique(cuts)
    out: list[tuple[int, int, bool]] = []
    for j, c in enumerate(cuts.tolist()):
        nxt = int(cuts[j + 1]) if j + 1 < len(cuts) else None
        lo = max(c, 0)
        if nxt is not None and nxt - c <= MAX_STRETCH * period:
            hi, contiguous = min(nxt, n), nxt < n
        elif nxt is not None:
            hi, contiguous = min(c + int(round(period)), n), False
        else:
            hi = n if n - c <= 1.1 * period else c + int(round(period))
            contiguous = False
        if hi - lo >= MIN_LAST * period and lo < n:
            out.append((lo, hi, contiguous))
    for j in range(len(out) - 1):
        if out[j][2] and out[j][1] != out[j + 1][0]:
            out[j] = (out[j][0], out[j][1], False)
    return out


def cut_iterations(trace: Trace, stream: EventStream, symbols: Symbols,
                   anchors: Anchors, heads: np.ndarray | None = None) -> Cut | None:
    """Iteration spans from the anchors of the chosen pattern (``heads``: stream
    positions where steps are known to start, preferred to any other criterion)."""
    seq = symbols.seq
    ops = HostOps(trace)
    timing = Timing.of(trace, stream, ops)
    use_host = stream.has_launchers and stream.kind == "device"
    scores = cut_scores(symbols, timing, use_host)
    if heads is not None and len(heads):
        scores.insert(0, CutScore("after the call that ends each step (its longest runs)",
                                  np.isin(symbols.first, heads).astype(float), True))
    phase, score = choose_phase(len(seq), anchors, scores)
    period = anchors.period
    cuts = anchors.starts(phase / period)
    reach = min(int(round(0.05 * period)), int(period - 1) // 2)
    cuts = spaced(refine(cuts, score, reach), period)
    wins = windows(cuts, len(seq), period)
    if len(wins) < 2:
        return None
    m = len(stream)
    first = np.array([symbols.first[a] for a, _, _ in wins], np.int64)
    last = np.array([symbols.first[b] if b < len(seq) else m for _, b, _ in wins], np.int64)
    if use_host:
        starts = host_starts(trace, stream, timing, first, [w[2] for w in wins])
    else:
        starts = stream.start[first].astype(np.int64)
    bounds = np.column_stack([first, last]).ravel()
    ends = np.maximum.reduceat(stream.end, bounds[bounds < m])[0::2].astype(np.int64)
    for j, (_, _, contiguous) in enumerate(wins[:-1]):
        if contiguous:
            ends[j] = starts[j + 1]
    notes = []
    gaps = sum(1 for w in wins[:-1] if not w[2])
    if gaps:
        notes.append(f"{gaps} stretch{'es' if gaps > 1 else ''} between iterations left out "
                     f"(longer than {MAX_STRETCH:g} periods)")
    events = int(sum(b - a for a, b in zip(first, last)))
    lengths = np.array([b - a for a, b, _ in wins], np.int64)
    return Cut(starts, ends, first, lengths, events, score.reason, notes)


def host_starts(trace: Trace, stream: EventStream, timing: Timing, first: np.ndarray,
                follows: list[bool]) -> np.ndarray:
    """Host-side start of each iteration: the first host op since the previous launch.

    "Since the previous launch" means after the host ops that enclosed the
    previous event's launch (e.g. the optimizer step) have ended. An iteration
    with no previous one in the stream takes at most as many leading host ops as
    the others do, so a long prelude is not counted in.
    """
    s = trace.slices
    starts = stream.start[first].astype(np.int64)
    lau = stream.launcher[first]
    y = timing.launch_start[first].astype(np.int64)
    lane = np.where(lau >= 0, s.lane[np.maximum(lau, 0)], -1)
    after = np.r_[False, np.asarray(follows[:-1], bool)]
    for ln in np.unique(lane[lane >= 0]).tolist():
        host = HostLane(trace, ln)
        j = np.flatnonzero(lane == ln)
        floor = host.floors(first[j], stream, timing, y[j])
        k = host.first_real(floor, y[j])
        starts[j] = np.where(k >= 0, host.start[np.maximum(k, 0)], y[j])
        sample = np.flatnonzero(after[j])
        sample = sample[:: max(1, len(sample) // 64)]  # typical leading ops, from <= 64 steps
        most = max((len(host.gap_ops(floor[i], y[j][i])) for i in sample), default=None)
        for i in np.flatnonzero(~after[j]).tolist() if most is not None else []:
            ops = host.gap_ops(float(floor[i]), int(y[j][i]))
            if len(ops) > most:
                starts[j[i]] = int(ops[len(ops) - max(most, 1)])
    bad = np.flatnonzero(np.diff(starts) <= 0) + 1
    starts[bad] = np.minimum(timing.launch_start[first[bad]], stream.start[first[bad]])
    return starts


class HostLane:
    """One host thread's slices, for "what encloses this launch" and "what ran since"."""

    def __init__(self, trace: Trace, lane: int):
        s = trace.slices
        idx = trace.lane_slices(lane)
        self.start, self.end = s.start[idx], s.end[idx]
        kind = s.kind[idx]
        real = np.isin(kind, [int(Kind.CPU_OP), int(Kind.PYTHON), int(Kind.ANNOTATION)])
        steps = trace.name_ids(is_step_name)
        if len(steps):
            real &= ~((kind == int(Kind.ANNOTATION)) & np.isin(s.name[idx], steps))
        self.real = real
        # next_real[i]: first real op at or after i (len: none)
        pos = np.where(real, np.arange(len(real)), len(real))
        self.next_real = np.minimum.accumulate(pos[::-1])[::-1] if len(real) else pos
        self.runtime_end = np.sort(self.end[kind == int(Kind.RUNTIME)])
        depth = s.depth[idx]
        self.levels = [np.flatnonzero(depth == d) for d in range(int(depth.max(initial=-1)) + 1)]

    def floors(self, events: np.ndarray, stream: EventStream, timing: Timing,
               y: np.ndarray) -> np.ndarray:
        """When the host finished the work around each previous event's launch."""
        floor = np.empty(len(events), float)
        has_prev = events > 0
        prev = np.maximum(events - 1, 0)
        floor[has_prev] = timing.prev_launch_end[events[has_prev]]
        k = np.searchsorted(self.runtime_end, y[~has_prev], side="right")
        floor[~has_prev] = np.where(k > 0, self.runtime_end[np.maximum(k - 1, 0)], -np.inf)
        x = timing.launch_start[prev]
        linked = has_prev & (stream.launcher[prev] >= 0)
        for lvl in self.levels:  # ops enclosing the previous launch that end before ours
            k = np.searchsorted(self.start[lvl], x, side="right") - 1
            end = np.where(k >= 0, self.end[lvl[np.maximum(k, 0)]], np.iinfo(np.int64).min)
            up = linked & (end > x) & (end <= y)
            floor[up] = np.maximum(floor[up], end[up])
        return floor

    def first_real(self, floor: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Index of the first real op starting in ``[floor, y]`` per query (-1: none)."""
        needle = np.ceil(np.nan_to_num(floor, neginf=-2.0**62)).astype(np.int64)
        lo = np.searchsorted(self.start, needle)
        hi = np.searchsorted(self.start, y, side="right")
        k = self.next_real[np.minimum(lo, len(self.next_real) - 1)] if len(self.real) else lo
        return np.where((lo < len(self.real)) & (k < hi), k, -1)

    def gap_ops(self, floor: float, y: int) -> np.ndarray:
        """Starts of the outermost host ops that began in ``[floor, y]``."""
        lo = (int(np.searchsorted(self.start, np.int64(np.ceil(floor)), side="left"))
              if np.isfinite(floor) else 0)  # an int needle: no float copy of the array
        hi = int(np.searchsorted(self.start, np.int64(y), side="right"))
        real = np.flatnonzero(self.real[lo:hi]) + lo
        if len(real) == 0:
            return np.zeros(0, np.int64)
        st, en = self.start[real], self.end[real]
        reach = np.r_[np.iinfo(np.int64).min, np.maximum.accumulate(en)[:-1]]
        return st[st >= reach]
