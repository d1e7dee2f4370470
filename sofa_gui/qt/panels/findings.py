"""Bottlenecks dock: one card per finding, biggest share first.

Each card shows title, severity, share of steady-state iteration time, the estimated
speed-up if it were removed (none for one-off work) and the confidence, the summary,
the causes (the ops / calls that make up the time), the fixes that fit the run's facts
(with the fact that makes each fit) and the evidence.  Causes and evidence are links
that zoom the timeline to one instance (and select its iteration). Cards are ranked by
expected gain x confidence. Observes the session's ``findings`` part and ``trace_changed``.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QScrollArea,
    QSizePolicy,
    QVBoxLayout,
    QWidget,
)

from ...core.analysis.results import Finding
from ...core.units import fmt_ns, fmt_pct
from ...view.search import slice_at_span
from ..docks import DockSpec
from ..session import Session
from ..sliced import SlicedWork
from .common import SEVERITY_COLORS, breakable, esc, plain_label, rich_label, set_muted

_FRAMEWORK = {"pytorch": "PyTorch", "tensorflow": "TensorFlow", "jax": "JAX",
              "tensorflow/jax": "TensorFlow / JAX", "any": "Any framework"}
#: Evidence links shown per card before "… and N more".
MAX_EVIDENCE = 8
#: Cards built per event-loop turn: laying one out takes ~10-30 ms, six at once stalled
#: the GUI for 100-250 ms right after the analysis.
CARDS_PER_TURN = 1


class SeverityBadge(QLabel):
    """A small coloured pill with the severity in capitals."""

    def __init__(self, severity: str, parent=None):
        super().__init__(severity.upper(), parent)
        self.setTextFormat(Qt.TextFormat.PlainText)
        color = SEVERITY_COLORS.get(severity, SEVERITY_COLORS["low"])
        self.setStyleSheet(f"QLabel {{ background: {color}; color: white; border-radius: 3px;"
                           " padding: 1px 6px; font-weight: bold; font-size: 8pt; }")
        self.setSizePolicy(QSizePolicy.Policy.Fixed, QSizePolicy.Policy.Fixed)


class FindingCard(QFrame):
    """One finding; ``evidence_clicked(index)`` / ``cause_clicked(index)`` when an
    evidence or cause link is activated."""

    evidence_clicked = Signal(int)
    cause_clicked = Signal(int)

    def __init__(self, finding: Finding, rank: int, origin_ns: int, parent=None):
        super().__init__(parent)
        self.finding = finding
        self.setObjectName("findingCard")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(10, 8, 10, 8)
        lay.setSpacing(4)
        head = QHBoxLayout()
        head.addWidget(SeverityBadge(finding.severity, self))
        self.title = plain_label(f"{rank}. {finding.title}", self, bold=True, wrap=True)
        head.addWidget(self.title, 1)
        lay.addLayout(head)
        if finding.estimated_speedup is None:
            numbers = (f"{fmt_ns(finding.one_off_ns)} one-off ({fmt_pct(finding.share)} of the "
                       f"profile) · no per-step speed-up")
        else:
            numbers = (f"{fmt_pct(finding.share)} of steady-state iteration time · "
                       f"up to {finding.estimated_speedup:.2f}× faster "
                       + (f"with {finding.estimated_by}" if finding.estimated_by
                          else "if removed"))
        numbers += f" · confidence {finding.confidence:.2f}"
        self.numbers = plain_label(numbers, self, wrap=True)
        set_muted(self.numbers)
        lay.addWidget(self.numbers)
        if finding.summary:
            lay.addWidget(plain_label(finding.summary, self, wrap=True, selectable=True))
        if finding.causes:
            self.causes = rich_label(self)
            self.causes.setText(_causes_html(finding, origin_ns))
            self.causes.linkActivated.connect(self._on_link)
            lay.addWidget(self.causes)
        if finding.fixes:
            self.fixes = rich_label(self)
            self.fixes.setText(_fixes_html(finding))
            self.fixes.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
            lay.addWidget(self.fixes)
        if finding.evidence:
            self.evidence = rich_label(self)
            self.evidence.setText(_evidence_html(finding, origin_ns))
            self.evidence.linkActivated.connect(self._on_link)
            lay.addWidget(self.evidence)

    def _on_link(self, href: str) -> None:
        if href.startswith("ev:"):
            self.evidence_clicked.emit(int(href[3:]))
        elif href.startswith("cause:"):
            self.cause_clicked.emit(int(href[6:]))


def _fixes_html(f: Finding) -> str:
    def notes(x) -> str:  # trace names inside (e.g. a DataLoader's) must wrap too
        return "".join(f" <small><i>({esc(breakable(w))})</i></small>"
                       for w in (x.because, x.estimate_label) if w)

    items = "".join(
        f"<li><b>{esc(_FRAMEWORK.get(x.framework, x.framework))}:</b> {esc(breakable(x.text))}"
        f"{notes(x)}</li>" for x in f.fixes)
    hidden = (f"<small>{len(f.hidden_fixes)} more do not fit this run's facts.</small>"
              if f.hidden_fixes else "")
    return f"<b>Suggested fixes</b><ul style='margin-left:-20px'>{items}</ul>{hidden}"


def _causes_html(f: Finding, origin_ns: int) -> str:
    rows = []
    for k, c in enumerate(f.causes):
        text = f"{esc(c.label)}: {esc(fmt_ns(c.total_ns))} in {c.count} ({fmt_pct(c.share)})"
        if c.instance is not None:
            at = fmt_ns(c.instance.start_ns - origin_ns)
            text = f"<a href='cause:{k}'>{text}</a> <small>(one at {esc(at)})</small>"
        rows.append(text)
    return "<b>Causes</b> <small>(click to see one)</small><br>" + "<br>".join(rows)


def _evidence_html(f: Finding, origin_ns: int) -> str:
    links = []
    for k, ev in enumerate(f.evidence[:MAX_EVIDENCE]):
        where = f"{(ev.start_ns - origin_ns) / 1e6:,.3f} ms, {fmt_ns(ev.end_ns - ev.start_ns)}"
        label = esc(breakable(ev.label))
        links.append(f"<a href='ev:{k}'>{label}</a> <small>({esc(where)})</small>")
    more = len(f.evidence) - MAX_EVIDENCE
    tail = f"<br>… and {more} more" if more > 0 else ""
    return "<b>Evidence</b> <small>(click to zoom)</small><br>" + "<br>".join(links) + tail


class FindingsPanel(QWidget):
    """The Bottlenecks dock's widget: a scrolling list of :class:`FindingCard`."""

    def __init__(self, session: Session, parent=None):
        super().__init__(parent)
        self.session = session
        self.cards: list[FindingCard] = []
        self._shown: tuple = (None, None)  # (trace, findings) the cards are built for
        self._build = SlicedWork(self, per_turn=CARDS_PER_TURN)
        self.status = plain_label("No trace open", self, wrap=True)
        set_muted(self.status)
        self._inner = QWidget()
        self._list = QVBoxLayout(self._inner)
        self._list.setContentsMargins(0, 0, 0, 0)
        self._list.setSpacing(8)
        self._list.addStretch(1)
        scroll = QScrollArea(self)
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
            self._list.insertWidget(self._list.count() - 1, card)
            self.cards.append(card)
            yield

    def _status_text(self, findings) -> str:
        s = self.session
        if s.trace is None:
            return s.empty_text()
        if s.findings is None:
            return "Analysing…" if s.busy else "Analysis did not finish"
        if not findings:
            if s.iterations is not None and len(s.iterations) == 0:
                return "No iterations, so no per-iteration advice."
            return "No bottleneck stands out: the run looks balanced."
        speeds = [f.estimated_speedup for f in findings if f.estimated_speedup is not None]
        best = f" · best single fix: up to {max(speeds):.2f}×" if speeds else ""
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
