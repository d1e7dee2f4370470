"""The app header says what limits the run first: the verdict's bound and share (of the
profiled time, saying so), its basis in the tooltip, for a small Keras capture
(tests/data/keras-fit-python-map)."""

from __future__ import annotations

from pathlib import Path

from sofa_gui.core.units import fmt_pct
from sofa_gui.qt.panels.summary import FIELDS

KERAS = Path(__file__).resolve().parents[1] / "data" / "keras-fit-python-map"


def test_header_shows_the_verdict_first(open_window):
    w = open_window(KERAS)
    v = w.session.analysis.verdict
    assert v is not None and v.bound
    assert FIELDS[0] == "Limited by"
    header = w.summary
    assert header.text_of("Limited by") == f"{v.label} ({fmt_pct(v.share)} of profiled time)"
    assert v.basis.split(" on ")[0] in header.values["Limited by"].toolTip()
