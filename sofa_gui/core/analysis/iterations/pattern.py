"""Find the period of a symbol stream and where each occurrence of it starts.

1. Period: the suffix array groups positions whose next few symbols (their
   context) are equal. The distance from each context to its previous
   occurrence gives candidate periods; each is scored by the share of the stream
   whose context recurs one period before or after (within 5%, so edits and
   small variations are tolerated). The shortest candidate that explains nearly
   as much as the best is the period: multiples of it explain as much (two
   iterations glued together), non-multiples explain little. No iteration
   count is needed. When event order differs between iterations, only rare
   events recur at the period; that weaker evidence is the fallback.
2. Occurrences: symbols (else 2- or 4-grams) that occur about once per period at
   a stable phase are anchors; each anchor occurrence votes for the start of the
   occurrence it is in. Votes agree once per occurrence, so an occurrence with
   edits, missing or extra events still gets a start from its other anchors.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .suffix import context_groups

MAX_DIVISOR = 4  # candidates include P/j, j <= this, for each distance P that recurs
MAX_CANDIDATES = 16
MAX_ANCHORS = 64
PRIMITIVE_SLACK = 0.03  # a divisor may explain this much less and still win
MIN_EVENTS = 6
SAMPLE = 20000  # positions sampled to measure how much of the stream a shift explains
MIN_CONTEXT_COVERAGE = 0.5  # runs of events must recur for at least this share of the stream
MIN_RARE_RECURRENCE = 0.6  # else this share of the rare events must recur a period away
MIN_RARE_SYMBOLS = 8  # ... and at least this many distinct rare events must


def period_tolerance(period: float) -> int:
    """How far an occurrence's length may stray from the period (symbols)."""
    return max(1, int(round(0.05 * period)))


def significance_length(seq: np.ndarray) -> int:
    """Shared-context length that random text of this entropy would rarely reach."""
    n = len(seq)
    counts = np.bincount(seq)
    p = counts[counts > 0] / n
    entropy = float(-(p * np.log(p)).sum())
    if entropy <= 1e-9:
        return max(n, 1)
    return int(np.clip(np.ceil(2.0 * np.log(max(n, 2)) / entropy), 3, 32))


@dataclass
class Period:
    length: int  # symbols per occurrence
    coverage: float  # share of the stream (or of its rare events) that recurs a period away
    evidence: str = "context"  # "context": runs of events recur; "rare": only rare events do
    candidates: list[tuple[int, float]] = field(default_factory=list)

    @property
    def accepted(self) -> bool:
        return self.coverage >= (MIN_CONTEXT_COVERAGE if self.evidence == "context"
                                 else MIN_RARE_RECURRENCE)


NEIGHBOURS = 8  # same-context neighbours kept per sampled position, each side


class Contexts:
    """Positions grouped by equal context, sorted, for "does it recur at i+d?" queries.

    Each sampled position keeps the offsets of its next and previous
    :data:`NEIGHBOURS` same-context positions (adjacent in the sorted keys, so
    cheap to read), which answer nearly every query; only a position whose
    context recurs more than that many times before the queried window needs a
    binary search over all keys (which cost ~9 ms per shift at 1e6 symbols).
    """

    def __init__(self, seq: np.ndarray, min_len: int):
        self.n = n = len(seq)
        self.every = max(1, n // SAMPLE)  # sampled positions: 0, every, 2*every...
        self._cls, self.key = context_groups(seq, min_len, self.every)
        self.pos = self.key % (n + 1)
        sample = np.arange(0, n, self.every)
        # queries sorted by (class, position) stay sorted for every shift: faster lookups
        sample = sample[sample <= n - min_len]  # the last few positions have no full context
        self.sample = sample[np.argsort(self.cls(sample) * (n + 1) + sample, kind="stable")]
        rank = np.searchsorted(self.key, self.cls(self.sample) * (n + 1) + self.sample)
        self._ahead, self._more_ahead = self._neighbours(rank, +1)
        self._behind, self._more_behind = self._neighbours(rank, -1)

    def cls(self, i: np.ndarray) -> np.ndarray:
        """Context class of sampled positions ``i`` (-1: their context occurs once)."""
        return self._cls[i // self.every]

    def _neighbours(self, rank: np.ndarray, way: int) -> tuple[np.ndarray, np.ndarray]:
        """(|offsets| of the sample's next same-context positions that way, sorted, with
        int64 max where there are none; True where more lie beyond the last)."""
        i, m = self.sample, len(self.key)
        big = np.iinfo(np.int64).max
        out = np.full((len(i), NEIGHBOURS), big, np.int64)
        c = self.cls(i)
        alive = (c >= 0) & (m > 0)
        for k in range(1, NEIGHBOURS + 2):
            r = rank + way * k
            ok = alive & (r >= 0) & (r < m)
            rc = np.clip(r, 0, max(m - 1, 0))
            ok[ok] &= (self.key[rc[ok]] - self.pos[rc[ok]]) == c[ok] * (self.n + 1)
            if k > NEIGHBOURS:
                return out, ok
            out[ok, k - 1] = np.abs(self.pos[rc[ok]] - i[ok])
            alive = ok
        return out, alive

    def previous_distance(self) -> np.ndarray:
        """Distance from each repeated context to its previous occurrence."""
        same = (self.key[1:] // (self.n + 1)) == (self.key[:-1] // (self.n + 1))
        return np.diff(self.pos)[same]

    def recurs(self, i: np.ndarray, shift: int, tol: int) -> np.ndarray:
        """True where the context at sampled positions ``i`` occurs again within
        ``i + shift +- tol``."""
        c = self.cls(i)
        base = c * (self.n + 1)
        a, b = i + shift - tol, i + shift + tol
        lo = np.searchsorted(self.key, base + np.clip(a, 0, self.n), "left")
        hi = np.searchsorted(self.key, base + np.clip(b, 0, self.n), "right")
        return (c >= 0) & (hi > lo) & (b >= 0)  # a window before the stream holds nothing

    def _sample_recurs(self, shift: int, tol: int) -> np.ndarray:
        """:meth:`recurs` for the sample, from the neighbour offsets where they decide."""
        lo, hi = abs(shift) - tol, abs(shift) + tol
        if lo <= 0:  # the window holds the position itself: ask the keys
            return self.recurs(self.sample, shift, tol)
        off, more = (self._ahead, self._more_ahead) if shift > 0 else (
            self._behind, self._more_behind)
        hit = _any_in_row((off >= lo) & (off <= hi))
        open_ = np.flatnonzero(more & (off[:, -1] < lo))  # all kept neighbours fall short
        if len(open_):
            hit[open_] = self.recurs(self.sample[open_], shift, tol)
        return hit

    def coverage(self, d: int, tol: int | None = None, multiples: int = 1) -> float:
        """Share of (sampled) positions whose context recurs ~j*d before or after (j <= m)."""
        i = self.sample
        if len(i) == 0:
            return 0.0
        tol = period_tolerance(d) if tol is None else tol
        hit = np.zeros(len(i), bool)
        for j in range(1, multiples + 1):
            hit |= self._sample_recurs(j * d, j * tol) | self._sample_recurs(-j * d, j * tol)
        return float(hit.mean())


def _any_in_row(m: np.ndarray) -> np.ndarray:
    """``m.any(axis=1)`` for rows of :data:`NEIGHBOURS` bools: each row read as one
    uint64 (numpy's reduction over an axis of 8 is ~8x slower; this runs ~300 times
    per period search)."""
    if m.ndim == 2 and m.shape[1] == 8 and m.flags.c_contiguous and m.dtype == np.bool_:
        return m.view(np.uint64).ravel() != 0
    return m.any(axis=1)


def _band_mass(cs: np.ndarray, d: np.ndarray) -> np.ndarray:
    tol = np.maximum(1, np.rint(0.05 * d)).astype(np.int64)
    hi = np.minimum(d + tol, len(cs) - 1)
    lo = d - tol - 1
    return cs[hi] - np.where(lo >= 0, cs[np.maximum(lo, 0)], 0)


def candidate_periods(ctx: Contexts) -> list[int]:
    """Distances at which many contexts recur, best first, plus their divisors."""
    dist = ctx.previous_distance()
    dist = dist[(dist >= 2) & (dist <= ctx.n // 2 + period_tolerance(ctx.n // 2))]
    if len(dist) == 0:
        return []
    hist = np.bincount(dist)
    top = np.argsort(hist, kind="stable")[::-1][: 4 * MAX_CANDIDATES]
    top = top[hist[top] > 0]
    mass = _band_mass(np.cumsum(hist), top)
    chosen: list[int] = []
    for d in top[np.argsort(-mass, kind="stable")].tolist():
        if all(abs(d - c) > period_tolerance(c) for c in chosen):
            chosen.append(int(d))
        if len(chosen) >= MAX_CANDIDATES:
            break
    for c in chosen[:4]:
        for j in range(2, MAX_DIVISOR + 1):
            d = int(round(c / j))
            if d >= 2 and all(abs(d - x) > period_tolerance(x) for x in chosen):
                chosen.append(d)
    return chosen


def choose_period(seq: np.ndarray, progress=None) -> Period | None:
    """The primitive period that best explains ``seq`` as repeats (check ``accepted``).

    Runs of events that recur (suffix-array contexts) are the main evidence.
    When the order of events differs between iterations (several host threads
    launching, sampled traces), only rare events recur; that weaker evidence is
    used when the first finds nothing.
    """
    n = len(seq)
    if n < MIN_EVENTS:
        return None
    ctx = Contexts(seq, significance_length(seq))
    if progress is not None:
        progress.check_cancelled()
    scored = [Period(d, ctx.coverage(d)) for d in candidate_periods(ctx)]
    best = _primitive(scored, ctx.coverage) if scored else None
    if best is not None:
        best.length = _centre(ctx.previous_distance(), best.length)
    if best is None or not best.accepted:
        rare = _rare_period(seq)
        if rare is not None and (best is None or rare.accepted):
            return rare
    return best


def _primitive(scored: list[Period], recheck=None) -> Period:
    """The shortest period that explains (nearly) as much as the best one.

    Multiples of the true period explain as much as it does (a little more, even,
    as their tolerance is wider), shifts that are not multiples explain little;
    so the shortest near-best candidate is the primitive period. Shorter
    candidates are re-measured with the best one's tolerance (at most half their
    length) so that the comparison is fair.
    """
    top = max(scored, key=lambda p: (p.coverage, -p.length))
    best = top
    if top.accepted:
        for p in sorted(scored, key=lambda p: p.length):
            if p.length >= top.length:
                break
            cov = p.coverage
            if (recheck is not None and cov < top.coverage - PRIMITIVE_SLACK
                    and not _tiled(p, scored)):
                # edits can break the nearest repeats but not ones two periods away:
                # count those too, as long as the shift itself explains most of it
                wide = recheck(p.length, None, 2)
                cov = wide if p.coverage >= 0.8 * wide else cov
            if cov >= top.coverage - PRIMITIVE_SLACK:
                best = p
                break
    best.candidates = [(p.length, round(p.coverage, 4))
                       for p in sorted(scored, key=lambda p: -p.coverage)]
    return best


def _tiled(p: Period, scored: list[Period]) -> bool:
    """Whether a shorter candidate that explains at least as much has a multiple within
    ``p``'s tolerance: then ``p`` recurs only because that shorter unit repeats many
    times in a row (an inner loop of short reads tiles any shift near ``p``), and the
    hits two of ``p`` away are another unit's (the step's, when ``2p`` is about it)."""
    tol = period_tolerance(p.length)
    for q in scored:
        if q.length >= p.length or q.coverage < p.coverage:
            continue
        m = max(1, int(round(p.length / q.length)))
        if abs(m * q.length - p.length) <= tol:
            return True
    return False


class RareEvents:
    """Consecutive recurrences of each symbol, for symbols rare enough to mark a period."""

    def __init__(self, seq: np.ndarray):
        self.n = len(seq)
        order = _stable_order(seq)
        sid = seq[order]
        same = sid[1:] == sid[:-1]
        self.count = np.bincount(seq)
        self.gap = np.where(same, np.diff(order), -1)  # to the next occurrence
        self.sym = sid[:-1]
        self.valid = same & (sid[:-1] != 0)

    def distances(self, max_count: int) -> np.ndarray:
        rare = self.valid & (self.count[self.sym] <= max_count)
        return self.gap[rare]

    def recurrence(self, d: int) -> tuple[float, int]:
        """Share of rare-symbol gaps that are ~d, and how many symbols have one."""
        max_count = max(2, int(1.5 * self.n / d))
        rare = self.valid & (self.count[self.sym] <= max_count)
        if not rare.any():
            return 0.0, 0
        hit = rare & (np.abs(self.gap - d) <= period_tolerance(d))
        return float(hit.sum() / rare.sum()), len(np.unique(self.sym[hit]))


def _rare_period(seq: np.ndarray) -> Period | None:
    """Period from rare events alone (their order around them may vary)."""
    rare = RareEvents(seq)
    dist = rare.distances(max(2, len(seq) // 8))
    dist = dist[(dist >= 2) & (dist <= len(seq) // 2 + period_tolerance(len(seq) // 2))]
    if len(dist) == 0:
        return None
    hist = np.bincount(dist)
    top = np.argsort(hist, kind="stable")[::-1][:MAX_CANDIDATES]
    top = top[hist[top] > 0]
    mass = _band_mass(np.cumsum(hist), top)
    scored = []
    for d in top[np.argsort(-mass, kind="stable")].tolist():
        frac, symbols = rare.recurrence(int(d))
        if symbols >= MIN_RARE_SYMBOLS:
            scored.append(Period(int(d), frac, "rare"))
    if not scored:
        return None
    best = _primitive(scored)
    best.length = _centre(dist, best.length)
    return best


def _stable_order(ids: np.ndarray) -> np.ndarray:
    """Stable argsort; small ids go through 16 bits, where numpy uses a radix sort."""
    if len(ids) and 0 <= int(ids.min()) and int(ids.max()) < 65536:
        ids = ids.astype(np.uint16)
    return np.argsort(ids, kind="stable")


def _centre(dist: np.ndarray, d: int) -> int:
    """Median recurrence distance within the tolerance band around ``d``."""
    near = dist[np.abs(dist - d) <= period_tolerance(d)]
    return int(np.median(near)) if len(near) else d


# -- occurrences ---------------------------------------------------------------------------

@dataclass
class Anchors:
    """Symbols that occur once per period at a stable phase, and their positions."""

    period: float  # typical occurrence length in symbols (median anchor gap)
    positions: list[np.ndarray]  # per anchor: sorted symbol indexes
    phase: np.ndarray  # per anchor: fraction 0..1 of the period after the occurrence start
    n: int

    def __len__(self) -> int:
        return len(self.positions)

    def starts(self, shift: float = 0.0) -> np.ndarray:
        """Occurrence starts (symbol index) when the cut sits ``shift`` of a period in.

        Every anchor occurrence votes for the start of the occurrence it is in; an
        occurrence counts when enough distinct anchors agree on its start (random
        events in a warm-up that happen to be anchor symbols do not agree).
        """
        if not self.positions:
            return np.zeros(0, np.int64)
        phases = (self.phase - shift) % 1.0
        phases[phases > 1.0 - 1e-9] = 0.0  # float noise must not push a vote a period back
        votes = np.concatenate([
            pos - ph * self.period for pos, ph in zip(self.positions, phases)
        ])
        voter = np.concatenate([np.full(len(pos), k) for k, pos in enumerate(self.positions)])
        order = np.argsort(votes, kind="stable")
        votes, voter = votes[order], voter[order]
        split = np.flatnonzero(np.diff(votes) > 0.3 * self.period) + 1
        need = max(min(2, len(self.positions)), int(np.ceil(0.5 * len(self.positions))))
        agree = max(2.0, 0.1 * self.period)
        out = _agreed_starts(votes, voter, split, need, agree, len(self.positions))
        return spaced(out, self.period)


def _agreed_starts(votes: np.ndarray, voter: np.ndarray, split: np.ndarray, need: int,
                   agree: float, n_voters: int) -> np.ndarray:
    """Per group of sorted votes: the median of the votes within ``agree`` of the
    group's median, when at least ``need`` distinct voters are among them.

    Vectorised over groups (a Python median per group cost ~30 µs per occurrence,
    so 1e6 events with a period of 2 took half a minute). Votes are sorted, so a
    group's median is its middle element(s) and its close votes are contiguous.
    """
    lo = np.r_[0, split]
    size = np.diff(np.r_[lo, len(votes)])
    big = size >= need
    lo, size = lo[big], size[big]
    if not len(lo):
        return np.zeros(0, np.int64)
    mid = (votes[lo + (size - 1) // 2] + votes[lo + size // 2]) / 2
    group = np.repeat(np.arange(len(lo)), size)
    rows = _ranges(lo, size)
    close = np.abs(votes[rows] - mid[group]) <= agree
    rows, group = rows[close], group[close]
    pairs = np.unique(group.astype(np.int64) * n_voters + voter[rows])
    distinct = np.bincount(pairs // n_voters, minlength=len(lo))
    first = np.searchsorted(group, np.arange(len(lo)))
    count = np.bincount(group, minlength=len(lo))
    ok = (distinct >= need) & (count > 0)
    f, c = first[ok], count[ok]
    med = (votes[rows[f + (c - 1) // 2]] + votes[rows[f + c // 2]]) / 2
    return np.rint(med).astype(np.int64)


def _ranges(lo: np.ndarray, size: np.ndarray) -> np.ndarray:
    """Concatenated ``arange(lo[i], lo[i] + size[i])`` without a Python loop."""
    total = int(size.sum())
    step = np.ones(total, np.int64)
    heads = np.cumsum(size)[:-1]
    step[0] = lo[0]
    step[heads] = lo[1:] - (lo[:-1] + size[:-1] - 1)
    return np.cumsum(step)


def spaced(starts: np.ndarray, period: float) -> np.ndarray:
    """Drop starts closer than half a period to the previous one."""
    if len(starts) < 2:
        return starts
    keep = [int(starts[0])]
    for s in starts[1:].tolist():
        if s - keep[-1] >= 0.5 * period:
            keep.append(s)
    return np.array(keep, np.int64)


def _qgram_ids(seq: np.ndarray, q: int) -> np.ndarray:
    """Id of the q symbols starting at each position (last q-1 positions: -1)."""
    if q == 1:
        return seq.astype(np.int64)
    n = len(seq)
    if n < q:
        return np.full(n, -1, np.int64)
    base = int(seq.max()) + 1
    key = np.zeros(n - q + 1, np.int64)
    for k in range(q):
        key = key * base + seq[k: n - q + 1 + k]
        if k < q - 1 and base ** (k + 2) >= 2**62:
            key = np.unique(key, return_inverse=True)[1].astype(np.int64)
    ids = np.unique(key, return_inverse=True)[1].astype(np.int64)
    return np.r_[ids, np.full(q - 1, -1, np.int64)]


def find_anchors(seq: np.ndarray, period: int) -> Anchors | None:
    """Anchors of ``period`` over single symbols, else over 2- or 4-grams."""
    for q in (1, 2, 4):
        anchors = _anchors_of(_qgram_ids(seq, q), period, seq)
        if anchors is not None:
            return anchors
    return None


def _anchors_of(ids: np.ndarray, period: int, seq: np.ndarray) -> Anchors | None:
    n = len(ids)
    tol = max(1, int(round(0.1 * period)))
    valid = (ids >= 0) & (seq != 0)  # the folded "other" symbol marks nothing
    pos_all = np.flatnonzero(valid)
    order = pos_all[_stable_order(ids[pos_all])]
    sid = ids[order]
    same = sid[1:] == sid[:-1]
    gaps = np.diff(order)
    good = same & (np.abs(gaps - period) <= tol)
    short = same & (gaps < period - tol)
    m = int(ids.max()) + 1 if n else 0
    goodc = np.bincount(sid[1:][good], minlength=m)
    shortc = np.bincount(sid[1:][short], minlength=m)
    quality = goodc - 2 * shortc
    if quality.max(initial=0) < 1:
        return None
    cand = np.flatnonzero((quality >= 0.5 * quality.max()) & (goodc >= 1))
    cand = cand[np.lexsort((shortc[cand], -goodc[cand]))][: 4 * MAX_ANCHORS]
    starts_of = np.searchsorted(sid, cand, side="left")
    ends_of = np.searchsorted(sid, cand, side="right")
    positions = [order[a:b] for a, b in zip(starts_of, ends_of)]
    y0 = positions[0]
    g0 = np.diff(y0)
    ok0 = np.abs(g0 - period) <= tol
    win_start, win_len = y0[:-1][ok0], g0[ok0]
    typical = float(np.median(win_len))
    kept, phases = [], []
    for pos in positions:
        ph = _phase(pos, win_start, win_len)
        if ph is not None:
            kept.append(pos)
            phases.append(ph)
        if len(kept) >= MAX_ANCHORS:
            break
    if not kept:
        return None
    return Anchors(typical, kept, np.array(phases), n)


def _phase(pos: np.ndarray, win_start: np.ndarray, win_len: np.ndarray) -> float | None:
    """Circular mean phase of ``pos`` in the reference windows, if it is stable."""
    idx = np.searchsorted(pos, win_start)
    inside = idx < len(pos)
    idx = np.minimum(idx, len(pos) - 1)
    off = pos[idx] - win_start
    inside &= off < win_len
    if inside.sum() < max(1, 0.5 * len(win_start)):
        return None
    angle = 2 * np.pi * off[inside] / win_len[inside]
    c, s = np.cos(angle).mean(), np.sin(angle).mean()
    if np.hypot(c, s) < 0.9:
        return None
    return float((np.arctan2(s, c) / (2 * np.pi)) % 1.0)
