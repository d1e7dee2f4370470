"""The app shows the advisor's warm-up, the one its verdict and findings use.

The iterations are shown as soon as they are found, with the detector's marks; once
the run facts are read, the analysis's ``warmup`` part marks the advisor's and the
timeline's hatching and tags, the Iterations panel's Step column and summary follow,
with no second hand-over of the iterations: the selection stays, the view state is
written once. Real captures of the diagnosis corpus on which the two markings part.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from test_app_window import open_and_wait, settings, window  # noqa: F401 (fixtures)

from sofa_gui.qt.panels.iterations import COLUMNS
from sofa_gui.view.state import Change

CORPUS = Path(__file__).resolve().parents[1] / "data" / "corpus"
STEP = COLUMNS.index("Step")

#: capture -> the advisor's warm-up (the detector marks only iteration 0 on both)
CASES = {
    "tf_fit_csv_dataset/capture-1": [0, 1],
    "pt_train_pt_files_nw2/capture-2.json.gz": [],  # a loader-paced first step: steady
}


def _step_texts(win) -> list[str]:
    m = win.panels["iterations"].model
    return [m.data(m.index(m.row_of(i), STEP)) for i in range(m.rowCount())]


@pytest.mark.parametrize("capture", sorted(CASES))
def test_the_advisors_warmup_is_marked_and_the_selection_stays(qtbot, window, capture):  # noqa: F811
    path = CORPUS / capture
    if not path.exists():
        pytest.skip("no diagnosis corpus")
    s, warm = window.session, CASES[capture]
    changes, writes, parts = [], [], []
    s.view.subscribe(changes.append)
    real = s.view.set_iterations
    s.view.set_iterations = lambda *a: (writes.append(a), real(*a))
    s.warmup_changed.connect(lambda: parts.append("warmup"))

    def pick() -> None:  # the user picks a steady iteration as soon as they show
        parts.append("iterations")
        s.select_iteration(3, zoom=False)

    s.iterations_changed.connect(pick)
    open_and_wait(qtbot, window, path)

    assert parts == ["iterations", "warmup"]
    assert np.flatnonzero(s.iterations.warmup).tolist() == warm == s.analysis.warmup.tolist()
    tl = window.timeline
    assert np.flatnonzero(tl.model.iter_marks.warmup).tolist() == warm
    assert ["warm-up" in tl.iteration_text(i) for i in range(3)] == [i in warm for i in range(3)]
    texts = _step_texts(window)
    assert [i for i, t in enumerate(texts) if "warm-up" in t] == warm
    status = window.panels["iterations"].status.text()
    assert (f"{len(warm)} warm-up (hatched)" in status) == bool(warm)
    # the selection made when the iterations showed survives the new marks
    assert s.selected_iteration == 3 and tl.model.selected_iteration == 3
    table = window.panels["iterations"].table
    rows = [window.panels["iterations"].model.iteration_at(ix.row())
            for ix in table.selectionModel().selectedRows()]
    assert rows == [3]
    assert len(writes) == 1 and changes.count(Change.TRACE) == 1


def test_new_marks_keep_the_rows_and_follow_a_sort_by_step(qtbot, window):  # noqa: F811
    """Sorted by the Step column, new marks re-sort the rows in place (no model reset):
    the selected iteration stays selected, on its new row."""
    from PySide6.QtCore import Qt

    path = CORPUS / "tf_fit_csv_dataset" / "capture-1"
    if not path.exists():
        pytest.skip("no diagnosis corpus")
    s = open_and_wait(qtbot, window, path)
    panel = window.panels["iterations"]
    panel.table.sortByColumn(STEP, Qt.SortOrder.DescendingOrder)
    s.select_iteration(1, zoom=False)
    resets = []
    panel.model.modelReset.connect(lambda: resets.append(1))
    s.iterations.mark_warmup(0)  # as the detector might have had it
    s.warmup_changed.emit()
    assert resets == [] and not any("warm-up" in t for t in _step_texts(window))
    s.iterations.mark_warmup(2)
    s.warmup_changed.emit()
    m = panel.model
    shown = [m.data(m.index(r, STEP)) for r in range(m.rowCount())]
    assert resets == [] and shown == sorted(shown, reverse=True)
    assert "warm-up" in shown[m.row_of(1)]
    rows = [m.iteration_at(ix.row()) for ix in panel.table.selectionModel().selectedRows()]
    assert rows == [1] and s.selected_iteration == 1
    assert "2 warm-up (hatched)" in panel.status.text()
