"""Call tree dock on the real ResNet-50 sample: the tree and the icicle graph of the
selected iteration, a click on a frame or a row highlights that call path's instances."""

from __future__ import annotations

import numpy as np
import pytest
from PySide6 import QtCore

from sofa_gui.core.analysis import calltree

LEFT = QtCore.Qt.MouseButton.LeftButton


@pytest.fixture
def win(docked):
    return docked("calltree")


def test_flame_graph_of_the_selected_iteration_and_a_click_on_a_frame(win, qtbot):
    panel, s = win.panels["calltree"], win.session
    s.select_iteration(2, zoom=True)
    panel.choose(scope="iteration")
    tree = panel.tree
    lanes, label = calltree.pick_lanes(s.trace, None)
    want = calltree.build(s.trace, lanes, calltree.scope_of(s.iterations, 2), lane_label=label)
    assert tree.scope == want.scope and int(tree.total[0]) == int(want.total[0])
    assert panel.flame.tree is tree and len(panel.flame.item.nodes) == len(tree)
    assert panel.caption.text().startswith("iteration 2")
    # the widest frame under the step: click it in the graph
    step = tree.children(0)[0]
    node = tree.children(step)[0]
    qtbot.waitUntil(lambda: panel.flame.frame_rect(node) is not None
                    and panel.flame.frame_rect(node).width() > 4)
    rect = panel.flame.frame_rect(node)
    qtbot.mouseClick(panel.flame.viewport(), LEFT, pos=rect.center().toPoint())
    inst = tree.instances(node)
    assert len(inst) == tree.count[node]
    np.testing.assert_array_equal(s.matches, inst)
    assert s.selected_slice == int(inst[np.argmax(s.trace.slices.dur[inst])])
    assert panel.flame.item.selected == node
    cur = panel.view.currentItem()
    assert cur is not None and cur.data(0, QtCore.Qt.ItemDataRole.UserRole + 1) == node


def test_tree_rows_bottom_up_and_all_threads(win, qtbot):
    panel, s = win.panels["calltree"], win.session
    panel.choose(scope="trace")
    root = panel.view.topLevelItem(0)
    assert root.isExpanded() and root.childCount() == len(panel.tree.children(0))
    first = root.child(0)
    first.setExpanded(True)  # children are made when a row opens
    node = first.data(0, QtCore.Qt.ItemDataRole.UserRole + 1)
    assert first.childCount() == len(panel.tree.children(node))
    rect = panel.view.visualRect(panel.view.indexFromItem(first, 0))
    qtbot.mouseClick(panel.view.viewport(), LEFT, pos=rect.center())
    np.testing.assert_array_equal(s.matches, panel.tree.instances(node))
    panel.choose(bottom_up=True)
    assert panel.tree.bottom_up and "callers" in panel.caption.text()
    hot = panel.tree.children(0)[0]
    assert panel.tree.self_ns[hot] == max(panel.tree.self_ns[c] for c in panel.tree.children(0))
    panel.choose(lane="rank -1", bottom_up=False)
    assert panel.tree.lane == "all threads of rank -1"
    threads = panel.tree.children(0)
    assert len(threads) >= 2 and all(panel.tree.level[t] == 1 for t in threads)
