"""GUI updates built in slices (sofa_gui.qt.sliced) and the panels that use them."""

from __future__ import annotations

import dataclasses
import logging

import pytest
from PySide6.QtGui import QFont
from PySide6.QtWidgets import QLabel

from sofa_gui.core.samples import demo_trace_path
from sofa_gui.qt import sliced
from sofa_gui.qt.panels.common import WrapLabel, plain_label, rich_label
from sofa_gui.qt.sliced import SlicedWork


def _recording(work: SlicedWork, n: int, log: list):
    """n steps, each noting the event-loop turn it ran in."""
    for k in range(n):
        log.append((work.turns, k))
        yield


def test_steps_run_at_most_per_turn_each_event_loop_turn(qtbot):
    work = SlicedWork(per_turn=3)
    ran: list = []
    work.start(lambda: _recording(work, 10, ran))
    assert ran == [] and work.pending and sliced.pending()  # nothing before the loop turns
    with qtbot.waitSignal(work.finished, timeout=5000):
        pass
    assert [k for _t, k in ran] == list(range(10))
    per_turn = [t for t, _k in ran]
    assert max(per_turn.count(t) for t in set(per_turn)) == 3
    assert work.turns >= 4 and not work.pending and not sliced.pending()


def test_a_new_start_replaces_the_build_and_cancel_stops_it(qtbot):
    work = SlicedWork(per_turn=1)
    old, new = [], []
    work.start(lambda: _recording(work, 100, old))
    qtbot.waitUntil(lambda: len(old) >= 2)
    work.start(lambda: _recording(work, 3, new))
    seen = len(old)
    qtbot.waitUntil(lambda: not work.pending)
    assert len(old) == seen and [k for _t, k in new] == [0, 1, 2]
    work.start(lambda: _recording(work, 100, old))
    work.cancel()
    qtbot.wait(20)
    assert len(old) == seen and not work.pending


def test_drain_finishes_every_pending_build_at_once(qtbot):
    a, b = SlicedWork(per_turn=1), SlicedWork(per_turn=2)
    ra, rb = [], []
    a.start(lambda: _recording(a, 7, ra))
    b.start(lambda: _recording(b, 5, rb))
    sliced.drain()
    assert len(ra) == 7 and len(rb) == 5 and not sliced.pending()


def test_a_failing_step_is_logged_and_ends_the_build(qtbot, caplog):
    work = SlicedWork()

    def steps():
        yield
        raise RuntimeError("boom")

    with caplog.at_level(logging.ERROR, logger="sofa_gui.qt.sliced"):
        work.start(steps)
        qtbot.waitUntil(lambda: not work.pending)
    assert "sliced GUI update failed" in caplog.text


@pytest.fixture
def demo_window(open_window):
    return open_window(demo_trace_path())


def test_finding_cards_are_added_one_per_turn_and_not_rebuilt_when_unchanged(qtbot, demo_window):
    panel = demo_window.panels["findings"]
    s = demo_window.session
    cards = list(panel.cards)
    assert len(cards) == len(s.findings) >= 3
    s.analysis_finished.emit()  # same trace, same findings: the same cards stay
    s.findings_changed.emit()
    assert panel.cards == cards and not sliced.pending()

    counts: list[int] = []
    turn = panel._build._turn

    def counting_turn(*args):
        turn(*args)
        counts.append(len(panel.cards))

    panel._build._timer.timeout.disconnect()
    panel._build._timer.timeout.connect(counting_turn)
    s.analysis = dataclasses.replace(s.analysis, findings=list(s.findings))
    s.findings_changed.emit()  # new findings: rebuilt, nothing built in the slot itself
    assert panel.cards == []
    qtbot.waitUntil(lambda: not panel._build.pending)
    steps = [b - a for a, b in zip([0] + counts, counts)]
    assert max(steps) == 1 and counts[-1] == len(s.findings)
    assert [c.finding for c in panel.cards] == s.findings


def test_wrap_label_size_hints_follow_text_and_font(qtbot):
    for lab in (plain_label("short", wrap=True), rich_label()):
        qtbot.addWidget(lab)
        lab.setText("short")
        small = (lab.sizeHint(), lab.heightForWidth(120))
        assert lab.sizeHint() == small[0] and lab.heightForWidth(120) == small[1]
        lab.setText("a much longer text that wraps over several lines " * 4)
        longer = (lab.sizeHint(), lab.heightForWidth(120))
        assert longer[1] > small[1] and longer[0] != small[0]
        ref = QLabel()
        ref.setTextFormat(lab.textFormat())
        ref.setWordWrap(True)
        ref.setText(QLabel.text(lab))  # what the label shows
        assert longer[1] == ref.heightForWidth(120)  # the same answer as Qt's own
        f = QFont(lab.font())
        f.setPointSize(f.pointSize() * 3)
        lab.setFont(f)
        assert lab.heightForWidth(120) > longer[1]  # the font change was seen
        lab.setWordWrap(False)
        assert lab.heightForWidth(120) < longer[1] * 3  # one line now
    assert isinstance(plain_label("x", wrap=True), WrapLabel)


def test_a_cached_reopen_reaches_the_panels_one_result_per_turn(qtbot, demo_window):
    """Every part of a cached analysis arrives at once; the session hands them on one per
    event-loop turn, in order, and is busy until the last is shown."""
    from sofa_gui.core.analysis.pipeline import PARTS, STEPS

    s = demo_window.session
    seen: list = []
    loop_turns = [0]  # delivery turns so far, over every build
    s._delivery._timer.timeout.connect(lambda: loop_turns.__setitem__(0, loop_turns[0] + 1))

    def note(what):
        return lambda *_a: seen.append((what, loop_turns[0], s.busy))

    s.trace_changed.connect(note("trace"))
    for part in PARTS:
        s.on_analysis(part, note(part))
    s.analysis_finished.connect(note("finished"))
    s.busy_changed.connect(lambda busy: seen.append(("busy", busy, s.busy)))
    demo_window.open_path(demo_trace_path())
    qtbot.waitUntil(lambda: ("busy", False, False) in seen, timeout=60_000)
    names = [w for w, *_ in seen if w != "busy"]
    assert names == ["trace", *[step.part for step in STEPS], "finished"]
    deliveries = [(w, turn) for w, turn, _busy in seen if w != "busy"]
    turns = [turn for _w, turn in deliveries]
    assert len(set(turns)) == len(turns)  # never two results in one turn
    assert all(busy for w, _t, busy in seen if w not in ("busy", "finished"))
    assert not s.busy and s.analysis_done and len(s.findings) >= 3


def test_results_of_a_replaced_request_are_not_shown(qtbot, demo_window):
    s = demo_window.session
    shown = []
    s.findings_changed.connect(lambda: shown.append(s.pending_path))
    demo_window.open_path(demo_trace_path())
    qtbot.waitUntil(lambda: bool(s._inbox) or not s.busy, timeout=60_000)
    s.cancel()  # whatever the first request still had to show is dropped
    assert not s._inbox and not s._delivery.pending and not s.busy
    qtbot.wait(50)
    assert shown == []


def test_the_turn_slot_takes_no_limit_and_finish_now_runs_the_rest(qtbot):
    """The timer's slot runs ``per_turn`` steps; ``finish_now`` everything left (was one
    ``_turn(limit)`` with -1 meaning 'per_turn' and None 'all')."""
    work = SlicedWork(per_turn=2)
    ran: list = []
    work.start(lambda: _recording(work, 7, ran))
    work._timer.stop()  # turns by hand
    work._turn()
    assert len(ran) == 2 and work.pending
    with pytest.raises(TypeError):
        work._turn(None)
    work.finish_now()
    assert len(ran) == 7 and not work.pending
