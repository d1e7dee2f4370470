"""The app prints the numbers the CLI prints, on the sample and two HTA traces: the
header's median iteration and event count, the Iterations table, the Breakdown status
and the timeline band's tooltip all give each step its ProfilerStep duration from the
file and one median iteration (``test_surfaces_agree.py`` checks the CLI's side)."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from surfaces import TRACES, file_steps, median_of, trace_path

from sofa_gui.core.summary import trace_dict
from sofa_gui.core.units import fmt_ns


@pytest.mark.parametrize("key", list(TRACES))
def test_header_table_breakdown_and_band_agree_with_the_file(open_window, qtbot, key):
    win = open_window(trace_path(key))
    s = win.session
    durs = [d for _n, d in file_steps(key)]
    k, med = median_of(durs)
    assert win.summary.text_of("Median iteration") == fmt_ns(med)
    assert win.summary.text_of("Events") == f"{trace_dict(s.trace)['events']:,}"
    model = win.panels["iterations"].model
    rows = {model.iteration_at(r): model.index(r, 3).data() for r in range(model.rowCount())}
    assert [rows[i] for i in range(len(durs))] == [fmt_ns(d) for d in durs]
    assert model.headerData(4, Qt.Orientation.Horizontal) == f"Δ vs #{k}"
    status = win.panels["breakdown"].status
    for i, d in enumerate(durs):
        s.select_iteration(i, zoom=False)
        assert status.text().startswith(f"Iteration {i}: {fmt_ns(d)}")
        assert f"median #{k}: {fmt_ns(med)}" in status.text()
        assert f"duration: {fmt_ns(d)}" in win.timeline.iteration_text(i)
    if s.iterations.device_lags:  # the device window: a second, labelled number
        last = len(durs) - 1
        assert "after the step" in status.text() and "(device " in status.text()
        assert "after the step" in win.timeline.iteration_text(last)
