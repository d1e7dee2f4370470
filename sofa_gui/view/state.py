"""ViewState: what the user is looking at, held once and changed only through intents.

One object per open trace (the app's :class:`~sofa_gui.qt.session.Session` owns it;
a stand-alone timeline makes its own): the visible window, the selected slice,
iteration and rank, a range selection (with the lanes it covers), collapsed groups /
expanded lanes / group order and pins, and highlighted slices. Widgets call the intent methods
(``select_slice``, ``set_window``, ...) and render the state when told what changed;
nothing keeps a second copy in sync.

Times here are ns from the trace start (floats, like the timeline's x axis);
``abs_window`` / ``zoom_to`` convert to and from absolute ns on the trace clock.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum

import numpy as np

from .viewport import clamp_window

#: Narrowest window: one ns across the view.
MIN_SPAN_NS = 1.0
#: Space left on each side when zooming to a thing (slice, iteration, evidence), as a
#: fraction of its length, and at least this many ns.
PAD_FRACTION = 0.05
MIN_PAD_NS = 5.0


class Change(Enum):
    """What a notification is about (listeners redraw only that)."""

    TRACE = "trace"  # a new trace (everything reset)
    WINDOW = "window"
    SLICE = "slice"  # selected slice; ``reveal`` says whether to bring it into view
    ITERATION = "iteration"
    RANGE = "range"  # range selection (time range + the lanes it covers)
    RANK = "rank"  # selected rank of a multi-rank trace
    LAYOUT = "layout"  # collapsed groups / expanded lanes / group order and pins
    HIGHLIGHTS = "highlights"
    #: the user dropped the highlights (Esc): whoever made them (search, Statistics,
    #: a query) forgets them too
    HIGHLIGHTS_CLEARED = "highlights_cleared"


def padded(a: float, b: float) -> tuple[float, float]:
    """``[a, b]`` with the one zoom padding every "show me this" uses."""
    pad = max((b - a) * PAD_FRACTION, MIN_PAD_NS)
    return a - pad, b + pad


def reveal_window(x0: float, x1: float, a: float, b: float, zoom: bool) -> tuple[float, float]:
    """The window that brings ``[a, b]`` into view from ``[x0, x1]``.

    ``zoom``: the thing fills a third of the view, centred (search, links). Else the
    zoom is kept and the view pans just enough; a thing wider than the view is fitted.
    """
    if zoom:
        d = max(b - a, 1000.0)
        return a - d, a + 2 * d
    span = x1 - x0
    if b - a > span:
        return padded(a, b)
    if a < x0 or b > x1:
        mid = (a + b) / 2
        return mid - span / 2, mid + span / 2
    return x0, x1


class ViewState:
    """The view of one trace (see the module docstring)."""

    def __init__(self):
        self._listeners: list[Callable[[Change], None]] = []
        self.t0 = 0  # absolute ns of x = 0
        self.span = 1.0
        self.n_slices = 0
        self.iter_starts = np.zeros(0)  # ns from t0
        self.iter_ends = np.zeros(0)
        self._clear()

    def _clear(self) -> None:
        self.x0, self.x1 = 0.0, self.span
        self.selected_slice = -1
        self.selected_iteration = -1
        self.range_selection: tuple[float, float] | None = None
        self.range_lanes: tuple[int, ...] = ()  # lanes the range covers (() = all)
        self.selected_rank = -1
        self.collapsed: set[str] = set()
        self.expanded: set[int] = set()
        self.group_order: list[str] = []  # the user's order of group headers (drag)
        self.pinned: list[str] = []  # groups pinned to the top, in pin order
        self.highlights: np.ndarray | None = None
        self.highlight_pos = -1  # the highlight F3 last stepped to
        self.reveal = False  # the last SLICE change asked to bring the slice into view

    # -- listeners ---------------------------------------------------------------------
    def subscribe(self, listener: Callable[[Change], None]) -> None:
        self._listeners.append(listener)

    def _notify(self, what: Change) -> None:
        for listener in list(self._listeners):
            listener(what)

    # -- data (set by the owner when a trace / its iterations arrive) -------------------
    def set_trace(self, t0: int, span: float, n_slices: int) -> None:
        self.t0, self.span, self.n_slices = int(t0), max(float(span), 1.0), int(n_slices)
        self.iter_starts, self.iter_ends = np.zeros(0), np.zeros(0)
        self._clear()
        self._notify(Change.TRACE)

    def set_iterations(self, starts_abs, ends_abs) -> None:
        """Iteration bounds (absolute ns); clears a selected iteration that no longer exists."""
        self.iter_starts = (np.asarray(starts_abs, np.int64) - self.t0).astype(float)
        self.iter_ends = (np.asarray(ends_abs, np.int64) - self.t0).astype(float)
        if self.selected_iteration >= len(self.iter_starts):
            self.select_iteration(-1)

    # -- intents -------------------------------------------------------------------------
    def set_window(self, x0: float, x1: float) -> None:
        """Show ``[x0, x1]`` (ns from start), clamped to the trace."""
        x0, x1 = clamp_window(float(x0), float(x1), 0.0, self.span, MIN_SPAN_NS)
        if (x0, x1) != (self.x0, self.x1):
            self.x0, self.x1 = x0, x1
            self._notify(Change.WINDOW)

    def zoom_to(self, start_ns: int, end_ns: int, pad: bool = False) -> None:
        """Show ``[start_ns, end_ns]`` (absolute ns on the trace clock), ``pad``-ded."""
        if end_ns <= start_ns:
            end_ns = start_ns + 1
        a, b = float(int(start_ns) - self.t0), float(int(end_ns) - self.t0)
        self.set_window(*(padded(a, b) if pad else (a, b)))

    def show(self, a: float, b: float) -> None:
        """Zoom to ``[a, b]`` (ns from start) with the standard padding."""
        self.set_window(*padded(a, b))

    def abs_window(self) -> tuple[int, int]:
        """The visible window in absolute ns (floor / ceil)."""
        return self.t0 + int(np.floor(self.x0)), self.t0 + int(np.ceil(self.x1))

    def select_slice(self, i: int, reveal: bool = False) -> None:
        """Select slice ``i`` (-1 or out of range clears); ``reveal`` brings it into view."""
        i = int(i) if i is not None and 0 <= int(i) < self.n_slices else -1
        self.reveal = bool(reveal and i >= 0)
        if i != self.selected_slice or self.reveal:
            self.selected_slice = i
            self._notify(Change.SLICE)

    def select_iteration(self, i: int, zoom: bool = False) -> None:
        """Select iteration ``i`` (-1 clears); ``zoom`` shows it whole."""
        i = int(i) if i is not None and 0 <= int(i) < len(self.iter_starts) else -1
        if i != self.selected_iteration:
            self.selected_iteration = i
            self._notify(Change.ITERATION)
        if zoom and i >= 0:
            self.show(self.iter_starts[i], self.iter_ends[i])

    def select_range(self, a: float | None, b: float | None = None, lanes=()) -> None:
        """Select the time range ``[a, b]`` (ns from start) over ``lanes`` (() = all
        lanes); None or an empty range clears."""
        new = None if a is None or b is None or a == b else (min(a, b), max(a, b))
        lanes = tuple(sorted({int(x) for x in lanes})) if new is not None else ()
        if (new, lanes) != (self.range_selection, self.range_lanes):
            self.range_selection, self.range_lanes = new, lanes
            self._notify(Change.RANGE)

    def abs_range(self) -> tuple[int, int, tuple[int, ...]] | None:
        """The range selection in absolute ns (floor / ceil) with its lanes, or None."""
        if self.range_selection is None:
            return None
        a, b = self.range_selection
        return self.t0 + int(np.floor(a)), self.t0 + int(np.ceil(b)), self.range_lanes

    def select_abs_range(self, start_ns: int, end_ns: int, lanes=()) -> None:
        """:meth:`select_range` in absolute ns on the trace clock (see :meth:`abs_range`)."""
        self.select_range(float(start_ns - self.t0), float(end_ns - self.t0), lanes)

    def select_rank(self, rank: int) -> None:
        """Select a rank of a multi-rank trace (-1: none)."""
        if int(rank) != self.selected_rank:
            self.selected_rank = int(rank)
            self._notify(Change.RANK)

    def toggle_group(self, group: str) -> None:
        self.collapsed.symmetric_difference_update({group})
        self._notify(Change.LAYOUT)

    def toggle_lane(self, lane: int) -> None:
        """Show all nesting rows of a deep lane, or cap them again."""
        self.expanded.symmetric_difference_update({int(lane)})
        self._notify(Change.LAYOUT)

    def set_tracks(self, order, pinned=()) -> None:
        """The group order the user dragged to and the groups pinned to the top."""
        order, pinned = [str(g) for g in order], list(dict.fromkeys(str(g) for g in pinned))
        if (order, pinned) != (self.group_order, self.pinned):
            self.group_order, self.pinned = order, pinned
            self._notify(Change.LAYOUT)

    def toggle_pin(self, group: str) -> None:
        """Pin ``group`` to the top (below earlier pins), or unpin it."""
        pins = [g for g in self.pinned if g != group]
        self.set_tracks(self.group_order, pins if group in self.pinned else [*pins, group])

    def set_highlights(self, indexes) -> None:
        """Slices to highlight (search matches on screen, a Statistics row's instances, a
        query's result); None clears.  F3 / Shift+F3 step through them (:meth:`step_highlight`)."""
        self.highlights = None if indexes is None or len(indexes) == 0 else np.asarray(indexes)
        self.highlight_pos = -1
        self._notify(Change.HIGHLIGHTS)

    def step_highlight(self, delta: int) -> int:
        """Select and reveal the next (+1) or previous (-1) highlighted slice, wrapping, in
        time order; the slice, or -1 when nothing is highlighted."""
        h = self.highlights
        if h is None or len(h) == 0:
            return -1
        n = len(h)
        pos = self.highlight_pos
        if pos < 0 and self.selected_slice >= 0:  # continue from the selected slice
            hit = np.flatnonzero(h == self.selected_slice)
            pos = int(hit[0]) if len(hit) else -1
        pos = (0 if delta > 0 else n - 1) if pos < 0 else (pos + delta) % n
        self.highlight_pos = pos
        self.select_slice(int(h[pos]), reveal=True)
        return int(h[pos])

    def clear_highlights(self) -> None:
        """The user drops the highlights: they go, and their maker is told."""
        self.set_highlights(None)
        self._notify(Change.HIGHLIGHTS_CLEARED)

    def escape(self) -> Change | None:
        """Esc: clear the innermost selection -- the range, else the highlights, else the
        selected slice, else the selected iteration; what was cleared (None: nothing)."""
        if self.range_selection is not None:
            self.select_range(None)
            return Change.RANGE
        if self.highlights is not None or self.highlights_elsewhere():
            self.clear_highlights()
            return Change.HIGHLIGHTS
        if self.selected_slice >= 0:
            self.select_slice(-1)
            return Change.SLICE
        if self.selected_iteration >= 0:
            self.select_iteration(-1)
            return Change.ITERATION
        return None

    #: Whether highlights exist that are not drawn right now (a search with more matches
    #: than are highlighted at once); the app's session sets it.
    highlights_elsewhere: Callable[[], bool] = staticmethod(lambda: False)

    def iteration_of(self, x: float) -> int:
        """Index of the iteration that holds ``x`` (ns from start), -1 if none."""
        i = int(np.searchsorted(self.iter_starts, x, side="right")) - 1
        return i if 0 <= i < len(self.iter_starts) and x < self.iter_ends[i] else -1
