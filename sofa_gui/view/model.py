"""What the timeline shows: the trace, its draw index, the layout and the view state.

One :class:`TimelineModel` is owned by the :class:`TimelineWidget`; the graphics
items only read it.  Times are float ns relative to the trace start (``t0``),
converted from the int64 trace clock by subtracting first, so they are exact.
Qt-free, so the state transitions can be tested without a display.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..core.trace import Kind, Trace
from ..core.viewport import IntervalPyramid
from .colors import MARKER_FROM, slice_color_ids
from .layout import TimelineLayout
from .lod import TimelineIndex
from .names import short_label

#: Narrowest window: one ns across the view.
MIN_SPAN_NS = 1.0


@dataclass
class Prepared:
    """The expensive part of :meth:`TimelineModel.set_trace`, buildable off the GUI thread."""

    trace: Trace
    index: TimelineIndex


def prepare(trace: Trace) -> Prepared:
    """Build the draw index for ``trace`` (pure numpy; safe in a worker thread)."""
    own, cat = slice_color_ids(trace)
    return Prepared(trace, TimelineIndex(trace, own, cat, MARKER_FROM))


class TimelineModel:
    """Data and view state of one timeline (see the module docstring)."""

    def __init__(self):
        self.trace: Trace | None = None
        self.index: TimelineIndex | None = None
        self.layout: TimelineLayout | None = None
        self.collapsed: set[str] = set()
        self.expanded: set[int] = set()
        self.iter_starts = np.zeros(0)
        self.iter_ends = np.zeros(0)
        self.iter_labels: list[str] = []
        self.x0, self.x1 = 0.0, 1.0
        self.selected = -1
        self.selected_iteration = -1
        self.partners = np.zeros(0, np.int64)
        self.highlight: IntervalPyramid | None = None
        self.version = 0  # bumped whenever what is drawn changes (not the view)
        self._labels: dict[int, str] = {}

    # -- data -----------------------------------------------------------------
    def set_prepared(self, prep: Prepared | None) -> None:
        self.trace = prep.trace if prep else None
        self.index = prep.index if prep else None
        self.collapsed, self.expanded = set(), set()
        self.selected, self.selected_iteration = -1, -1
        self.partners = np.zeros(0, np.int64)
        self.highlight = None
        self.iter_starts, self.iter_ends, self.iter_labels = np.zeros(0), np.zeros(0), []
        self._labels = {}
        self.relayout()
        self.x0, self.x1 = 0.0, self.span

    def relayout(self) -> None:
        if self.trace is None:
            self.layout = None
        else:
            self.layout = TimelineLayout(self.trace.lanes, self.index.row_base,
                                         frozenset(self.collapsed), frozenset(self.expanded))
        self.version += 1

    @property
    def t0(self) -> int:
        return self.index.t0 if self.index else 0

    @property
    def span(self) -> float:
        return self.index.span if self.index else 1.0

    @property
    def total_height(self) -> float:
        return self.layout.total if self.layout else 0.0

    def set_iterations(self, iterations) -> None:
        if iterations is None or self.index is None or len(iterations) == 0:
            self.iter_starts, self.iter_ends, self.iter_labels = np.zeros(0), np.zeros(0), []
        else:
            self.iter_starts = (np.asarray(iterations.starts, np.int64) - self.t0).astype(float)
            self.iter_ends = (np.asarray(iterations.ends, np.int64) - self.t0).astype(float)
            self.iter_labels = list(iterations.labels)
        if self.selected_iteration >= len(self.iter_starts):
            self.selected_iteration = -1
        self.version += 1

    def set_highlight(self, indexes) -> None:
        if indexes is None or self.trace is None or len(indexes) == 0:
            self.highlight = None
        else:
            self.highlight = self.index.subset(self.trace, np.asarray(indexes))
        self.version += 1

    def toggle_group(self, group: str) -> None:
        self.collapsed.symmetric_difference_update({group})
        self.relayout()

    def toggle_lane(self, lane: int) -> None:
        """Show all nesting rows of a deep lane, or cap them again."""
        self.expanded.symmetric_difference_update({int(lane)})
        self.relayout()

    def row_hidden_by_cap(self, row: int) -> int:
        """Lane whose depth cap merges ``row`` into its last shown row, else -1."""
        lane = int(np.searchsorted(self.index.row_base, row, side="right") - 1)
        depth = row - int(self.index.row_base[lane])
        line_depth = int(self.trace.lanes.depth[lane])
        capped = lane not in self.expanded and line_depth > self.layout.max_rows
        return lane if capped and depth >= self.layout.max_rows else -1

    # -- slices -----------------------------------------------------------------
    def valid_slice(self, index) -> bool:
        return self.trace is not None and index is not None and 0 <= int(index) < len(
            self.trace.slices)

    def slice_extent(self, index: int) -> tuple[float, float]:
        sl = self.trace.slices
        s = float(sl.start[index] - self.t0)
        return s, s + float(sl.dur[index])

    def slice_row(self, index: int) -> int:
        sl = self.trace.slices
        return int(self.index.row_base[sl.lane[index]] + sl.depth[index])

    def row_span(self, row: int) -> tuple[float, float] | None:
        """(top, height) of a row in row units; a hidden row maps to its lane's line."""
        top = self.layout.row_top[row]
        if np.isnan(top):
            lane = int(np.searchsorted(self.index.row_base, row, side="right") - 1)
            ltop = self.layout.lane_top[lane]
            return None if np.isnan(ltop) else (float(ltop), 1.0)
        return float(top), float(self.layout.row_height[row])

    def select(self, index: int) -> None:
        self.selected = int(index)
        if index >= 0 and self.trace is not None and len(self.trace.flows):
            self.partners = self.trace.flows.partners(int(index))
        else:
            self.partners = np.zeros(0, np.int64)

    def label_of(self, index: int) -> str:
        """Short text drawn inside a slice (full name in the tooltip)."""
        name_id = int(self.trace.slices.name[index])
        text = self._labels.get(name_id)
        if text is None:
            kernelish = int(self.trace.slices.kind[index]) in (Kind.KERNEL, Kind.COMMUNICATION)
            text = self._labels[name_id] = short_label(self.trace.names[name_id], kernelish)
        return text

    def slice_at(self, x: float, y: float, tol: float) -> int:
        """Slice under (x rel ns, y row units), else the longest within ``tol`` ns; -1."""
        if self.layout is None:
            return -1
        best, best_dur = -1, -1.0
        for row in self.layout.row_at(y).tolist():
            hit = self.index.slices.hit(row, x, tol)
            if hit >= 0:
                dur = float(self.trace.slices.dur[hit])
                if dur > best_dur:
                    best, best_dur = hit, dur
        return best

    def iteration_at(self, x: float) -> int:
        i = int(np.searchsorted(self.iter_starts, x, side="right")) - 1
        return i if 0 <= i < len(self.iter_starts) and x < self.iter_ends[i] else -1
