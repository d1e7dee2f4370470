"""Compare dock (File ▸ Compare with…): what ``sofa-gui diff`` says, in the app.

The open trace is "this run" (before), the chosen one "the other run" (after). The
other run is loaded and analyzed on its own worker, so the open trace stays usable;
then :func:`sofa_gui.core.analysis.diff.diff_analyses` gives the speed-up, the
verdict (mean / p90 / steady-state iteration, slow iterations a median hides, the open
run's prediction against the measured gain), the per-category deltas, findings
resolved / new / persisting and the kernels and ops whose time per iteration changed
most (paired by normalised name, new and removed ones marked), shown as tables,
with both runs' iteration times as a strip chart (one dot per iteration, the median as a bar).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QSize, Qt, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHeaderView,
    QLayout,
    QPlainTextEdit,
    QTableWidget,
    QTableWidgetItem,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from ...app import jobs
from ...app.events import CompareReady
from ...core.analysis.palette import label_of
from ...core.units import fmt_ns
from ...view.tooltip import literal_html
from ..docks import DockSpec
from ..session import Session
from ..worker import Worker
from .common import TailElideDelegate, plain_label, set_muted

RUN_COLORS = ("#4C72B0", "#DD8452")  # this run, the other run


class ComparePanel(QWidget):
    """Loads the other run, diffs it against the open one and shows the result."""

    compared = Signal()  # a comparison is shown

    def __init__(self, session: Session, parent=None):
        super().__init__(parent)
        self.session = session
        self.other = None  # (trace, analysis) of the other run
        self.result: dict | None = None
        self.worker = Worker(self)
        self.worker.result.connect(self._on_result)
        self.worker.failed.connect(lambda path, why: self._say(f"Cannot open {path}: {why}"))
        self.worker.crashed.connect(lambda msg: self._say(f"Error while comparing: {msg}"))
        self.worker.progress.connect(lambda f, m: self._say(f"{m} ({f:.0%})"))
        self.summary = plain_label("Compare this run with another one: File ▸ Compare with…",
                                   self, wrap=True)
        set_muted(self.summary)
        self.chart = pg.PlotWidget(self)
        self.chart.setBackground(self.palette().color(self.backgroundRole()))
        self.chart.setMinimumHeight(40)
        self.chart.setMouseEnabled(False, False)
        self.chart.hideButtons()
        self.chart.getAxis("bottom").setLabel("iteration time (ms)")
        self.categories = _table(("Category", "This run", "Other run", "Δ"))
        self.findings = _table(("Finding", "Status", "Share of step this → other", "Predicted"))
        self.changes = _table(("Kind", "Name", "This run", "Other run", "Δ", "Status"))
        self.verdict = QPlainTextEdit(self)  # plain text: trace names are untrusted
        self.verdict.setReadOnly(True)
        self.verdict.setLineWrapMode(QPlainTextEdit.LineWrapMode.WidgetWidth)
        tabs = self.tabs = QTabWidget(self)
        tabs.addTab(self.verdict, "Verdict")
        tabs.addTab(self.categories, "Categories")
        tabs.addTab(self.findings, "Findings")
        tabs.addTab(self.changes, "Top changes")
        lay = QVBoxLayout(self)
        # a tab of the bottom row: it must not make that row (or the window) taller
        lay.setSizeConstraint(QLayout.SizeConstraint.SetNoConstraint)
        lay.setContentsMargins(4, 4, 4, 4)
        lay.addWidget(self.summary)
        lay.addWidget(self.chart, 1)
        lay.addWidget(tabs, 2)
        session.trace_changed.connect(self.clear)

    def minimumSizeHint(self) -> QSize:  # noqa: N802
        return QSize(80, 60)

    def has_content(self) -> bool:
        """A comparison is shown (the window never opens on an empty Compare)."""
        return self.result is not None

    # -- requests --------------------------------------------------------------------------
    def compare_with(self, path: str | Path) -> None:
        """Load and analyze ``path`` in the background, then show the comparison."""
        s = self.session
        if s.trace is None or not s.analysis_done:
            self._say("Open a trace and wait for its analysis before comparing.")
            return
        self._say(f"Loading {Path(path).name}…")
        self.worker.start(jobs.compare_job, str(path), s.options)

    def clear(self) -> None:
        self.worker.cancel()
        self.other, self.result = None, None
        for t in (self.categories, self.findings, self.changes):
            t.setRowCount(0)
        self.verdict.clear()
        self.chart.clear()
        self._say("Compare this run with another one: File ▸ Compare with…")

    def shutdown(self) -> None:
        self.worker.shutdown()

    # -- results -----------------------------------------------------------------------------
    def _on_result(self, result) -> None:
        if not isinstance(result, CompareReady) or self.session.trace is None:
            return
        from ...core.analysis.diff import diff_analyses

        self.other = (result.trace, result.analysis)
        self.result = diff_analyses((self.session.trace, self.session.analysis), self.other)
        self._show()
        self.compared.emit()

    def _show(self) -> None:
        d = self.result
        a, b = d["before"], d["after"]
        speed = d["speedup"]
        verdict = ("" if speed is None else
                   f"{speed:.2f}x faster" if speed >= 1 else f"{1 / speed:.2f}x slower")
        self._say(f"Other run {Path(b['path']).name}: {verdict} — median iteration "
                  f"{fmt_ns(a['median_iteration_us'] * 1e3)} → "
                  f"{fmt_ns(b['median_iteration_us'] * 1e3)} "
                  f"({a['iterations']} vs {b['iterations']} iterations)")
        self.summary.setToolTip(literal_html(f"this run: {a['path']}\nother run: {b['path']}"))
        from ...core.analysis.diff import verdict_lines

        self.verdict.setPlainText("\n".join(verdict_lines(d)))
        self._plot(self.iteration_times())
        self._fill_tables(d)

    def show_try(self, result: dict) -> None:
        """A try of a fix (``sofa-gui try``): its verdict and repeated diff in the Verdict
        tab, the tables of its pair nearest the median, the unprofiled step times of the
        BEFORE and AFTER runs as the chart."""
        from ...core.analysis.diff_repeated import nearest_median, repeated_text
        from ...core.analysis.try_result import try_text

        self.worker.cancel()
        rep = result.get("repeated_diff")
        self.other = None
        self.result = rep["rounds"][nearest_median(rep)] if rep and rep.get("rounds") else None
        lines = try_text(result) + ([""] + repeated_text(rep) if rep else [])
        self.verdict.setPlainText("\n".join(lines))
        if self.result is not None:
            self._fill_tables(self.result)
        steps = [np.asarray([ms * 1e6 for r in result["runs"] if r["side"] == side
                             for ms in r["unprofiled_step_ms"]], np.int64)
                 for side in ("before", "after")]
        self._plot(steps, ("before", f"with {result['fix']}"), "step time without profiler")
        self.tabs.setCurrentWidget(self.verdict)
        self._say(f"Tried {result['fix']}: {result['verdict']}")
        self.compared.emit()

    def _fill_tables(self, d: dict) -> None:
        rows = [(label_of(c["category"]) + (" (host)" if side == "host" else ""),
                 _us(c["before_us"]), _us(c["after_us"]), _delta(c["delta_us"]))
                for side in ("device", "host") for c in d["categories"][side]]
        _fill(self.categories, rows)
        f = d["findings"]
        rows = [(x["id"].replace("_", " "), status,
                 f"{x['share_before']:.1%} → {x['share_after']:.1%}", _predicted(x))
                for status in ("resolved", "new", "persisting") for x in f.get(status, [])]
        _fill(self.findings, rows)
        rows = [(c["kind"], c["name"], _us(c["before_us"]), _us(c["after_us"]),
                 _delta(c["delta_us"]), c.get("status", "")) for c in d["top_changes"]]
        _fill(self.changes, rows)

    def iteration_times(self) -> list[np.ndarray]:
        """Iteration times (ns) of this run and the other run."""
        runs = [(self.session.trace, self.session.analysis), self.other]
        return [np.asarray(an.iterations.durations, np.int64) for _t, an in runs]

    def _plot(self, runs: list[np.ndarray], names=("this run", "other run"),
              what: str = "iteration time") -> None:
        """One dot per iteration (ns) of each run, its median as a bar."""
        self.chart.clear()
        self.chart.getAxis("bottom").setLabel(f"{what} (ms)")
        rng = np.random.default_rng(0)  # fixed jitter: the same picture every time
        for y, (times, color) in enumerate(zip(runs, RUN_COLORS)):
            if not len(times):
                continue
            ms = times / 1e6
            jitter = y + rng.uniform(-0.15, 0.15, len(ms))
            self.chart.addItem(pg.ScatterPlotItem(ms, jitter, size=8, brush=pg.mkBrush(color),
                                                  pen=None))
            med = float(np.median(ms))
            self.chart.addItem(pg.PlotCurveItem([med, med], [y - 0.3, y + 0.3],
                                                pen=pg.mkPen(color, width=3)))
        ax = self.chart.getAxis("left")
        ax.setTicks([[(0, names[0]), (1, names[1])]])
        self.chart.setYRange(-0.6, 1.6, padding=0)

    def _say(self, text: str) -> None:
        self.summary.setText(text)


def _table(headers) -> QTableWidget:
    t = QTableWidget(0, len(headers))
    t.setHorizontalHeaderLabels(headers)
    t.verticalHeader().setVisible(False)
    t.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
    t.setWordWrap(False)
    t.setTextElideMode(Qt.TextElideMode.ElideMiddle)
    hdr = t.horizontalHeader()
    hdr.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
    key = 1 if headers[1] == "Name" else 0
    hdr.setSectionResizeMode(key, QHeaderView.ResizeMode.Stretch)
    t.setItemDelegateForColumn(key, TailElideDelegate(t))
    return t


def _fill(table: QTableWidget, rows: list[tuple]) -> None:
    table.setRowCount(len(rows))
    for r, row in enumerate(rows):
        for c, text in enumerate(row):
            item = QTableWidgetItem(str(text))
            item.setToolTip(literal_html(str(text)))
            table.setItem(r, c, item)


def _us(v: float) -> str:
    return fmt_ns(v * 1e3)


def _delta(v: float) -> str:
    if v == 0:
        return "0"
    return ("+" if v > 0 else "−") + fmt_ns(abs(v) * 1e3)


DOCK = DockSpec("compare", "Compare", "bottom", 50, 600, ComparePanel, tab_with="breakdown")


def _predicted(row: dict) -> str:
    """"1.50x (loader workers)": the estimate of the fix the other run applied, when the
    run facts show which one (see ``diff``), else the finding's."""
    sp = row.get("predicted_speedup")
    if not sp:
        return ""
    fix = (row.get("fix_applied") or {}).get("name") or row.get("predicted_by")
    return f"{sp:.2f}x ({fix})" if fix else f"{sp:.2f}x"
