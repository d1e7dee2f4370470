"""Run summary header: what limits the run (the verdict, first), file, format, duration,
iterations, median iteration, device use, and the run facts (framework, device, mode, ...
each proved by an event: see the tooltip).

A strip of label/value pairs above the timeline. Observes ``Session.trace_changed`` and
every analysis part as it arrives.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFrame, QGridLayout, QHBoxLayout, QSizePolicy, QWidget

from ...core.analysis.pipeline import PARTS
from ...core.analysis.shares import finding_share, verdict_share
from ...core.summary import event_count
from ...core.units import fmt_ns, fmt_pct
from ...view.breakdown import device_utilisation
from ...view.tooltip import literal_html
from ..session import Session
from .common import plain_label, set_muted

EMPTY_TITLE = "No trace open — File ▸ Open, or drop a trace here"
FIELDS = ("Limited by", "Format", "Duration", "Events", "Iterations", "Median iteration",
          "Device busy", "Top bottleneck")


class SummaryHeader(QFrame):
    """Headline numbers of the open run."""

    def __init__(self, session: Session, parent=None):
        super().__init__(parent)
        self.session = session
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Maximum)
        self.title = plain_label(EMPTY_TITLE, self,
                                 bold=True)
        f = self.title.font()
        f.setPointSizeF(f.pointSizeF() * 1.15)
        self.title.setFont(f)
        self.values: dict[str, object] = {}
        grid = QGridLayout()
        grid.setContentsMargins(0, 0, 0, 0)
        grid.setHorizontalSpacing(24)
        grid.setVerticalSpacing(0)
        for col, key in enumerate(FIELDS):
            cap = plain_label(key.upper(), self)
            set_muted(cap)
            cf = cap.font()
            cf.setPointSizeF(cf.pointSizeF() * 0.8)
            cap.setFont(cf)
            val = plain_label("—", self, bold=True)
            grid.addWidget(cap, 0, col)
            grid.addWidget(val, 1, col)
            self.values[key] = val
        # the last figure (the top bottleneck) takes the room the others leave and is
        # elided to it: the verdict and the numbers before it are never cut
        last = self.values[FIELDS[-1]]
        last.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        last.setMinimumWidth(40)
        grid.setColumnStretch(len(FIELDS) - 1, 1)
        self.grid = grid
        lay = QHBoxLayout(self)
        lay.setContentsMargins(10, 6, 10, 6)
        inner = QWidget(self)
        v = QGridLayout(inner)
        v.setContentsMargins(0, 0, 0, 0)
        v.addWidget(self.title, 0, 0)
        self.grid_box = QWidget(inner)
        self.grid_box.setLayout(grid)
        # the header never sets the window's minimum width: on a narrow window the facts
        # at the right are cut (each has a tooltip); the title is the file name only
        for w in (self.grid_box, self.title):
            w.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        v.addWidget(self.grid_box, 1, 0)
        self.run_line = plain_label("", inner, wrap=True)
        set_muted(self.run_line)
        v.addWidget(self.run_line, 2, 0)
        lay.addWidget(inner)
        self._facts: dict[str, str] = {}
        self._full: dict[str, str] = {}  # figure -> its full text
        session.trace_changed.connect(self._on_trace)
        session.loading_started.connect(self._on_loading)
        session.load_failed.connect(lambda *_a: self._on_trace())
        session.job_cancelled.connect(self._on_trace)
        for part in PARTS:
            session.on_analysis(part, self.refresh)
        session.busy_changed.connect(self.refresh)
        self.refresh()

    def resizeEvent(self, event) -> None:  # noqa: N802
        """Narrow windows (laptops) space the figures closer; the last one (the top
        bottleneck) is elided to the room left, never cut; every value's full text is
        in its tooltip."""
        super().resizeEvent(event)
        self.grid.setHorizontalSpacing(24 if self.width() >= 1600 else 12)
        self._fit_last()

    def _fit_last(self) -> None:
        lab = self.values[FIELDS[-1]]
        full = self._full.get(FIELDS[-1], lab.text())
        self.layout().activate()
        left = lab.mapTo(self, lab.rect().topLeft()).x()
        room = max(self.width() - left - self.layout().contentsMargins().right(), 40)
        lab.setText(lab.fontMetrics().elidedText(full, Qt.TextElideMode.ElideRight, room))

    def text_of(self, key: str) -> str:
        """The full text of a figure (the one shown may be elided)."""
        return self._full.get(key, self.values[key].text())

    def _on_loading(self, path: str) -> None:
        name = Path(path).name or path
        shown = self.session.trace
        self.title.setText(f"Opening {name}…" if shown is None else
                           f"Opening {name}… (showing {Path(self.session.path or '').name})")
        self.title.setToolTip(literal_html(path))

    def _on_trace(self) -> None:
        """Facts that do not change with the analysis (computed once per trace)."""
        s, t = self.session, self.session.trace
        if t is not None:
            self._facts = {"Format": t.meta.format or "?", "Duration": fmt_ns(t.duration_ns),
                           "Events": f"{events_loaded(t):,}"}
            self.values["Events"].setToolTip(literal_html(events_note(t)))
            self.title.setText(Path(s.path or t.meta.source).name or t.meta.source)
            self.title.setToolTip(literal_html(s.path or t.meta.source))
        else:
            self.title.setText(EMPTY_TITLE)
        self.refresh()

    def refresh(self) -> None:
        s = self.session
        t = s.trace
        self.grid_box.setVisible(t is not None)
        if t is None:
            return
        it = s.iterations
        vals = {
            **self._facts,
            "Iterations": "…" if it is None else f"{len(it)} ({it.method})",
            "Median iteration": "…" if it is None else (
                fmt_ns(int(it.durations[it.median_index])) if len(it) else "—"),
            "Device busy": _util_text(s),
            "Top bottleneck": _top_text(s),
            "Limited by": _verdict_text(s),
        }
        self._full = dict(vals)
        for key, text in vals.items():
            self.values[key].setText(text)
            if key != "Events":  # that one's tooltip explains the count
                self.values[key].setToolTip(literal_html(text))
        v = s.analysis.verdict
        self.values["Limited by"].setToolTip(literal_html(v.basis) if v is not None else "")
        self._show_run(s.analysis.run)
        self._fit_last()

    def _show_run(self, facts) -> None:
        """The run facts in one line; each fact's proving event in the tooltip."""
        self.run_line.setVisible(facts is not None)
        if facts is None:
            return
        self.run_line.setText("Run: " + facts.header())
        from ...core.analysis.run_facts import FACT_KEYS
        tips = [f"{k}: {facts.get(k).said()}" for k in FACT_KEYS]
        self.run_line.setToolTip(literal_html("\n".join(tips)))


def _util_text(s: Session) -> str:
    if s.breakdown is None:
        return "…" if s.busy else "—"
    u = device_utilisation(s.breakdown)
    return "no device" if u is None else fmt_pct(u)


def _verdict_text(s: Session) -> str:
    """"Compute (64.1% of profiled time)": the verdict's bound and share, saying what
    it is a share of (a finding's share is of the steady-state step)."""
    v = s.analysis.verdict
    if v is None:
        return "…" if s.busy else "—"
    return verdict_share(v)


def _top_text(s: Session) -> str:
    """"Input pipeline bound (33.4% of step)": the top finding, its share as its card
    says it."""
    if s.findings is None:
        return "…" if s.busy else "—"
    if not s.findings:
        return "none"
    f = s.findings[0]  # the advisor's order (tiers, then gain x confidence)
    return f"{f.title} ({finding_share(f, short=True)})"


def events_loaded(trace) -> int:
    """The one event count the app shows (header and status bar): the CLI's, the
    report's and JSON's (:func:`core.summary.event_count`)."""
    return event_count(trace)


def events_note(trace) -> str:
    rep = trace.meta.load_stats
    return (f"{events_loaded(trace):,} events loaded from the source "
            f"({rep.skipped_total:,} skipped; File ▸ Load Report), drawn as "
            f"{len(trace.slices):,} slices, {len(trace.counters):,} counter samples and "
            f"{len(trace.flows):,} flow arrows")
