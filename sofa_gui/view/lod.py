"""The timeline's draw index of a trace: rows of (lane, depth) in LOD pyramids.

Pure numpy (no Qt objects), so :func:`sofa_gui.qt.timeline.prepare` can build it in
a worker thread; the LOD machinery itself lives in :mod:`sofa_gui.view.viewport`.
"""

from __future__ import annotations

import numpy as np

from .viewport import NO_MARKER, CounterPyramid, IntervalPyramid


class TimelineIndex:
    """Everything a timeline view needs to draw ``trace`` fast, built once per trace.

    Rows are numbered lane by lane (``row_base[lane] + depth``).  Building is
    pure numpy (about a second per 10M slices), so it can run in a worker thread.
    """

    def __init__(self, trace, color: np.ndarray, cat: np.ndarray | None = None,
                 marker_from: int = NO_MARKER):
        sl, lanes = trace.slices, trace.lanes
        self.t0 = int(trace.start_ns)
        self.span = float(max(trace.end_ns - self.t0, 1))
        depth = np.maximum(np.asarray(lanes.depth, np.int64), 1)
        self.row_base = np.r_[0, np.cumsum(depth)].astype(np.int64)
        self.n_rows = int(self.row_base[-1])
        n = len(sl)
        self.color = np.asarray(color, np.uint8)
        self.cat = self.color if cat is None else np.asarray(cat, np.uint8)
        self.marker_from = int(marker_from)
        ref = np.arange(n, dtype=np.int32 if n < 2**31 else np.int64)
        self.slices = IntervalPyramid(
            self.rows_of(trace, ref), (sl.start - self.t0).astype(np.float64),
            (sl.start - self.t0 + sl.dur).astype(np.float64), ref, self.color, self.n_rows,
            self.span, cat=self.cat, marker_from=self.marker_from)
        self.counters = self._counter_pyramids(trace)

    def rows_of(self, trace, idx: np.ndarray) -> np.ndarray:
        """Row id of each slice in ``idx``."""
        sl = trace.slices
        return (self.row_base[sl.lane[idx]] + sl.depth[idx]).astype(np.int32)

    def _counter_pyramids(self, trace) -> list[CounterPyramid]:
        c = trace.counters
        n_series = len(c.table.name)
        order = np.argsort(c.series, kind="stable")
        bounds = np.searchsorted(c.series[order], np.arange(n_series + 1))
        out = []
        for i in range(n_series):
            sel = order[bounds[i]:bounds[i + 1]]
            out.append(CounterPyramid((c.time[sel] - self.t0).astype(np.float64), c.value[sel],
                                      self.span))
        return out

    def subset(self, trace, idx: np.ndarray) -> IntervalPyramid:
        """Index of a subset of slices (e.g. search matches), same rows and colours."""
        idx = np.unique(np.asarray(idx, np.int64))
        idx = idx[(idx >= 0) & (idx < len(trace.slices))]
        sl = trace.slices
        s = (sl.start[idx] - self.t0).astype(np.float64)
        return IntervalPyramid(self.rows_of(trace, idx), s, s + sl.dur[idx], idx,
                               self.color[idx], self.n_rows, self.span, cat=self.cat[idx],
                               marker_from=self.marker_from)
