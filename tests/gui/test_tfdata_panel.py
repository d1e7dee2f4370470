"""The tf.data dock and the tf.data lane group, on the real generator-pipeline capture."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QPoint, Qt
from test_app_window import open_and_wait, settings, window  # noqa: F401  (main-window fixtures)

TF = Path(__file__).resolve().parents[1] / "data" / "tf"


def test_logdir_shows_stage_tree_bottleneck_and_tf_data_lanes(qtbot, request):
    win = request.getfixturevalue("window")
    s = open_and_wait(qtbot, win, TF / "generator")  # the TensorBoard logdir itself
    panel = win.panels["tfdata"]
    tree = panel.tree
    root = tree.topLevelItem(0)
    assert root.text(0) == "Root"
    chain = [root]
    while chain[-1].childCount():
        chain.append(chain[-1].child(0))
    assert [it.text(0).split(" ")[0] for it in chain] == [
        "Root", "Prefetch", "BatchV2", "FlatMap", "Generator"]
    gen = chain[-1]
    assert "← bottleneck" in gen.text(0) and gen.font(0).bold()
    assert "from_generator" in gen.text(0) and not chain[2].font(0).bold()
    assert "Python input (from_generator)" in panel.header.text()
    # a click on the stage selects its longest GetNext on the timeline
    tree.scrollToItem(gen)
    rect = tree.visualItemRect(gen)
    assert rect.isValid() and tree.isVisible()
    pos = QPoint(rect.left() + 8, rect.center().y())
    qtbot.mouseClick(tree.viewport(), Qt.MouseButton.LeftButton, pos=pos)
    assert gen.data(0, Qt.ItemDataRole.UserRole) is not None, "no slice stored"
    assert s.selected_slice >= 0, (gen.data(0, Qt.ItemDataRole.UserRole), rect,
                                   tree.viewport().size())
    assert s.trace.name_of(s.selected_slice) == "Iterator::Generator"
    # the tf.data threads are one group of lanes on the timeline
    layout = win.timeline.model.layout
    assert "tf.data" in layout.groups
    tf_lanes = [ln.lane for ln in layout.lines if ln.kind == "lane" and ln.group == "tf.data"]
    assert tf_lanes and all(s.trace.lanes.name[i].startswith("tf_data") for i in tf_lanes)


def test_without_tf_data_the_panel_says_so(qtbot, request):
    win = request.getfixturevalue("window")
    open_and_wait(qtbot, win, TF / "jax_train")
    panel = win.panels["tfdata"]
    assert panel.tree.topLevelItemCount() == 0
    assert "No tf.data pipeline" in panel.header.text()
    assert win.docks["tfdata"].isHidden()  # PyTorch-style runs do not get an empty dock
    open_and_wait(qtbot, win, TF / "serial_map")
    assert not win.docks["tfdata"].isHidden()
    assert "MapAndBatch" in panel.header.text()


def test_header_top_bottleneck_is_the_advisors_first_finding(qtbot, request):
    """jax_train: its slow first profiled steps (a tentative slow start, gain x confidence
    0.15) must not be shown over compute_bound, the advisor's first finding."""
    win = request.getfixturevalue("window")
    s = open_and_wait(qtbot, win, TF / "jax_train")
    assert s.findings[0].id == "compute_bound"
    assert max(s.findings, key=lambda f: f.rank_key).id != "compute_bound"  # the old pick
    assert win.summary.text_of("Top bottleneck").startswith(s.findings[0].title)
