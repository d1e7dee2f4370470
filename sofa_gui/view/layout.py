"""Vertical layout of the timeline: groups, lanes and their nesting rows, in row units.

Qt-free so it can be tested alone.  A *row* is one (lane, depth) pair of the
slice index (:class:`sofa_gui.view.lod.TimelineIndex` numbering); a *slot*
is a line on screen (group header, slice row or counter lane).  Collapsing a
group hides its lanes and draws their top-level rows on the header line, so a
collapsed rank still shows when it was busy.  A lane deeper than
:data:`MAX_ROWS` (Python stacks reach 40 levels) shows its first rows and draws
all deeper ones merged on its last row, until it is expanded.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..core.trace import LaneKind, Lanes

#: Height of one slice row, a group header and a counter lane, in row units.
ROW_UNITS = 1.0
HEADER_UNITS = 1.2
COUNTER_UNITS = 2.5
#: Nesting rows shown for a lane until it is expanded; deeper rows merge into the last.
MAX_ROWS = 12


@dataclass
class LaneLine:
    """One label in the label column."""

    kind: str  # "group" | "lane"
    text: str
    top: float  # row units from the top
    height: float
    lane: int = -1  # lane id for "lane"
    group: str = ""
    collapsed: bool = False
    lane_kind: int = -1  # LaneKind for "lane"
    depth: int = 1  # nesting rows the lane has
    shown: int = 1  # nesting rows on screen (< depth: deeper rows merged into the last)


class TimelineLayout:
    """Where every lane and row sits, given the collapsed groups."""

    def __init__(self, lanes: Lanes, row_base: np.ndarray, collapsed: frozenset = frozenset(),
                 expanded: frozenset = frozenset(), max_rows: int = MAX_ROWS,
                 group_order: tuple = (), pinned: tuple = ()):
        self.collapsed = frozenset(collapsed)
        self.expanded = frozenset(expanded)
        self.max_rows = max(int(max_rows), 1)
        n_rows = int(row_base[-1]) if len(row_base) else 0
        self.row_top = np.full(n_rows, np.nan)  # NaN: hidden
        self.row_height = np.full(n_rows, ROW_UNITS)
        self.row_shared = np.zeros(n_rows, bool)  # drawn on a line other rows share too
        self.lane_top = np.full(len(lanes), np.nan)
        self.lane_height = np.zeros(len(lanes))
        self.lines: list[LaneLine] = []
        self.groups: list[str] = []
        y = 0.0
        for group, members in ordered_groups(lanes, group_order, pinned):
            if group:
                self.groups.append(group)
                closed = group in self.collapsed
                self.lines.append(LaneLine("group", group, y, HEADER_UNITS, group=group,
                                           collapsed=closed))
                if closed:
                    for lane in members:  # summary: every lane's top row on the header line
                        self.row_top[row_base[lane]] = y + (HEADER_UNITS - ROW_UNITS) / 2
                        self.row_shared[row_base[lane]] = len(members) > 1
                        self.lane_top[lane] = y
                    y += HEADER_UNITS
                    continue
                y += HEADER_UNITS
            for lane in members:
                y = self._place_lane(lanes, lane, row_base, group, y)
        self.total = y

    def _place_lane(self, lanes: Lanes, lane: int, row_base, group: str, y: float) -> float:
        kind = int(lanes.kind[lane])
        depth = max(int(lanes.depth[lane]), 1)
        first = int(row_base[lane])
        if kind == LaneKind.COUNTER:
            height = COUNTER_UNITS
            self.row_top[first:first + depth] = y
            self.row_height[first:first + depth] = COUNTER_UNITS
            shown = 1
        else:
            shown = depth if lane in self.expanded else min(depth, self.max_rows)
            height = shown * ROW_UNITS
            self.row_top[first:first + depth] = y + np.minimum(np.arange(depth), shown - 1)
            if shown < depth:
                self.row_shared[first + shown - 1:first + depth] = True
        self.lane_top[lane] = y
        self.lane_height[lane] = height
        self.lines.append(LaneLine("lane", lanes.name[lane], y, height, lane=lane, group=group,
                                   lane_kind=kind, depth=depth, shown=shown))
        return y + height

    def visible_rows(self, y0: float, y1: float) -> np.ndarray:
        """Row ids with any part inside ``[y0, y1]``, top to bottom."""
        top = self.row_top
        vis = np.flatnonzero(~np.isnan(top) & (top + self.row_height > y0) & (top < y1))
        return vis[np.argsort(top[vis], kind="stable")]

    def row_at(self, y: float) -> np.ndarray:
        """Rows whose line contains ``y`` (several on a collapsed group's header)."""
        top = self.row_top
        return np.flatnonzero(~np.isnan(top) & (top <= y) & (top + self.row_height > y))

    def line_at(self, y: float) -> LaneLine | None:
        for line in self.lines:
            if line.top <= y < line.top + line.height:
                return line
        return None


def ordered_groups(lanes: Lanes, order=(), pinned=()) -> list[tuple[str, list[int]]]:
    """Groups top to bottom: pinned ones (in pin order), then those named in ``order``
    (a user's drag order), then device groups (GPU streams, copies) before host ones."""
    groups = _grouped(lanes)
    device = {g for g, members in groups
              if any(int(lanes.kind[m]) in (LaneKind.GPU, LaneKind.MEMCPY) for m in members)}
    pos = {g: i for i, g in enumerate(order)}
    pin = {g: i for i, g in enumerate(pinned)}

    def key(item):
        g = item[0]
        if g in pin:
            return (0, pin[g])
        if g in pos:
            return (1, pos[g])
        return (2, 0 if g in device else 1)

    return sorted(groups, key=key)  # stable: the trace's own order within each class


def _grouped(lanes: Lanes) -> list[tuple[str, list[int]]]:
    """Lanes in display order, grouped by ``lanes.group`` in order of first appearance."""
    order: list[str] = []
    members: dict[str, list[int]] = {}
    for lane in lanes.display_order().tolist():
        g = lanes.group[lane] or ""
        if g not in members:
            members[g] = []
            order.append(g)
        members[g].append(lane)
    return [(g, members[g]) for g in order]
