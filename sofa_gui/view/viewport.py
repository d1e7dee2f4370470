"""Level of detail for timelines: what to draw in a window, at a cost of pixels, not events.

Slices are organised in *rows* (one per lane and nesting depth).  Within a row
the intervals are disjoint and sorted, which the builder guarantees, so a window
query is two binary searches per row.  :class:`IntervalPyramid` adds coarser
levels where intervals starting in one time bucket are merged into one
pseudo-interval (extent of the bucket's intervals, represented by the longest),
so a zoomed-out frame reads about two entries per pixel column per row.
:meth:`IntervalPyramid.blocks` then snaps the entries to pixel columns, folds
everything narrower than a pixel into one block per row per column and merges
runs of equal colour.  Counters get the same treatment with min/max envelopes
(:class:`CounterPyramid`), so spikes never vanish when decimated.

Times here are float64 ns *relative to the trace start* (exact below 2**53 ns).
Nothing here imports Qt; the Qt items only turn the blocks into rectangles.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: Max raw entries a frame may read before a pyramid level is used instead.
RAW_BUDGET = 150_000
#: Target mean entries per (row, bucket) at the finest pyramid level.
LEVEL0_FILL = 4
#: Stop adding levels when a level has this few entries per row.
TOP_LEVEL_PER_ROW = 64
#: A block shows its slice's own colour from this width (px); narrower ones show
#: their category colour, so merged sub-pixel runs read as one calm band in the
#: category of the block's longest interval.
NAME_COLOR_PX = 2.0
#: No presence marker (see :class:`Markers`).
NO_MARKER = 255


@dataclass
class Level:
    """One resolution: per row, sorted disjoint ``[s, e)`` entries, each carrying its
    representative (longest) interval's width, caller id and colours."""

    s: np.ndarray  # float64
    e: np.ndarray  # float64
    w: np.ndarray | None  # float32 width of the representative (None: raw, e - s)
    ref: np.ndarray  # caller's id of the representative
    color: np.ndarray  # uint8 own colour of the representative
    cat: np.ndarray  # uint8 category of the representative
    top: np.ndarray  # uint8 highest category id among the merged intervals
    off: np.ndarray  # int64, n_rows + 1 row offsets
    bucket: float  # ns per bucket; 0 for the raw level

    @property
    def nbytes(self) -> int:
        top = self.top if self.top is not self.cat else None
        arrays = (self.s, self.e, self.w, self.ref, self.color, self.cat, top, self.off)
        return sum(a.nbytes for a in arrays if a is not None)


@dataclass
class Blocks:
    """Drawable blocks of one frame, in pixel columns ``[c0, c1]`` (inclusive)."""

    slot: np.ndarray  # int64 index into the ``rows`` argument of the query
    c0: np.ndarray  # int64
    c1: np.ndarray  # int64
    color: np.ndarray  # uint8 palette index to paint with
    ref: np.ndarray  # int64 caller's id of the representative interval
    ref_px: np.ndarray  # float64 width in pixels of the representative interval
    level: int  # -1 raw, else pyramid level used
    markers: Markers | None = None

    def __len__(self) -> int:
        return len(self.c0)


@dataclass
class Markers:
    """Pixel columns where an important category hides inside a block of another one.

    A merged block takes the category of its longest interval (honest proportions);
    a marker says "a copy / sync / collective is also here", so those never vanish
    when zoomed out (the slice analogue of a counter's min/max envelope).  Only
    categories ``>= marker_from`` (see :class:`IntervalPyramid`) get markers.
    """

    slot: np.ndarray
    c0: np.ndarray
    c1: np.ndarray
    color: np.ndarray  # uint8 category id

    def __len__(self) -> int:
        return len(self.c0)


def _empty_markers() -> Markers:
    z = np.zeros(0, np.int64)
    return Markers(z, z, z, np.zeros(0, np.uint8))


def _empty_blocks(level: int = -1) -> Blocks:
    z = np.zeros(0, np.int64)
    return Blocks(z, z, z, np.zeros(0, np.uint8), z, np.zeros(0), level, _empty_markers())


def _row_offsets(row: np.ndarray, n_rows: int) -> np.ndarray:
    return np.searchsorted(row, np.arange(n_rows + 1)).astype(np.int64)


def _group_starts(s: np.ndarray, off: np.ndarray, bucket: float) -> np.ndarray:
    """First position of each (row, bucket) group; rows never share a group."""
    n = len(s)
    if n == 0:
        return np.zeros(0, np.int64)
    b = np.floor(s / bucket)
    brk = np.empty(n, bool)
    brk[0] = True
    np.not_equal(b[1:], b[:-1], out=brk[1:])
    inner = off[1:-1]
    brk[inner[inner < n]] = True
    return np.flatnonzero(brk)


def _argmax_per_group(w: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Position of the first maximum of ``w`` in each contiguous group."""
    counts = np.diff(np.r_[starts, len(w)])
    wmax = np.maximum.reduceat(w, starts)
    hit = np.flatnonzero(w == np.repeat(wmax, counts))
    group = np.searchsorted(starts, hit, side="right") - 1
    first = np.r_[True, group[1:] != group[:-1]]
    return hit[first]


def _ranges(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Concatenation of ``arange(lo[i], hi[i])`` without a Python loop."""
    n = np.maximum(hi - lo, 0)
    total = int(n.sum())
    if total == 0:
        return np.zeros(0, np.int64)
    keep = n > 0
    lo, n = lo[keep], n[keep]
    step = np.ones(total, np.int64)
    ends = np.cumsum(n)
    step[0] = lo[0]
    step[ends[:-1]] = lo[1:] - (lo[:-1] + n[:-1] - 1)
    return np.cumsum(step)


class IntervalPyramid:
    """Rows of disjoint intervals plus merged coarser levels; see the module docstring.

    Parameters
    ----------
    row, s, e, ref:
        One entry per interval: row id, start and end (relative ns) and the
        caller's id (e.g. the trace slice index).  Entries must be sorted by
        ``s`` (rows are sorted here, stably) and disjoint within a row.
    colour, cat:
        Palette index of the interval's own colour and of its category colour
        (used when it is drawn narrower than :data:`NAME_COLOR_PX`).
    n_rows:
        Number of rows; ids must be in ``[0, n_rows)``.
    marker_from:
        Category ids from this one up are important: where one is merged into a
        block of a lower category, :meth:`blocks` reports a :class:`Markers` column.
    """

    def __init__(self, row, s, e, ref, color, n_rows: int, span: float | None = None,
                 cat=None, marker_from: int = NO_MARKER):
        row = np.asarray(row)
        order = np.argsort(_compact_ints(row, n_rows), kind="stable")
        self.n_rows = int(n_rows)
        s = np.ascontiguousarray(np.asarray(s, np.float64)[order])
        e = np.ascontiguousarray(np.asarray(e, np.float64)[order])
        color = np.asarray(color, np.uint8)[order]
        cat = color if cat is None else np.asarray(cat, np.uint8)[order]
        off = _row_offsets(row[order], self.n_rows)
        self.marker_from = int(marker_from)
        self.levels = [Level(s, e, None, np.asarray(ref)[order], color, cat, cat, off, 0.0)]
        if span is None:
            span = float(e.max()) if len(e) else 1.0
        self.span = max(float(span), 1.0)
        self._build_levels()

    def __len__(self) -> int:
        return len(self.levels[0].s)

    @property
    def raw(self) -> Level:
        return self.levels[0]

    @property
    def nbytes(self) -> int:
        return sum(lv.nbytes for lv in self.levels)

    # -- build ----------------------------------------------------------------
    def _build_levels(self) -> None:
        raw = self.raw
        n = len(raw.s)
        busy_rows = max(int(np.count_nonzero(np.diff(raw.off))), 1)
        if n <= busy_rows * TOP_LEVEL_PER_ROW:
            return
        buckets = max(n / (LEVEL0_FILL * busy_rows), 1.0)
        bucket = self.span / 2.0 ** np.ceil(np.log2(buckets))
        src = raw
        src_w = (raw.e - raw.s).astype(np.float32)
        while True:
            starts = _group_starts(src.s, src.off, bucket)
            if len(starts) >= 0.9 * len(src.s) and bucket < self.span:
                bucket *= 2  # hardly anything merges at this width: go coarser first
                continue
            ends = np.r_[starts[1:], len(src.s)] - 1
            best = _argmax_per_group(src_w, starts)
            lv = Level(src.s[starts], src.e[ends], src_w[best], src.ref[best], src.color[best],
                       src.cat[best], np.maximum.reduceat(src.top, starts),
                       np.searchsorted(starts, src.off), bucket)
            self.levels.append(lv)
            if len(starts) <= busy_rows * TOP_LEVEL_PER_ROW or bucket >= self.span:
                break
            src, src_w = lv, lv.w
            bucket *= 2

    # -- queries ----------------------------------------------------------------
    def choose_level(self, rows, x0: float, x1: float, pxw: float) -> int:
        """Finest level whose buckets fit in a pixel; raw while it stays within budget."""
        k = 0
        for i, lv in enumerate(self.levels[1:], start=1):
            if lv.bucket <= pxw:
                k = i
        if k == 0 and len(self.levels) > 1:
            lo, hi = self._window(self.raw, rows, x0, x1)
            if int(np.maximum(hi - lo, 0).sum()) > RAW_BUDGET:
                k = 1
        return k

    def _window(self, lv: Level, rows, x0: float, x1: float):
        """Per row, the entry range that can overlap ``[x0, x1]``."""
        rows = np.asarray(rows, np.int64)
        lo = np.empty(len(rows), np.int64)
        hi = np.empty(len(rows), np.int64)
        s, e, off = lv.s, lv.e, lv.off
        for i_row, r in enumerate(rows.tolist()):
            a, b = int(off[r]), int(off[r + 1])
            if a == b:
                lo[i_row] = hi[i_row] = a
                continue
            seg = s[a:b]
            # rows are disjoint: only the entry before x0 can still reach into the window
            i = max(int(seg.searchsorted(x0, "right")) - 1, 0)
            if i + 1 < b - a and e[a + i] <= x0 and seg[i] < x0:
                i += 1  # it ends before the window: skip it
            lo[i_row] = a + i
            hi[i_row] = a + int(seg.searchsorted(x1, "left"))
        return lo, hi

    def blocks(self, rows, x0: float, x1: float, pxw: float, level: int | None = None) -> Blocks:
        """Blocks covering ``[x0, x1)`` at ``pxw`` ns per pixel for the given rows."""
        rows = np.asarray(rows, np.int64)
        if len(rows) == 0 or len(self) == 0 or not (x1 > x0 and pxw > 0):
            return _empty_blocks()
        k = self.choose_level(rows, x0, x1, pxw) if level is None else level
        lv = self.levels[k]
        lo, hi = self._window(lv, rows, x0, x1)
        n = np.maximum(hi - lo, 0)
        if not n.any():
            return _empty_blocks(k - 1)
        spans = [(a, b) for a, b in zip(lo.tolist(), hi.tolist()) if b > a]
        s = np.concatenate([lv.s[a:b] for a, b in spans])  # slices copy at memcpy speed
        e = np.concatenate([lv.e[a:b] for a, b in spans])
        first = np.cumsum(n) - n  # position of each row's first entry
        kept, c0, c1 = _fold_columns(s, e, first[n > 0], x0, x1, pxw)
        # entry positions -> rows and level positions, only for the blocks drawn
        slot = np.searchsorted(first, kept, side="right") - 1  # empty rows share a start
        gidx = lo[slot] + (kept - first[slot])
        w = (e[kept] - s[kept]) if lv.w is None else lv.w[gidx].astype(np.float64)
        ref_px = w / pxw
        own = ref_px >= NAME_COLOR_PX
        cat = lv.cat[gidx]
        color = np.where(own, lv.color[gidx], cat)
        markers = self._markers(lv, spans, kept, slot, c1, cat)
        b = _merge_runs(slot, c0, c1, color, lv.ref[gidx].astype(np.int64), ref_px, own, k - 1)
        b.markers = markers
        return b

    def _markers(self, lv: Level, spans, kept, slot, c1, cat) -> Markers:
        """Last columns of blocks that swallowed a more important category."""
        if self.marker_from >= NO_MARKER:
            return _empty_markers()
        top = np.concatenate([lv.top[a:b] for a, b in spans])
        top = np.maximum.reduceat(top, kept) if len(kept) < len(top) else top[kept]
        hit = np.flatnonzero((top > cat) & (top >= self.marker_from))
        if not len(hit):
            return _empty_markers()
        slot, col, color = slot[hit], c1[hit], top[hit]
        join = np.zeros(len(col), bool)
        join[1:] = (slot[1:] == slot[:-1]) & (col[1:] == col[:-1] + 1) & (
            color[1:] == color[:-1])
        heads = np.flatnonzero(~join)
        tails = np.r_[heads[1:], len(col)] - 1
        return Markers(slot[heads], col[heads], col[tails], color[heads])

    def hit(self, row: int, x: float, tol: float) -> int:
        """Caller's id of the interval at ``x`` in ``row`` (else the longest within
        ``tol``), or -1."""
        if not 0 <= row < self.n_rows:
            return -1
        raw = self.raw
        a, b = int(raw.off[row]), int(raw.off[row + 1])
        if a == b:
            return -1
        s, e = raw.s[a:b], raw.e[a:b]
        i = int(s.searchsorted(x, "right")) - 1
        if i >= 0 and s[i] <= x < max(e[i], s[i] + 1e-9):
            return int(raw.ref[a + i])
        lo = max(int(s.searchsorted(x - tol, "right")) - 1, 0)
        hi = int(s.searchsorted(x + tol, "right"))
        if hi <= lo:
            return -1
        ss, ee = s[lo:hi], e[lo:hi]
        near = np.flatnonzero((ee >= x - tol) & (ss <= x + tol))
        if not len(near):
            return -1
        best = near[np.argmax((ee - ss)[near])]
        return int(raw.ref[a + lo + best])


def _compact_ints(row: np.ndarray, n_rows: int) -> np.ndarray:
    """Smallest int dtype for the row ids, so the stable sort can be a radix sort."""
    if n_rows < 2**15:
        return row.astype(np.int16, copy=False)
    return row.astype(np.int32, copy=False)


def _fold_columns(s, e, row_first, x0, x1, pxw):
    """Snap entries to pixel columns and fold each sub-pixel one into the block of its
    predecessor's last column.  Returns (kept positions, c0, c1).

    ``row_first`` are the positions where each (non-empty) row starts.  A folded
    entry lies inside one column, so it is narrower than a pixel: the kept entry is
    always the longest of its block.  Every entry must reach into the window
    (``_window`` guarantees it), so columns are >= 0 and truncation is floor.
    """
    width = int(np.ceil((x1 - x0) / pxw - 1e-9))
    inv = 1.0 / pxw
    f = s - x0
    f *= inv
    np.clip(f, 0.0, width - 1.0, out=f)
    c0 = f.astype(np.int64)
    g = e - (x0 + 1e-9 * pxw)  # last column touched: ceil(x) - 1 == trunc(x - tiny)
    g *= inv
    np.clip(g, 0.0, width - 1.0, out=g)
    c1 = g.astype(np.int64)
    np.maximum(c1, c0, out=c1)
    prev_c1 = np.empty_like(c1)
    prev_c1[1:] = c1[:-1]
    prev_c1[row_first] = -1
    prev_c1 += 1
    np.maximum(c0, prev_c1, out=c0)
    kept = np.flatnonzero(c0 <= c1)
    if len(kept) == len(c0):
        return kept, c0, c1
    return kept, c0[kept], c1[kept]


def _merge_runs(slot, c0, c1, color, ref, ref_px, own, level) -> Blocks:
    """Merge runs of adjacent category-coloured blocks into one rectangle each."""
    join = np.zeros(len(c0), bool)
    join[1:] = ((slot[1:] == slot[:-1]) & (c0[1:] == c1[:-1] + 1)
                & (color[1:] == color[:-1]) & ~own[1:] & ~own[:-1])
    if join.any():
        heads = np.flatnonzero(~join)
        tails = np.r_[heads[1:], len(c0)] - 1
        slot, c0, c1 = slot[heads], c0[heads], c1[tails]
        color, ref, ref_px = color[heads], ref[heads], ref_px[heads]
    return Blocks(slot, c0, c1, color, ref, ref_px, level)


# -- counters -------------------------------------------------------------------------------
@dataclass
class Envelope:
    """Per pixel column min/max of one counter series (NaN-free, only covered columns)."""

    col: np.ndarray  # int64 pixel columns, increasing
    vmin: np.ndarray  # float64
    vmax: np.ndarray  # float64


class CounterPyramid:
    """One counter series as steps ``[t_i, t_{i+1})`` with min/max levels."""

    def __init__(self, t, v, end: float):
        self.t = np.ascontiguousarray(np.asarray(t, np.float64))
        self.v = np.ascontiguousarray(np.asarray(v, np.float64))
        nxt = np.r_[self.t[1:], max(float(end), float(self.t[-1]) if len(self.t) else 0.0)]
        self.levels = [(self.t, nxt, self.v, self.v, 0.0)]
        finite = self.v[np.isfinite(self.v)]
        self.vmin = float(finite.min()) if len(finite) else 0.0
        self.vmax = float(finite.max()) if len(finite) else 1.0
        self._build(max(float(end), 1.0))

    def _build(self, span: float) -> None:
        n = len(self.t)
        if n <= 4 * TOP_LEVEL_PER_ROW:
            return
        bucket = span / 2.0 ** np.ceil(np.log2(max(n / LEVEL0_FILL, 1.0)))
        s, e, lo, hi, _ = self.levels[0]
        off = np.array([0, n], np.int64)
        while len(s) > 4 * TOP_LEVEL_PER_ROW and bucket < span * 2:
            starts = _group_starts(s, off, bucket)
            ends = np.r_[starts[1:], len(s)] - 1
            s, e = s[starts], e[ends]
            lo, hi = np.fmin.reduceat(lo, starts), np.fmax.reduceat(hi, starts)
            self.levels.append((s, e, lo, hi, bucket))
            off = np.array([0, len(s)], np.int64)
            bucket *= 2

    def envelope(self, x0: float, x1: float, pxw: float) -> Envelope:
        """Min/max per pixel column over ``[x0, x1)``."""
        empty = Envelope(np.zeros(0, np.int64), np.zeros(0), np.zeros(0))
        if len(self.t) == 0 or not (x1 > x0 and pxw > 0):
            return empty
        k = 0
        for i, lv in enumerate(self.levels[1:], start=1):
            if lv[4] <= pxw:
                k = i
        s, e, lo, hi, _ = self.levels[k]
        a = max(int(s.searchsorted(x0, "right")) - 1, 0)
        b = int(s.searchsorted(x1, "right"))
        if b <= a:
            return empty
        width = int(np.ceil((x1 - x0) / pxw - 1e-9))
        c0 = np.floor(np.clip((s[a:b] - x0) / pxw, -2, width + 1)).astype(np.int64)
        c1f = np.clip((e[a:b] - x0) / pxw, -2, width + 1)
        c1 = np.maximum(np.ceil(c1f).astype(np.int64) - 1, c0)
        np.clip(c0, 0, width - 1, out=c0)
        np.clip(c1, 0, width - 1, out=c1)
        keep = (e[a:b] >= x0) & np.isfinite(lo[a:b])
        c0, c1, lo, hi = c0[keep], c1[keep], lo[a:b][keep], hi[a:b][keep]
        if len(c0) == 0:
            return empty
        n = c1 - c0 + 1
        col = _ranges(c0, c1 + 1)
        lo_r, hi_r = np.repeat(lo, n), np.repeat(hi, n)
        heads = np.flatnonzero(np.r_[True, col[1:] != col[:-1]])
        return Envelope(col[heads], np.fmin.reduceat(lo_r, heads), np.fmax.reduceat(hi_r, heads))


# -- view windows ----------------------------------------------------------------------------
def clamp_window(x0: float, x1: float, lo: float, hi: float, min_span: float):
    """``[x0, x1]`` shifted/shrunk into ``[lo, hi]`` and at least ``min_span`` wide."""
    full = max(hi - lo, min_span)
    span = min(max(x1 - x0, min_span), full)
    mid = (x0 + x1) / 2
    a = mid - span / 2
    a = min(max(a, lo), lo + full - span)
    return a, a + span


def zoom_window(x0, x1, center, factor, lo, hi, min_span):
    """Scale the window by ``factor`` (< 1 zooms in) keeping ``center`` fixed on screen."""
    span = x1 - x0
    new = min(max(span * factor, min_span), max(hi - lo, min_span))
    frac = 0.5 if span <= 0 else (center - x0) / span
    a = center - frac * new
    a = min(max(a, lo), max(hi - new, lo))
    return a, a + new


def pan_window(x0, x1, dx, lo, hi):
    """Move the window by ``dx`` ns, stopping at the trace ends."""
    span = x1 - x0
    a = min(max(x0 + dx, lo), max(hi - span, lo))
    return a, a + span
