"""The session's declared signals and its table of event handlers."""

from __future__ import annotations

import dataclasses

import pytest
from PySide6.QtCore import Signal

from sofa_gui.app import events
from sofa_gui.core.analysis.pipeline import PARTS
from sofa_gui.core.fleet.runset import RankFile
from sofa_gui.core.fleet.summary import RankSummary
from sofa_gui.qt.session import Session, part_signal_name


def test_every_analysis_part_has_a_signal_declared_on_the_class():
    for part in PARTS:
        assert isinstance(Session.__dict__.get(part_signal_name(part)), Signal), part


def test_every_event_the_session_receives_has_a_handler():
    handled = set(Session._HANDLERS)
    gui_events = {cls for _n, cls in vars(events).items()
                  if isinstance(cls, type) and dataclasses.is_dataclass(cls)
                  and cls.__module__ == events.__name__}
    # CompareReady goes to the Compare dock's own worker, never to the session
    assert handled == gui_events - {events.CompareReady}


def test_an_event_without_a_handler_is_an_error(qtbot):
    s = Session()
    with pytest.raises(TypeError, match="CompareReady"):
        s._on_result(events.CompareReady(trace=None, analysis=None))
    s.shutdown()


def test_fleet_events_fill_the_session_and_emit_their_signals(qtbot, tmp_path):
    s = Session()
    files = [RankFile(r, tmp_path / f"rank{r}.json", "file name") for r in range(2)]
    with qtbot.waitSignal(s.fleet_started, timeout=1000):
        s._on_result(events.FleetStarted(str(tmp_path), files))
    assert s.fleet_path == str(tmp_path) and s.fleet_files == files
    summary = RankSummary(1, str(files[1].path))
    with qtbot.waitSignal(s.fleet_rank_done, timeout=1000) as got:
        s._on_result(events.FleetRankDone(summary))
    assert got.args == [summary] and s.fleet_summaries == [summary]
    with qtbot.waitSignal(s.fleet_changed, timeout=1000):
        s._on_result(events.FleetDone("result"))
    assert s.fleet == "result"
    s.shutdown()
