"""Bottlenecks dock: one card per finding, biggest share first.

Each card (:mod:`.finding_card`) shows the severity, title, share of steady-state
iteration time ("of step": the header's verdict is a share of the profiled time; a
hypothesis also says what its fix saves), the estimated speed-up (none for one-off work)
and the confidence; a click opens the summary, the causes (the ops / calls that make
up the time), the fixes that fit the run's facts (with the fact that makes each fit) and
the evidence. Causes and evidence are links that zoom the timeline to one instance (and
select its iteration). Cards are ranked by expected gain x confidence; the ones opened stay
open when the same finding comes back (a re-analysis). Observes the session's ``findings``
part and ``trace_changed``.

Per-fix actions: :meth:`FindingsPanel.add_fix_action_hook` registers a function called for
each fix of each card (it may call ``card.add_fix_button(fix_id, text)``); the panel's
``fix_action_requested(finding_id, fix_id)`` carries the clicks of such buttons.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QFrame, QScrollArea, QVBoxLayout, QWidget

from ...core.analysis.results import Finding, Fix
from ...core.analysis.shares import speedup_bound
from ...view.search import slice_at_span
from ..docks import DockSpec
from ..session import Session
from ..sliced import SlicedWork
from .common import plain_label, set_muted
from .finding_card import FindingCard, fix_id_of

#: Cards built per event-loop turn: laying one out takes ~10-30 ms, six at once stalled
#: the GUI for 100-250 ms right after the analysis.
CARDS_PER_TURN = 1

#: ``hook(card, fix_id, fix)``: called for every fix of every card built (see
#: :meth:`FindingsPanel.add_fix_action_hook`).
FixActionHook = Callable[[FindingCard, str, Fix], None]


class FindingsPanel(QWidget):
    """The Bottlenecks dock's widget: a scrolling list of :class:`FindingCard`;
    ``fix_action_requested(finding_id, fix_id)`` from any card's fix buttons."""

    fix_action_requested = Signal(str, str)

    def __init__(self, session: Session, parent=None):
        super().__init__(parent)
        self.session = session
        self.cards: list[FindingCard] = []
        self.expanded_ids: set[str] = set()  # findings the user opened
        self._fix_hooks: list[FixActionHook] = []
        self._shown: tuple = (None, None)  # (trace, findings) the cards are built for
        self._build = SlicedWork(self, per_turn=CARDS_PER_TURN)
        self._build.finished.connect(self.open_first_if_room)
        self.status = plain_label("No trace open", self, wrap=True)
        set_muted(self.status)
        self._inner = QWidget()
        self._list = QVBoxLayout(self._inner)
        self._list.setContentsMargins(0, 0, 0, 0)
        self._list.setSpacing(8)
        self._list.addStretch(1)
        scroll = self.scroll = QScrollArea(self)
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QFrame.Shape.NoFrame)
        scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        scroll.setWidget(self._inner)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(4, 4, 4, 4)
        lay.addWidget(self.status)
        lay.addWidget(scroll, 1)
        session.loading_started.connect(self._reload)
        session.job_cancelled.connect(self._reload)
        session.load_failed.connect(self._reload)
        session.trace_changed.connect(self._reload)
        session.on_analysis("iterations", self._reload)
        session.on_analysis("findings", self._reload)
        session.analysis_finished.connect(self._reload)
        session.job_crashed.connect(self._reload)

    def _clear(self) -> None:
        for card in self.cards:
            self._list.removeWidget(card)
            card.deleteLater()
        self.cards = []

    def _reload(self, *_args) -> None:
        """Status now; cards only when the findings changed, one per event-loop turn."""
        s = self.session
        findings = list(s.findings or [])  # ranked by the advisor (gain x confidence)
        self.status.setText(self._status_text(findings))
        if s.trace is self._shown[0] and s.findings is self._shown[1]:
            return  # e.g. analysis_finished after the findings part: same cards
        self._shown = (s.trace, s.findings)
        self._clear()
        origin = s.trace.start_ns if s.trace is not None else 0
        self._build.start(lambda: self._add_cards(findings, origin))

    def _add_cards(self, findings: list[Finding], origin: int):
        """Add one card per step (see :class:`~sofa_gui.qt.sliced.SlicedWork`)."""
        for rank, f in enumerate(findings, 1):
            card = FindingCard(f, rank, origin, self._inner)
            card.evidence_clicked.connect(lambda k, f=f: self.open_evidence(f, k))
            card.cause_clicked.connect(lambda k, f=f: self.open_cause(f, k))
            card.expanded_changed.connect(lambda on, i=f.id: self._remember_open(i, on))
            card.fix_action_requested.connect(self.fix_action_requested)
            card.set_expanded(f.id in self.expanded_ids)
            for hook in self._fix_hooks:
                self._run_hook(hook, card)
            self._list.insertWidget(self._list.count() - 1, card)
            self.cards.append(card)
            yield

    def open_first_if_room(self) -> None:
        """Open the first card when, open, it leaves the next two heads in view (nothing
        was opened by the user yet): the biggest finding reads at a glance."""
        if not self.cards or self.expanded_ids or self.cards[0].is_expanded():
            return
        first, last = self.cards[0], self.cards[min(2, len(self.cards) - 1)]
        first.set_expanded(True)
        self._inner.layout().activate()
        viewport = self.scroll.viewport()
        width = viewport.width()
        below = sum(c.heightForWidth(width) + self._list.spacing()
                    for c in self.cards[1:self.cards.index(last) + 1])
        if first.heightForWidth(width) + below > viewport.height():
            first.set_expanded(False)
        self.expanded_ids.discard(first.finding.id)  # opened for the user, not by them

    def _remember_open(self, finding_id: str, on: bool) -> None:
        (self.expanded_ids.add if on else self.expanded_ids.discard)(finding_id)

    def add_fix_action_hook(self, hook: FixActionHook) -> None:
        """Call ``hook(card, fix_id, fix)`` for each fix of the cards shown and of every
        card built from now on (e.g. to add a button with ``card.add_fix_button``)."""
        self._fix_hooks.append(hook)
        for card in self.cards:
            self._run_hook(hook, card)

    @staticmethod
    def _run_hook(hook: FixActionHook, card: FindingCard) -> None:
        for k, fix in enumerate(card.finding.fixes):
            hook(card, fix_id_of(fix, k), fix)

    def _status_text(self, findings) -> str:
        s = self.session
        if s.trace is None:
            return s.empty_text()
        if s.findings is None:
            return "Analyzing…" if s.busy else "Analysis did not finish"
        if not findings:
            if s.iterations is not None and len(s.iterations) == 0:
                return "No iterations, so no per-iteration advice."
            return "No bottleneck stands out: the run looks balanced."
        sped = [f for f in findings if f.estimated_speedup is not None]
        top = max(sped, key=lambda f: f.estimated_speedup) if sped else None
        best = f" · best single fix: {speedup_bound(top)}" if top else ""
        return f"{len(findings)} findings, best expected gain × confidence first{best}"

    def open_evidence(self, finding: Finding, k: int) -> None:
        """Zoom the timeline to evidence ``k`` of ``finding``, select its iteration and
        the slice it names (shown in Details)."""
        self._show(finding.evidence[k])

    def open_cause(self, finding: Finding, k: int) -> None:
        """Zoom the timeline to the instance of cause ``k`` of ``finding`` and select it."""
        ev = finding.causes[k].instance
        if ev is not None:
            self._show(ev)

    def _show(self, ev) -> None:
        s = self.session
        if ev.iteration is not None:
            s.select_iteration(int(ev.iteration), zoom=False)
        s.zoom_to(ev.start_ns, ev.end_ns, pad=True)
        if s.trace is not None:
            i = slice_at_span(s.trace, ev.start_ns, ev.end_ns, ev.lanes)
            if i >= 0:
                s.select_slice(i)


DOCK = DockSpec("findings", "Bottlenecks", "right", 10, 560, FindingsPanel)
