"""Call tree dock: the call tree of a thread (or all threads of a rank) as a tree table
and an icicle graph, top-down or bottom-up, over the whole trace, the selected
iteration, the steady state or the timeline's range selection.

The numbers are those of ``sofa-gui calltree`` (:mod:`sofa_gui.core.analysis.calltree`).
Clicking a row or a frame highlights every instance of that call path on the timeline
(F3 steps through them) and selects the longest.
"""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QHeaderView,
    QSplitter,
    QTreeWidget,
    QTreeWidgetItem,
    QWidget,
)

from ...core.analysis import calltree
from ...core.units import fmt_ns, fmt_pct
from ...view.tooltip import literal_html
from ..docks import DockSpec
from ..session import Session
from .common import ComputedWhenSeen, plain_label, set_muted, stack
from .flame import FlameGraph
from .statistics import SCOPES, session_scope

COLUMNS = ("Name", "Total", "Self", "Count", "Share")
DIRECTIONS = (("down", "Top-down (callees)"), ("up", "Bottom-up (callers)"))
_NODE = Qt.ItemDataRole.UserRole + 1


class _Item(QTreeWidgetItem):
    """A tree row that sorts its numeric columns by value."""

    def __lt__(self, other) -> bool:
        c = self.treeWidget().sortColumn() if self.treeWidget() else 0
        if c == 0:
            return self.text(0).lower() < other.text(0).lower()
        return self.data(c, _NODE + 1) < other.data(c, _NODE + 1)


class CallTreePanel(ComputedWhenSeen, QWidget):
    def __init__(self, session: Session, parent=None):
        super().__init__(parent)
        self.session = session
        self.tree: calltree.CallTree | None = None
        self._items: dict[int, QTreeWidgetItem] = {}
        self.lane_combo = QComboBox(self)
        self.lane_combo.setMinimumContentsLength(24)
        self.lane_combo.setSizeAdjustPolicy(
            QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.lane_combo.setToolTip("Thread: the main thread, one CPU lane, or all threads "
                                   "of a rank")
        self.scope_combo = QComboBox(self)
        for key, text in SCOPES:
            self.scope_combo.addItem(text, key)
        self.direction_combo = QComboBox(self)
        for key, text in DIRECTIONS:
            self.direction_combo.addItem(text, key)
        self.caption = plain_label("", self, wrap=True)
        set_muted(self.caption)
        self.view = QTreeWidget(self)
        self.view.setColumnCount(len(COLUMNS))
        self.view.setHeaderLabels(list(COLUMNS))
        self.view.setUniformRowHeights(True)
        self.view.setSortingEnabled(True)
        self.view.sortByColumn(1, Qt.SortOrder.DescendingOrder)
        self.view.header().setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        self.view.itemExpanded.connect(self._fill_children)
        self.view.itemClicked.connect(lambda item, _c: self._choose(item.data(0, _NODE)))
        self.flame = FlameGraph(self)
        self.flame.frame_clicked.connect(self._on_frame)
        self._layout()
        for combo in (self.lane_combo, self.scope_combo, self.direction_combo):
            combo.currentIndexChanged.connect(lambda _i: self.refresh())
        session.trace_changed.connect(self._on_trace)
        session.iterations_changed.connect(self.refresh)
        session.warmup_changed.connect(self._on_warmup)
        session.iteration_selected.connect(self._on_iteration)
        session.range_selected.connect(self._on_range)
        self._stale = True
        self._on_trace()

    def _layout(self) -> None:
        top = QHBoxLayout()
        top.setContentsMargins(0, 0, 0, 0)
        for w in (self.lane_combo, self.scope_combo, self.direction_combo):
            top.addWidget(w)
        top.addStretch(1)
        split = QSplitter(Qt.Orientation.Horizontal, self)
        split.addWidget(self.view)
        split.addWidget(self.flame)
        split.setSizes([420, 600])
        stack(self, top, self.caption, split)

    # -- choices -------------------------------------------------------------------------
    @property
    def scope_key(self) -> str:
        return self.scope_combo.currentData()

    @property
    def bottom_up(self) -> bool:
        return self.direction_combo.currentData() == "up"

    def choose(self, lane: str | None = None, scope: str | None = None,
               bottom_up: bool | None = None) -> None:
        """Pick the thread (None: main; a lane name; ``rank N``), scope and direction."""
        for combo, value in ((self.lane_combo, lane), (self.scope_combo, scope),
                             (self.direction_combo, None if bottom_up is None
                              else ("up" if bottom_up else "down"))):
            if value is not None or combo is self.lane_combo:
                combo.blockSignals(True)
                combo.setCurrentIndex(max(combo.findData(value), 0))
                combo.blockSignals(False)
        self._compute()

    def _on_trace(self) -> None:
        self.lane_combo.blockSignals(True)
        self.lane_combo.clear()
        trace = self.session.trace
        if trace is not None:
            main = calltree.main_lane(trace)
            self.lane_combo.addItem(f"Main thread ({trace.lanes.name[main]})"
                                    if main >= 0 else "Main thread", None)
            cpu = calltree.cpu_lanes(trace)
            for ln in cpu.tolist():
                self.lane_combo.addItem(trace.lanes.name[ln], trace.lanes.name[ln])
            for rank in sorted(set(np.asarray(trace.lanes.rank)[cpu].tolist())):
                self.lane_combo.addItem(f"All threads of rank {rank}", f"rank {rank}")
        self.lane_combo.blockSignals(False)
        if self.scope_key in ("range", "iteration"):
            self.scope_combo.blockSignals(True)
            self.scope_combo.setCurrentIndex(0)
            self.scope_combo.blockSignals(False)
        self.refresh()

    def _on_iteration(self, _i: int) -> None:
        if self.scope_key == "iteration":
            self.refresh()

    def _on_warmup(self) -> None:
        """The steady state starts after the analysis's final warm-up."""
        if self.scope_key == "steady":
            self.refresh()

    def _on_range(self, rng) -> None:
        if rng is not None or self.scope_key == "range":
            self.refresh()

    # -- computing -----------------------------------------------------------------------
    def _compute(self) -> None:
        self._stale = False
        s = self.session
        tree, why = None, s.empty_text() if s.trace is None else ""
        if s.trace is not None:
            scope, why = session_scope(s, self.scope_key)
            if scope is not None:
                scope.lanes = None  # the thread is chosen here, the range gives the window
                try:
                    lanes, label = calltree.pick_lanes(s.trace, self.lane_combo.currentData())
                    tree = calltree.build(s.trace, lanes, scope, self.bottom_up, label)
                except ValueError as exc:
                    why = str(exc)
        self._show(tree, why)

    def _show(self, tree, why: str) -> None:
        self.tree = tree
        self._items = {}
        self.view.clear()
        self.flame.set_tree(tree)
        if tree is None:
            self.caption.setText(why)
            self.caption.setToolTip(literal_html(why))
            return
        how = "bottom-up: callers of each function" if tree.bottom_up else "top-down"
        text = (f"{tree.scope}, {tree.lane}: {fmt_ns(int(tree.total[0]))} top-level time, "
                f"{len(tree) - 1:,} call paths ({how})")
        self.caption.setText(text)
        self.caption.setToolTip(literal_html(text))
        root = self._item(0)
        self.view.addTopLevelItem(root)
        root.setExpanded(True)
        self.view.setColumnWidth(0, max(220, self.view.width() // 2))

    def _item(self, node: int) -> QTreeWidgetItem:
        t = self.tree
        item = _Item()
        values = (t.names[node], int(t.total[node]), int(t.self_ns[node]),
                  int(t.count[node]), t.share(node))
        texts = (t.names[node], fmt_ns(values[1]), fmt_ns(values[2]), f"{values[3]:,}",
                 fmt_pct(values[4]))
        for c, (text, v) in enumerate(zip(texts, values)):
            item.setText(c, text)
            item.setData(c, _NODE + 1, v)
            if c:
                item.setTextAlignment(c, Qt.AlignmentFlag.AlignRight
                                      | Qt.AlignmentFlag.AlignVCenter)
        item.setData(0, _NODE, node)
        item.setToolTip(0, literal_html(t.names[node]))
        if t.children(node):
            item.addChild(QTreeWidgetItem())  # placeholder: filled when expanded
        self._items[node] = item
        return item

    def _fill_children(self, item: QTreeWidgetItem) -> None:
        node = item.data(0, _NODE)
        if self.tree is None or node is None or item.childCount() != 1 \
                or item.child(0).data(0, _NODE) is not None:
            return
        item.takeChildren()
        item.addChildren([self._item(c) for c in self.tree.children(node)])

    # -- choosing a call path ----------------------------------------------------------------
    def _on_frame(self, node: int) -> None:
        self.select_node(node)
        self._choose(node)

    def select_node(self, node: int) -> None:
        """Expand the tree down to ``node`` and select its row."""
        if self.tree is None:
            return
        path = []
        n = node
        while n >= 0:
            path.append(n)
            n = int(self.tree.parent[n])
        for n in reversed(path[1:]):
            self._items[n].setExpanded(True)
        item = self._items.get(node)
        if item is not None:
            self.view.setCurrentItem(item)
            self.view.scrollToItem(item)

    def _choose(self, node) -> None:
        """Highlight the instances of call path ``node`` and select the longest."""
        if self.tree is None or node is None:
            return
        inst = self.tree.instances(int(node))
        if not len(inst):
            return
        longest = int(inst[np.argmax(self.session.trace.slices.dur[inst])])
        self.session.show_instances(inst, focus=longest)
        if self.flame.item.selected != node:
            self.flame.item.selected = int(node)
            self.flame.item.update()


DOCK = DockSpec("calltree", "Call tree", "bottom", 70, 700, CallTreePanel, tab_with="breakdown")
