"""What the timeline shows: the trace, its draw index, the layout, and the view state.

One :class:`TimelineModel` is owned by the :class:`TimelineWidget`; the graphics
items only read it. The view state (window, selection, collapsed groups, ...) is a
:class:`~.state.ViewState` the model reads (in the app the session owns it, and
only the session writes the trace extent and iterations into it).  Times
are float ns relative to the trace start (``t0``), converted from the int64 trace
clock by subtracting first, so they are exact.
Qt-free, so the state transitions can be tested without a display.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..core.analysis.figures import device_window_texts
from ..core.analysis.results import Iterations
from ..core.trace import Kind, Trace
from .colors import MARKER_FROM, slice_color_ids
from .layout import HEADER_UNITS, TimelineLayout
from .lod import TimelineIndex
from .names import short_label
from .state import MIN_SPAN_NS, Change, ViewState
from .viewport import IntervalPyramid

__all__ = ["MIN_SPAN_NS", "Prepared", "TimelineModel", "prepare"]


@dataclass
class IterationMarks:
    """What to say about iterations beyond their span: warm-up, periodic extras and the
    device window (a second, labelled number: the duration stays the step's own)."""

    warmup: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))
    extra: list[str] = field(default_factory=list)  # per iteration: extra work's name or ""
    device: list[str] = field(default_factory=list)  # per iteration: "device 368 ms, ..." or ""

    @classmethod
    def of(cls, iterations, n: int) -> IterationMarks:
        if iterations is None or n == 0:
            return cls()
        warm = getattr(iterations, "warmup", None)
        warm = np.zeros(n, bool) if warm is None else np.asarray(warm, bool)[:n]
        extra = [""] * n
        for x in getattr(iterations, "periodic_extras", []) or []:
            for i in x.iterations:
                if 0 <= i < n:
                    extra[i] = x.name
        device = (device_window_texts(iterations)[:n]
                  if isinstance(iterations, Iterations) else [""] * n)
        return cls(warm, extra, device)

    def device_of(self, i: int) -> str:
        """``device 368 ms, ends 158 ms after the step`` ("" when the device keeps up)."""
        return self.device[i] if 0 <= i < len(self.device) else ""

    def is_warmup(self, i: int) -> bool:
        return 0 <= i < len(self.warmup) and bool(self.warmup[i])

    def extra_of(self, i: int) -> str:
        return self.extra[i] if 0 <= i < len(self.extra) else ""

    def short_extra(self, i: int) -> str:
        """A few words for the extra work of iteration ``i`` (table cells, strip)."""
        name = self.extra_of(i)
        if name.startswith("forward without backward"):
            return "evaluation?"
        if name.startswith("host time outside"):
            return "untraced host work"
        return name.split(" / ")[0][:40]


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
    """Data and draw state of one timeline (see the module docstring)."""

    def __init__(self, state: ViewState | None = None, owns_state: bool | None = None):
        # the trace extent and iterations in the view state are written by its owner: the
        # app's Session for the view it hands over, else this model (default: when it
        # makes the state itself)
        self._owns_state = state is None if owns_state is None else owns_state
        self.state = state or ViewState()
        self.trace: Trace | None = None
        self.index: TimelineIndex | None = None
        self.layout: TimelineLayout | None = None
        self.iter_labels: list[str] = []
        self.iter_marks = IterationMarks()
        self.partners = np.zeros(0, np.int64)
        self.highlight: IntervalPyramid | None = None
        self.version = 0  # bumped whenever what is drawn changes (not the view)
        self._labels: dict[int, str] = {}
        self.state.subscribe(self._on_state)

    def _on_state(self, change: Change) -> None:
        """Derived draw data follows the view state (before any widget redraws)."""
        if change is Change.LAYOUT:
            self.relayout()
        elif change is Change.SLICE:
            self.update_partners()
        elif change is Change.HIGHLIGHTS:
            self.set_highlight(self.state.highlights)

    # -- the view state, read through (one copy: ``state``) ------------------------------
    x0 = property(lambda self: self.state.x0)
    x1 = property(lambda self: self.state.x1)
    selected = property(lambda self: self.state.selected_slice)
    selected_iteration = property(lambda self: self.state.selected_iteration)
    collapsed = property(lambda self: self.state.collapsed)
    expanded = property(lambda self: self.state.expanded)
    group_order = property(lambda self: self.state.group_order)
    pinned = property(lambda self: self.state.pinned)
    iter_starts = property(lambda self: self.state.iter_starts)
    iter_ends = property(lambda self: self.state.iter_ends)

    # -- data -----------------------------------------------------------------
    def set_prepared(self, prep: Prepared | None) -> None:
        self.trace = prep.trace if prep else None
        self.index = prep.index if prep else None
        self.partners = np.zeros(0, np.int64)
        self.highlight = None
        self.iter_labels = []
        self.iter_marks = IterationMarks()
        self._labels = {}
        if self._owns_state:
            n = len(self.trace.slices) if self.trace is not None else 0
            self.state.set_trace(self.t0, self.span, n)
        self.relayout()

    def relayout(self) -> None:
        if self.trace is None:
            self.layout = None
        else:
            self.layout = TimelineLayout(self.trace.lanes, self.index.row_base,
                                         frozenset(self.collapsed), frozenset(self.expanded),
                                         group_order=tuple(self.group_order),
                                         pinned=tuple(self.pinned))
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
        empty = iterations is None or self.index is None or len(iterations) == 0
        if self._owns_state:
            self.state.set_iterations(*(([], []) if empty else (iterations.starts,
                                                                 iterations.ends)))
        self.iter_labels = [] if empty else list(iterations.labels)
        self.set_iteration_marks(iterations)

    def set_iteration_marks(self, iterations) -> None:
        """New warm-up / extra marks for the iterations shown (the analysis's final
        warm-up): the bands, the view state and the selection stay."""
        self.iter_marks = IterationMarks.of(iterations, len(self.iter_starts))
        self.version += 1

    def set_highlight(self, indexes) -> None:
        if indexes is None or self.trace is None or len(indexes) == 0:
            self.highlight = None
        else:
            self.highlight = self.index.subset(self.trace, np.asarray(indexes))
        self.version += 1

    def groups(self) -> list[str]:
        """Group headers top to bottom, as drawn."""
        return list(self.layout.groups) if self.layout is not None else []

    def move_group(self, group: str, before: str | None) -> None:
        """Drag a group header: put ``group`` just above ``before`` (None: at the end)."""
        groups = self.groups()
        if group not in groups:
            return
        order = [g for g in groups if g != group]
        order.insert(order.index(before) if before in order else len(order), group)
        self.state.set_tracks(order, self.pinned)

    def set_order(self, order, pinned) -> None:
        """Restore a remembered order (names not in this trace are ignored)."""
        have = set(self.groups())
        self.state.set_tracks([g for g in order if g in have], [g for g in pinned if g in have])

    def row_hidden_by_cap(self, row: int) -> int:
        """Lane whose depth cap merges ``row`` into its last shown row, else -1."""
        lane = int(np.searchsorted(self.index.row_base, row, side="right") - 1)
        depth = row - int(self.index.row_base[lane])
        line_depth = int(self.trace.lanes.depth[lane])
        capped = lane not in self.expanded and line_depth > self.layout.max_rows
        return lane if capped and depth >= self.layout.max_rows else -1

    # -- lanes -------------------------------------------------------------------
    def _lane_box(self) -> tuple[np.ndarray, np.ndarray]:
        """(top, bottom) of every lane in row units; a collapsed lane spans its header."""
        lay = self.layout
        top = lay.lane_top
        height = np.where(lay.lane_height > 0, lay.lane_height, HEADER_UNITS)
        return top, top + height

    def lanes_between(self, y0: float, y1: float) -> np.ndarray:
        """Lane ids whose line overlaps ``[y0, y1]`` (collapsed groups: all their lanes)."""
        if self.layout is None:
            return np.zeros(0, np.int64)
        top, bottom = self._lane_box()
        return np.flatnonzero(~np.isnan(top) & (bottom > y0) & (top < y1))

    def lanes_extent(self, lanes) -> tuple[float, float]:
        """Vertical extent (row units) covering ``lanes``."""
        top, bottom = self._lane_box()
        ids = np.asarray(lanes, np.int64)
        ids = ids[~np.isnan(top[ids])] if len(ids) else ids
        if not len(ids):
            return 0.0, 0.0
        return float(top[ids].min()), float(bottom[ids].max())

    # -- slices -----------------------------------------------------------------
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

    def update_partners(self) -> None:
        """Flow partners of the selected slice (drawn with it)."""
        index = self.selected
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
