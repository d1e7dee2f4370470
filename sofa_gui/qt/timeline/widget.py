"""TimelineWidget: lanes of a trace on one time axis; owns the visible range and selection.

Layout (one pyqtgraph ``GraphicsLayoutWidget``)::

    [corner        ] [time axis (ns / µs / ms / s from trace start)]
    [iterations    ] [iteration strip: click selects an iteration    ]
    [lane labels   ] [lanes: slices, counters, bands, selection       ]  [scroll bar]

The view state (window, selection, collapsed groups, highlights) is a Qt-free
:class:`~sofa_gui.view.state.ViewState`: the app's session owns it and passes it in,
a stand-alone widget makes its own. Input becomes intents on that state; the widget
redraws when the state says what changed, and re-announces it as signals
(``range_changed``, ``slice_selected``, ``iteration_selected``), only when the value
actually changes.  Signals carry absolute ns on the trace clock (``qint64``; Qt's
``int`` is 32-bit).
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6 import QtCore, QtGui, QtWidgets

from sofa_gui.core.trace import LaneKind, Trace
from sofa_gui.view.viewport import pan_window, zoom_window

from ...view.markers import MarkerSet
from ...view.model import MIN_SPAN_NS, Prepared, TimelineModel, prepare
from ...view.state import Change, ViewState, reveal_window
from ...view.tooltip import counter_tooltip, iteration_tooltip, literal_html, slice_tooltip
from .lane_labels import LaneLabelsItem
from .lanes_item import LanesItem
from .marker_layer import MarkerLayer
from .overlays import (
    AreaItem,
    IterationBandsItem,
    IterationStripItem,
    RubberBandItem,
    SelectionItem,
)
from .time_axis import TimeAxisItem
from .view_box import StripViewBox, TimelineViewBox

#: Pixel height of one row unit.
ROW_PX = 18
#: Keyboard zoom factor (W zooms in by it, S out) and pan step (fraction of the view).
KEY_ZOOM = 0.75
KEY_PAN = 0.15
#: Drags shorter than this (px) are clicks, not zooms.
MIN_BAND_PX = 4
#: Hover/click tolerance around the cursor (px).
HIT_PX = 3

_KEYS = QtCore.Qt.Key



class TimelineWidget(QtWidgets.QWidget):
    """The central timeline view (see the module docstring)."""

    slice_selected = QtCore.Signal("qint64")
    iteration_selected = QtCore.Signal("qint64")
    range_changed = QtCore.Signal("qint64", "qint64")
    #: The user moved/pinned a group or resized the label column: ``track_state()`` changed.
    tracks_changed = QtCore.Signal()
    #: Right-click: the slice under the cursor (-1: none) and the global position.
    context_requested = QtCore.Signal("qint64", QtCore.QPoint)

    def __init__(self, parent: QtWidgets.QWidget | None = None, view: ViewState | None = None):
        super().__init__(parent)
        self.view = view or ViewState()
        self.model = TimelineModel(self.view, owns_state=view is None)  # else its owner's
        self.view.subscribe(self._on_view)
        self._top = 0.0
        self._hover_x: float | None = None
        self._build_scene()
        self._build_layout()

    # -- construction ------------------------------------------------------------------
    def _build_scene(self) -> None:
        pal = self.palette()
        self._view = pg.GraphicsLayoutWidget()
        self._view.setBackground(pal.color(QtGui.QPalette.ColorRole.Base))
        self._view.setFocusPolicy(QtCore.Qt.FocusPolicy.StrongFocus)
        self._view.installEventFilter(self)
        ci = self._view.ci
        ci.setContentsMargins(0, 0, 0, 0)
        ci.setSpacing(0)
        self._vb = TimelineViewBox(self)
        self._strip = StripViewBox(self)
        self._strip.setFixedHeight(20)
        self._axis = self.time_axis = TimeAxisItem(self._vb, pal)
        self._labels = LaneLabelsItem(self.model, self._vb, pal, self._toggle_group,
                                      self.scroll_rows, self._toggle_lane,
                                      self.tracks_changed.emit)
        corner = pg.LabelItem("time from start", size="8pt", justify="left")
        corner.setFixedHeight(22)
        iter_caption = pg.LabelItem("iterations", size="8pt", justify="left")
        iter_caption.setFixedHeight(20)
        ci.addItem(corner, 0, 0)
        ci.addItem(self._axis, 0, 1)
        ci.addItem(iter_caption, 1, 0)
        ci.addItem(self._strip, 1, 1)
        ci.addItem(self._labels, 2, 0)
        ci.addItem(self._vb, 2, 1)
        ci.layout.setRowStretchFactor(2, 1)
        self._bands = IterationBandsItem(self.model, pal)
        self._lanes = LanesItem(self.model, pal)
        self._selection = SelectionItem(self.model, pal)
        self._rubber = RubberBandItem(self.model)
        self._area = AreaItem(self.model)
        for z, item in enumerate((self._bands, self._lanes, self._selection, self._area,
                                  self._rubber)):
            item.setZValue(z - 1)
            self._vb.addItem(item, ignoreBounds=True)
        self._strip_item = IterationStripItem(self.model, pal)
        self._strip.addItem(self._strip_item, ignoreBounds=True)
        self._vb.sigResized.connect(self._on_resized)
        self.marks = MarkerLayer(self._vb, self)  # markers (M, ruler click), measurement
        self._axis.on_click = self.marks.add

    def _build_layout(self) -> None:
        self._scroll = QtWidgets.QScrollBar(QtCore.Qt.Orientation.Vertical)
        self._scroll.valueChanged.connect(self._on_scrollbar)
        box = QtWidgets.QHBoxLayout(self)
        box.setContentsMargins(0, 0, 0, 0)
        box.setSpacing(0)
        box.addWidget(self._view, 1)
        box.addWidget(self._scroll)
        self.setFocusProxy(self._view)
        self._sync_scrollbar()

    # -- public API -------------------------------------------------------------------
    def set_trace(self, trace: Trace | Prepared | None) -> None:
        """Show ``trace`` (or a :func:`prepare` result built in a worker), zoomed out."""
        if isinstance(trace, Trace):
            trace = prepare(trace)
        self.model.set_prepared(trace)
        self.marks.set_markers(MarkerSet())  # the owner restores the trace's own
        self._apply_area()
        self._top = 0.0
        self._data_changed()
        self._apply_window()
        self._apply_y()

    def set_iterations(self, iterations) -> None:
        """Iteration bands and strip from a ``results.Iterations`` (None clears them)."""
        self.model.set_iterations(iterations)
        self._data_changed()

    def set_iteration_marks(self, iterations) -> None:
        """Repaint the warm-up hatching and tags from ``iterations``' marks (the same
        iterations, finally marked): no band, window or selection changes."""
        self.model.set_iteration_marks(iterations)
        self._overlays_changed()

    def select_slice(self, index: int | None) -> None:
        """Select (and bring into view) a slice by trace index; None or -1 clears."""
        self.view.select_slice(-1 if index is None else index)

    def select_iteration(self, i: int | None) -> None:
        """Select an iteration by number; None or -1 clears."""
        self.view.select_iteration(-1 if i is None else i)

    def zoom_to(self, start_ns: int, end_ns: int) -> None:
        """Show ``[start_ns, end_ns]`` (absolute ns on the trace clock)."""
        self.view.zoom_to(start_ns, end_ns)

    def reset_zoom(self) -> None:
        self.view.set_window(0.0, self.model.span)

    def set_highlight(self, indexes: np.ndarray | None) -> None:
        """Highlight these slices (e.g. search matches); None clears."""
        self.view.set_highlights(indexes)

    def visible_range(self) -> tuple[int, int]:
        """Visible ``(start_ns, end_ns)``, absolute on the trace clock."""
        return self.view.abs_window()

    def drawn_block_count(self) -> int:
        """Slice blocks drawn in the last frame (bounded by rows x pixel columns)."""
        return self._lanes.last_block_count

    def fit_selection(self) -> None:
        """Zoom to the selected slice, else the selected iteration (key F)."""
        m = self.model
        if m.selected >= 0:
            self.view.show(*m.slice_extent(m.selected))
        elif m.selected_iteration >= 0:
            self.view.show(m.iter_starts[m.selected_iteration], m.iter_ends[m.selected_iteration])

    def tooltip_text(self, index: int) -> str:
        """Plain-text hover text of a slice (name, lane, start, duration, key args)."""
        return slice_tooltip(self.model, index)

    def view_box(self) -> TimelineViewBox:
        """The lanes' view box (tests and screenshots map coordinates through it)."""
        return self._vb

    def strip_view_box(self) -> StripViewBox:
        return self._strip

    def graphics_view(self) -> pg.GraphicsLayoutWidget:
        """The graphics view (its viewport receives the mouse)."""
        return self._view

    def view_point(self, x_ns: int, y_units: float) -> QtCore.QPoint:
        """Viewport pixel of absolute time ``x_ns`` at lane height ``y_units``."""
        scene = self._vb.mapViewToScene(QtCore.QPointF(float(x_ns - self.model.t0), y_units))
        return self._view.mapFromScene(scene)

    # -- intents from the view boxes ----------------------------------------------------
    def zoom_around(self, x: float, factor: float) -> None:
        m = self.model
        self.view.set_window(*zoom_window(m.x0, m.x1, x, factor, 0.0, m.span, MIN_SPAN_NS))

    def pan_by(self, dx: float, dy_units: float = 0.0) -> None:
        m = self.model
        if dx:
            self.view.set_window(*pan_window(m.x0, m.x1, dx, 0.0, m.span))
        if dy_units:
            self.scroll_rows(dy_units)

    def scroll_rows(self, units: float) -> None:
        self._top += units
        self._apply_y()

    def rubber_band(self, x_from: float, x_to: float, finished: bool) -> None:
        if not finished:
            self._rubber.set_range((x_from, x_to))
            return
        self._rubber.set_range(None)
        if abs(x_to - x_from) / self._ns_per_px() >= MIN_BAND_PX:
            self.view.set_window(min(x_from, x_to), max(x_from, x_to))

    def area_drag(self, start, end, finished: bool) -> None:
        """Ctrl-drag: draw the area; on release select its time range and crossed lanes."""
        (xa, ya), (xb, yb) = start, end
        x0, x1 = sorted((xa, xb))
        y0, y1 = sorted((ya, yb))
        if not finished:
            self._area.set_area((x0, x1, y0, y1))
            return
        lanes = self.model.lanes_between(y0, y1)
        if (x1 - x0) / self._ns_per_px() < MIN_BAND_PX or not len(lanes):
            self.view.select_range(None)
            self._apply_area()  # the drawn box goes even when nothing was selected
            return
        self.view.select_range(x0, x1, lanes)

    def set_area(self, area) -> None:
        """Select ``(start_ns, end_ns, lanes)`` (absolute ns; None clears) in the view."""
        if area is None:
            self.view.select_range(None)
            return
        self.view.select_abs_range(*area)

    @property
    def area(self):
        """The current area selection ``(start_ns, end_ns, lanes)`` or None."""
        return self.view.abs_range()

    def _apply_area(self) -> None:
        """Draw the view's range selection over the lines of its lanes."""
        rng = self.view.range_selection
        if rng is None or self.model.layout is None:
            self._area.set_area(None)
            return
        lanes = self.view.range_lanes or range(len(self.model.layout.lane_top))
        y0, y1 = self.model.lanes_extent(lanes)
        self._area.set_area((rng[0], rng[1], y0, y1))

    def _escape(self) -> None:
        """Esc clears the innermost selection: range, highlights, slice, iteration."""
        self.view.escape()

    def click_at(self, x: float, y: float, double: bool) -> None:
        hit = self.model.slice_at(x, y, HIT_PX * self._ns_per_px())
        self.view.select_slice(hit)
        if double and hit >= 0:
            self.fit_selection()

    def context_at(self, x: float, y: float, screen_pos) -> None:
        """Right-click: select the slice under the cursor and ask for its menu."""
        hit = self.model.slice_at(x, y, HIT_PX * self._ns_per_px())
        if hit >= 0:
            self.view.select_slice(hit)
        self.context_x = x
        self.context_requested.emit(hit, QtCore.QPoint(int(screen_pos.x()), int(screen_pos.y())))

    def measure_at(self, x: float) -> None:
        """Shift-click: a point of the measurement (two points: the delta stays drawn)."""
        self.marks.measure_click(x)

    def mark_selection(self) -> None:
        """M: a marker at the range selection's start, else the selected slice's start
        (named after it), else under the cursor (or the view's middle)."""
        v = self.view
        if v.range_selection is not None:
            self.marks.add(v.range_selection[0])
        elif v.selected_slice >= 0:
            start, _end = self.model.slice_extent(v.selected_slice)
            self.marks.add(start, self.model.label_of(v.selected_slice))
        else:
            self.marks.add(self._hover_x if self._hover_x is not None else (v.x0 + v.x1) / 2)

    def click_iteration_at(self, x: float, double: bool) -> None:
        self.view.select_iteration(self.model.iteration_at(x), zoom=double)

    def hover_at(self, x, y, screen_pos) -> None:
        self._hover_x = x
        if x is None or self.model.trace is None:
            QtWidgets.QToolTip.hideText()
            return
        hit = self.model.slice_at(x, y, HIT_PX * self._ns_per_px())
        text = self.tooltip_text(hit) if hit >= 0 else self._counter_text(x, y)
        if not text:
            QtWidgets.QToolTip.hideText()
            return
        QtWidgets.QToolTip.showText(screen_pos.toPoint(), literal_html(text), self._view)

    def _counter_text(self, x: float, y: float) -> str:
        line = self.model.layout.line_at(y) if self.model.layout else None
        if line is None or line.kind != "lane" or line.lane_kind != LaneKind.COUNTER:
            return ""
        return counter_tooltip(self.model, line.lane, x)

    def changeEvent(self, ev):  # noqa: N802
        """Follow theme switches (light/dark): every colour derives from the palette."""
        if ev.type() == QtCore.QEvent.Type.PaletteChange:
            pal = self.palette()
            self._view.setBackground(pal.color(QtGui.QPalette.ColorRole.Base))
            self._lanes.set_palette(pal)
            self._labels.set_palette(pal)
        super().changeEvent(ev)

    def hover_iteration_at(self, x, screen_pos) -> None:
        i = self.model.iteration_at(x) if x is not None else -1
        if i < 0:
            QtWidgets.QToolTip.hideText()
            return
        QtWidgets.QToolTip.showText(screen_pos.toPoint(), literal_html(self.iteration_text(i)),
                                    self._view)

    def iteration_text(self, i: int) -> str:
        """Plain-text description of iteration ``i`` (strip tooltip)."""
        return iteration_tooltip(self.model, i)

    # -- keyboard -----------------------------------------------------------------------
    def eventFilter(self, obj, ev):  # noqa: N802
        if obj is self._view and ev.type() == QtCore.QEvent.Type.KeyPress:
            return self._key(ev)
        return super().eventFilter(obj, ev)

    def keyPressEvent(self, ev):  # noqa: N802
        if not self._key(ev):
            super().keyPressEvent(ev)

    def _key(self, ev: QtGui.QKeyEvent) -> bool:
        m = self.model
        key = ev.key()
        span = m.x1 - m.x0
        centre = self._hover_x if self._hover_x is not None else (m.x0 + m.x1) / 2
        actions = {
            _KEYS.Key_W: lambda: self.zoom_around(centre, KEY_ZOOM),
            _KEYS.Key_S: lambda: self.zoom_around(centre, 1 / KEY_ZOOM),
            _KEYS.Key_A: lambda: self.pan_by(-KEY_PAN * span),
            _KEYS.Key_D: lambda: self.pan_by(KEY_PAN * span),
            _KEYS.Key_Home: self.reset_zoom,
            _KEYS.Key_0: self.reset_zoom,
            _KEYS.Key_F: self.fit_selection,
            _KEYS.Key_M: self.mark_selection,
            _KEYS.Key_Escape: self._escape,
            _KEYS.Key_Up: lambda: self.scroll_rows(-1),
            _KEYS.Key_Down: lambda: self.scroll_rows(1),
            _KEYS.Key_PageUp: lambda: self.scroll_rows(-self._visible_units() * 0.9),
            _KEYS.Key_PageDown: lambda: self.scroll_rows(self._visible_units() * 0.9),
        }
        action = actions.get(key)
        if action is None or ev.modifiers() & QtCore.Qt.KeyboardModifier.ControlModifier:
            return False
        action()
        ev.accept()
        return True

    # -- internals ----------------------------------------------------------------------
    def _ns_per_px(self) -> float:
        width = max(self._vb.width(), 1.0)
        return (self.model.x1 - self.model.x0) / width

    def _on_view(self, change: Change) -> None:
        """Redraw what the view state says changed (and announce it)."""
        v = self.view
        if change is Change.WINDOW:
            self._apply_window()
        elif change is Change.SLICE:
            if v.selected_slice >= 0:
                self._reveal(v.selected_slice, v.reveal)
            self._overlays_changed()
            self.slice_selected.emit(v.selected_slice)
        elif change is Change.ITERATION:
            self._overlays_changed()
            self.iteration_selected.emit(v.selected_iteration)
        elif change is Change.LAYOUT:
            self._data_changed()
            self._apply_y()
            self._apply_area()
        elif change is Change.HIGHLIGHTS:
            self._lanes.invalidate()
        elif change is Change.RANGE:
            self._apply_area()

    def _apply_window(self) -> None:
        x0, x1 = self.view.x0, self.view.x1
        self._vb.setXRange(x0, x1, padding=0)
        self._strip.setXRange(x0, x1, padding=0)
        self.range_changed.emit(*self.visible_range())

    def _visible_units(self) -> float:
        return max(self._vb.height(), 1.0) / ROW_PX

    def _apply_y(self) -> None:
        vis = self._visible_units()
        self._top = min(max(self._top, 0.0), max(self.model.total_height - vis, 0.0))
        self._vb.setYRange(self._top, self._top + vis, padding=0)
        self._sync_scrollbar()

    def _sync_scrollbar(self) -> None:
        vis = self._visible_units()
        total = self.model.total_height
        self._scroll.blockSignals(True)
        self._scroll.setRange(0, int(max(total - vis, 0.0) * ROW_PX))
        self._scroll.setPageStep(int(vis * ROW_PX))
        self._scroll.setSingleStep(ROW_PX)
        self._scroll.setValue(int(self._top * ROW_PX))
        self._scroll.blockSignals(False)
        self._scroll.setVisible(total > vis)

    def _on_scrollbar(self, value: int) -> None:
        self._top = value / ROW_PX
        self._apply_y()

    def _on_resized(self) -> None:
        self._apply_y()

    def track_state(self) -> dict:
        """Group order, pins and label width, to remember per trace kind."""
        m = self.model
        return {"order": m.groups(), "pinned": list(m.pinned),
                "width": int(self._labels.maximumWidth())}

    def set_track_state(self, state: dict | None) -> None:
        """Apply a remembered :meth:`track_state` (unknown groups ignored)."""
        if not state:
            return
        self.model.set_order(state.get("order", []), state.get("pinned", []))
        if state.get("width"):
            self._labels.set_column_width(int(state["width"]))

    def label_column(self):
        """The lane label column (tests drag its edge and headers)."""
        return self._labels

    def _toggle_group(self, group: str) -> None:
        self.view.toggle_group(group)

    def _toggle_lane(self, lane: int) -> None:
        self.view.toggle_lane(lane)

    def _data_changed(self) -> None:
        self._lanes.invalidate()
        self._overlays_changed()
        self._labels.update()

    def _overlays_changed(self) -> None:
        for item in (self._bands, self._selection, self._strip_item):
            item.changed()

    def _reveal(self, index: int, zoom: bool) -> None:
        """Bring a selected slice into view (see :func:`~sofa_gui.view.state.reveal_window`),
        open its group or deep lane, and scroll its row on screen."""
        m, v = self.model, self.view
        if m.trace is None:
            return
        v.set_window(*reveal_window(v.x0, v.x1, *m.slice_extent(index), zoom))
        group = m.trace.lanes.group[int(m.trace.slices.lane[index])]
        if group in m.collapsed:
            v.toggle_group(group)
        if m.row_hidden_by_cap(m.slice_row(index)) >= 0:
            v.toggle_lane(m.row_hidden_by_cap(m.slice_row(index)))
        row = m.row_span(m.slice_row(index))
        if row is not None:
            vis = self._visible_units()
            if row[0] < self._top or row[0] + row[1] > self._top + vis:
                self._top = row[0] - vis / 3
                self._apply_y()
