"""Values and names are never broken or cut where a reader needs them whole."""

from __future__ import annotations

import pytest
from PySide6.QtWidgets import QLabel
from timeline_fixtures import small_trace

from sofa_gui.core.samples import demo_trace_path
from sofa_gui.qt.panels.common import breakable


@pytest.mark.parametrize("text", ["460.614 ms", "host_copies pageable", "1,234,567 events",
                                  "dataloader single_process (num_workers is 0)"])
def test_numbers_and_short_words_get_no_break_chances(text):
    assert breakable(text) == text


def test_long_names_still_break_at_punctuation():
    shown = breakable("void at::native::vectorized_elementwise_kernel<4, float>(int)")
    assert "\u200b" in shown and shown.replace("\u200b", "").startswith("void at::native::")


def test_run_facts_line_keeps_host_copies_whole(qtbot, open_window):
    w = open_window(demo_trace_path(), (1280, 800))
    line = w.summary.run_line
    shown = QLabel.text(line)  # what the label lays out
    assert "host_copies pageable" in shown and "\u200b" not in shown.split("host_copies")[1][:3]


@pytest.mark.parametrize("width", [500, 777, 1000, 1301])
def test_the_last_time_axis_label_is_not_cut(make_timeline, width):
    w = make_timeline(small_trace(), size=(width, 300))
    axis = w.time_axis
    boxes = axis.label_boxes()
    right = axis.boundingRect().right()
    assert boxes and all(lx >= 0 and lx + wd <= right + 0.5 for _t, lx, wd in boxes)
    majors, _minor, labels = axis.ticks()
    assert boxes[-1][0] == labels[-1]  # the last tick keeps its label
