"""One finding as a card: a one-line head that expands on click.

The head says: severity, rank and title, then the share of steady-state iteration
time (saying so: "of step"; a hypothesis also what its fix saves), the estimated
speed-up and the confidence. A click on it (or Space / Enter when the
card has focus) shows the body: the numbers in words, the summary, the causes, the
fixes (one row each) and the evidence. Causes and evidence are links.

Each fix row has a slot for action widgets (:meth:`FindingCard.add_fix_action`,
:meth:`FindingCard.add_fix_button`); a button made by ``add_fix_button`` emits
``fix_action_requested(finding_id, fix_id)``. ``fix_id`` is :func:`fix_id_of`.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QSizePolicy,
    QVBoxLayout,
    QWidget,
)

from ...core.analysis.results import Finding, Fix
from ...core.analysis.shares import finding_share, speedup_bound, speedup_words
from ...core.units import fmt_ns, fmt_pct
from ...view.tooltip import literal_html
from .common import SEVERITY_COLORS, breakable, esc, plain_label, rich_label, set_muted

_FRAMEWORK = {"pytorch": "PyTorch", "tensorflow": "TensorFlow", "jax": "JAX",
              "tensorflow/jax": "TensorFlow / JAX", "any": "Any framework"}
#: Evidence links shown per card before "… and N more".
MAX_EVIDENCE = 8


def fix_id_of(fix: Fix, k: int) -> str:
    """A fix's id within its finding: its short name, else ``fix<k>`` (its place)."""
    return fix.name or f"fix{k}"


class SeverityBadge(QLabel):
    """A small coloured pill with the severity in capitals."""

    def __init__(self, severity: str, parent=None):
        super().__init__(severity.upper(), parent)
        self.setTextFormat(Qt.TextFormat.PlainText)
        color = SEVERITY_COLORS.get(severity, SEVERITY_COLORS["low"])
        self.setStyleSheet(f"QLabel {{ background: {color}; color: white; border-radius: 3px;"
                           " padding: 1px 4px; font-weight: bold; font-size: 7pt; }")
        self.setSizePolicy(QSizePolicy.Policy.Fixed, QSizePolicy.Policy.Fixed)


def headline(f: Finding) -> str:
    """What the share is of, then speed-up · confidence: two short lines for the card's
    head ("25.4% of step" / "1.34× · conf 0.80"; one-off work: "120 ms once")."""
    if f.estimated_speedup is None:
        return f"{finding_share(f, short=True)}\nconf {f.confidence:.2f}"
    return f"{finding_share(f, short=True)}\n{speedup_words(f, True)} · conf {f.confidence:.2f}"


def numbers_text(f: Finding) -> str:
    """The head's numbers in words (the expanded card's first line)."""
    if f.estimated_speedup is None:
        text = f"{finding_share(f)} · no per-step speed-up"
    else:
        text = (f"{finding_share(f)} · {speedup_bound(f)} faster "
                + (f"with {f.estimated_by}" if f.estimated_by
                   else "" if f.covers is not None else "if removed")).rstrip()
    why = f" ({f.confidence_why})" if f.confidence_why else ""
    return text + f" · confidence {f.confidence:.2f}{why}"


class CardHead(QFrame):
    """The clickable one-line head of a card."""

    clicked = Signal()

    def mouseReleaseEvent(self, event) -> None:  # noqa: N802
        if event.button() == Qt.MouseButton.LeftButton and self.rect().contains(
                event.position().toPoint()):
            self.clicked.emit()
        super().mouseReleaseEvent(event)


class FindingCard(QFrame):
    """One finding; ``evidence_clicked(index)`` / ``cause_clicked(index)`` when an
    evidence or cause link is activated, ``expanded_changed(bool)`` when it opens or
    closes, ``fix_action_requested(finding_id, fix_id)`` from a fix's action button."""

    evidence_clicked = Signal(int)
    cause_clicked = Signal(int)
    expanded_changed = Signal(bool)
    fix_action_requested = Signal(str, str)

    def __init__(self, finding: Finding, rank: int, origin_ns: int, parent=None):
        super().__init__(parent)
        self.finding = finding
        self.setObjectName("findingCard")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(6, 4, 6, 4)
        lay.setSpacing(2)
        lay.addWidget(self._build_head(finding, rank))
        # the summary's first sentence: the card reads at a glance while closed
        self.preview = plain_label(_first_sentence(finding.summary), self, wrap=True)
        set_muted(self.preview)
        lay.addWidget(self.preview)
        self.body = QWidget(self)
        self._build_body(finding, origin_ns)
        self.body.hide()
        lay.addWidget(self.body)
        self.fix_slots: dict[str, QHBoxLayout] = {}
        self._fill_fixes(finding)

    # -- head ---------------------------------------------------------------------
    def _build_head(self, f: Finding, rank: int) -> CardHead:
        self.head = CardHead(self)
        self.head.setCursor(Qt.CursorShape.PointingHandCursor)
        self.head.setToolTip("Click to show the text, causes, evidence and fixes")
        row = QHBoxLayout(self.head)
        row.setContentsMargins(0, 0, 0, 0)
        row.setSpacing(4)
        self.arrow = QLabel("▸", self.head)
        top = Qt.AlignmentFlag.AlignTop
        row.addWidget(self.arrow, 0, top)
        row.addWidget(SeverityBadge(f.severity, self.head), 0, top)
        # the card's place is its rank; a long title wraps under itself, never cut
        self.title = plain_label(f.title, self.head, bold=True, wrap=True)
        self.title.setToolTip(literal_html(f"{rank}. {f.title}"))
        row.addWidget(self.title, 1)
        self.figures = QLabel(headline(f), self.head)
        self.figures.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignTop)
        self.figures.setTextFormat(Qt.TextFormat.PlainText)
        self.figures.setToolTip(literal_html(numbers_text(f)))
        small = self.figures.font()
        small.setPointSizeF(small.pointSizeF() * 0.85)
        self.figures.setFont(small)
        row.addWidget(self.figures, 0, top)
        self.head.clicked.connect(self.toggle)
        return self.head

    # -- body ---------------------------------------------------------------------
    def _build_body(self, f: Finding, origin_ns: int) -> None:
        lay = QVBoxLayout(self.body)
        lay.setContentsMargins(14, 2, 0, 2)
        lay.setSpacing(4)
        self.numbers = plain_label(numbers_text(f), self.body, wrap=True)
        set_muted(self.numbers)
        lay.addWidget(self.numbers)
        self.summary = plain_label(f.summary, self.body, wrap=True, selectable=True)
        if f.summary:
            lay.addWidget(self.summary)
        self.causes = self.evidence = None
        if f.causes:
            self.causes = rich_label(self.body)
            self.causes.setText(_causes_html(f, origin_ns))
            self.causes.linkActivated.connect(self._on_link)
            lay.addWidget(self.causes)
        self.fixes_box = QVBoxLayout()
        self.fixes_box.setSpacing(2)
        lay.addLayout(self.fixes_box)
        if f.evidence:
            self.evidence = rich_label(self.body)
            self.evidence.setText(_evidence_html(f, origin_ns))
            self.evidence.linkActivated.connect(self._on_link)
            lay.addWidget(self.evidence)

    def _fill_fixes(self, f: Finding) -> None:
        self.fix_labels: list[QLabel] = []
        if not f.fixes:
            return
        self.fixes_box.addWidget(plain_label("Suggested fixes", self.body, bold=True))
        for k, fix in enumerate(f.fixes):
            row = QHBoxLayout()
            row.setSpacing(4)
            text = rich_label(self.body)
            text.setText(_fix_html(fix))
            text.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
            row.addWidget(text, 1)
            self.fixes_box.addLayout(row)
            self.fix_labels.append(text)
            self.fix_slots[fix_id_of(fix, k)] = row
        if f.hidden_fixes:
            more = plain_label(f"{len(f.hidden_fixes)} more do not fit this run's facts.",
                               self.body, wrap=True)
            set_muted(more)
            self.fixes_box.addWidget(more)

    def fixes_text(self) -> str:
        """Every shown fix as plain text, one per line."""
        return "\n".join(f"{_FRAMEWORK.get(x.framework, x.framework)}: {x.text}"
                         + "".join(f" ({w})" for w in (x.because, x.estimate_label) if w)
                         for x in self.finding.fixes)

    # -- fix actions (a hook for per-fix buttons) ---------------------------------
    def fix_ids(self) -> list[str]:
        return list(self.fix_slots)

    def add_fix_action(self, fix_id: str, widget: QWidget) -> None:
        """Put ``widget`` at the end of fix ``fix_id``'s row (KeyError if no such fix)."""
        row = self.fix_slots[fix_id]
        widget.setParent(self.body)
        row.addWidget(widget, 0, Qt.AlignmentFlag.AlignTop)

    def add_fix_button(self, fix_id: str, text: str, tip: str = "") -> QPushButton:
        """A button on fix ``fix_id``'s row that emits ``fix_action_requested``."""
        button = QPushButton(text)
        button.setSizePolicy(QSizePolicy.Policy.Fixed, QSizePolicy.Policy.Fixed)
        if tip:
            button.setToolTip(literal_html(tip))
        button.clicked.connect(
            lambda: self.fix_action_requested.emit(self.finding.id, fix_id))
        self.add_fix_action(fix_id, button)
        return button

    # -- expanding ----------------------------------------------------------------
    def is_expanded(self) -> bool:
        return not self.body.isHidden()

    def set_expanded(self, on: bool) -> None:
        if on == self.is_expanded():
            return
        self.body.setVisible(on)
        self.preview.setVisible(not on)
        self.arrow.setText("▾" if on else "▸")
        self.expanded_changed.emit(on)

    def toggle(self) -> None:
        self.set_expanded(not self.is_expanded())

    def keyPressEvent(self, event) -> None:  # noqa: N802
        if event.key() in (Qt.Key.Key_Space, Qt.Key.Key_Return, Qt.Key.Key_Enter):
            self.toggle()
            return
        super().keyPressEvent(event)

    def _on_link(self, href: str) -> None:
        if href.startswith("ev:"):
            self.evidence_clicked.emit(int(href[3:]))
        elif href.startswith("cause:"):
            self.cause_clicked.emit(int(href[6:]))


def _first_sentence(text: str) -> str:
    text = " ".join(str(text).split())
    cut = text.find(". ")
    return text[:cut + 1] if cut > 0 else text


def _fix_html(x: Fix) -> str:
    notes = "".join(f" <small><i>({esc(breakable(w))})</i></small>"
                    for w in (x.because, x.estimate_label) if w)
    return (f"• <b>{esc(_FRAMEWORK.get(x.framework, x.framework))}:</b> "
            f"{esc(breakable(x.text))}{notes}")


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
