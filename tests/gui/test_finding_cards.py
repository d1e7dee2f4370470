"""Bottlenecks as cards: a short head each until clicked; a hook for per-fix actions."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QPushButton

from sofa_gui.core.samples import demo_trace_path


def _line_height(widget) -> int:
    return widget.fontMetrics().height()


def test_cards_are_short_heads_and_the_top_three_fit_at_1280x800(qtbot, open_window):
    w = open_window(demo_trace_path(), (1280, 800))
    panel = w.panels["findings"]
    cards = panel.cards
    assert len(cards) >= 3
    viewport = panel.scroll.viewport()
    assert all(not c.is_expanded() for c in cards[1:])
    for card in cards[:3]:
        head = card.head
        # the title (a long one wraps once) beside two short lines: the share and what it
        # is of, then gain and confidence
        lines = 1 if card.title.fontMetrics().horizontalAdvance(f"{card.finding.title}") < (
            card.title.width()) else 2
        assert head.height() <= max(lines * _line_height(card.title),
                                    2 * _line_height(card.figures)) + 8
        f = card.finding
        share, gain = card.figures.text().splitlines()
        assert "% of step" in share and f"conf {f.confidence:.2f}" in gain
        bottom = card.mapTo(viewport, card.rect().bottomLeft()).y()
        assert bottom <= viewport.height(), "the top three cards fit without scrolling"
    # the first opens by itself only when the next two heads stay in view
    opened = cards[0].is_expanded()
    cards[0].set_expanded(True)
    qtbot.wait(20)
    room = cards[2].mapTo(viewport, cards[2].rect().bottomLeft()).y() <= viewport.height()
    assert opened == room
    assert cards[0].title.toolTip()  # the full title is in the tooltip


def test_clicking_a_head_opens_and_closes_the_card_and_it_stays_open(qtbot, open_window):
    w = open_window(demo_trace_path(), (1280, 800))
    panel = w.panels["findings"]
    card = panel.cards[1]
    qtbot.mouseClick(card.head, Qt.MouseButton.LeftButton, pos=card.head.rect().center())
    assert card.is_expanded() and card.body.isVisible()
    assert card.causes.isVisible() and card.fix_labels and card.evidence.isVisible()
    assert card.finding.id in panel.expanded_ids
    w.session.reanalyze()  # the same finding comes back: still open
    qtbot.waitUntil(lambda: not w.session.busy, timeout=60000)
    from sofa_gui.qt import sliced

    qtbot.waitUntil(lambda: not sliced.pending(), timeout=60000)
    again = panel.cards[1]
    assert again.finding.id == card.finding.id and again.is_expanded()
    qtbot.mouseClick(again.head, Qt.MouseButton.LeftButton, pos=again.head.rect().center())
    assert not again.is_expanded() and again.body.isHidden()
    again.setFocus()
    qtbot.keyClick(again, Qt.Key.Key_Space)  # the keyboard opens it too
    assert again.is_expanded()


def test_fix_action_hook_puts_a_button_on_each_fix_that_names_it(qtbot, open_window):
    w = open_window(demo_trace_path(), (1280, 800))
    panel = w.panels["findings"]
    seen = []
    panel.add_fix_action_hook(
        lambda card, fix_id, fix: card.add_fix_button(fix_id, "Try it", f"Try {fix.text}"))
    panel.fix_action_requested.connect(lambda fid, xid: seen.append((fid, xid)))
    card = panel.cards[0]
    card.set_expanded(True)
    buttons = card.body.findChildren(QPushButton)
    assert len(buttons) == len(card.finding.fixes) == len(card.fix_ids())
    qtbot.mouseClick(buttons[0], Qt.MouseButton.LeftButton)
    assert seen == [(card.finding.id, card.fix_ids()[0])]
    assert card.fix_ids()[0] == (card.finding.fixes[0].name or "fix0")


def test_a_lower_bound_estimate_reads_at_least_on_the_card():
    from sofa_gui.core.analysis.results import Finding
    from sofa_gui.qt.panels.finding_card import headline, numbers_text

    f = Finding("recompile", "Recompilation in every step", "high", 0.98, 68.2, "", [], [],
                confidence=0.87)
    assert "68.20× · conf 0.87" in headline(f) and "up to 68.20× faster" in numbers_text(f)
    f.estimate_floor = True
    assert "≥68.20× · conf 0.87" in headline(f) and "at least 68.20× faster" in numbers_text(f)
