"""Ranks dock: rank x iteration heat map of a multi-rank trace (HTA's straggler view).

Shows iteration time by default, or busy time, exposed communication or any device
breakdown category; the straggler of each iteration (the rank with the most busy time:
everyone else waits for it at the next collective) is outlined. Clicking a cell selects
that rank and iteration everywhere (Session.select_rank + select_iteration).
"""

from __future__ import annotations

import numpy as np
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QVBoxLayout, QWidget

from ...view.breakdown import label_of
from ..docks import DockSpec
from ..session import Session
from .common import plain_label, set_muted
from .rank_heatmap import RankHeatmap

MEASURES = (("iteration", "Iteration time"), ("busy", "Busy time"),
            ("comm", "Exposed communication"))


class RanksPanel(QWidget):
    """Measure picker + :class:`RankHeatmap` over ``breakdown.ranks``."""

    def __init__(self, session: Session, parent=None):
        super().__init__(parent)
        self.session = session
        self.measure = QComboBox(self)
        self.note = plain_label("", self, wrap=True)
        set_muted(self.note)
        self.heatmap = RankHeatmap(self)
        top = QHBoxLayout()
        top.setContentsMargins(0, 0, 0, 0)
        top.addWidget(plain_label("Show", self))
        top.addWidget(self.measure, 1)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(4, 4, 4, 4)
        lay.addLayout(top)
        lay.addWidget(self.heatmap, 1)
        lay.addWidget(self.note)
        self.measure.currentIndexChanged.connect(lambda _i: self.refresh())
        self.heatmap.cell_clicked.connect(self._on_cell)
        session.trace_changed.connect(self._reload)
        session.breakdown_changed.connect(self._reload)
        session.iteration_selected.connect(lambda _i: self._sync_selection())
        session.rank_selected.connect(lambda _r: self._sync_selection())
        self._reload()

    @property
    def ranks(self):
        bd = self.session.breakdown
        return getattr(bd, "ranks", None) if bd is not None else None

    def has_content(self) -> bool:
        """The open trace has ranks to compare."""
        return self.ranks is not None

    def _reload(self) -> None:
        self.measure.blockSignals(True)
        self.measure.clear()
        for key, text in MEASURES:
            self.measure.addItem(text, key)
        bd = self.session.breakdown
        for cat in (bd.device_categories if self.ranks is not None else ()):
            self.measure.addItem(f"Category: {label_of(cat)}", "cat:" + cat)
        self.measure.blockSignals(False)
        self.refresh()

    def matrix(self, key: str) -> np.ndarray:
        """(ranks, iterations) ns of measure ``key`` (a category: summed over the rank's
        devices; NaN for a rank without devices)."""
        r = self.ranks
        if key == "iteration":
            return r.durations.astype(np.float64)
        if key == "busy":
            return r.busy.astype(np.float64)
        if key == "comm":
            return r.comm.astype(np.float64)
        cat = key.removeprefix("cat:")
        bd = self.session.breakdown
        out = np.full(r.durations.shape, np.nan)
        for row, rank in enumerate(r.ranks):
            devs = [d for d in bd.devices if d.rank == rank and cat in d.categories]
            if devs and all(len(d.times) == out.shape[1] for d in devs):
                out[row] = sum(d.times[:, list(d.categories).index(cat)] for d in devs)
        return out

    def refresh(self) -> None:
        r = self.ranks
        if r is None:
            self.heatmap.set_matrix(np.zeros((0, 0)), [], [])
            self.note.setText("Single-rank trace: open a folder of per-rank traces to "
                              "compare ranks." if self.session.trace is not None else "")
            return
        key = self.measure.currentData() or "iteration"
        n = r.durations.shape[1]
        labels = self.session.iterations.labels if self.session.iterations is not None else []
        cols = [f"#{i}" + (f" {labels[i]}" if i < len(labels) and labels[i] else "")
                for i in range(n)]
        strag = np.array([[rank == s for s in r.straggler] for rank in r.ranks], bool)
        self.heatmap.set_matrix(self.matrix(key), [f"rank {x}" for x in r.ranks], cols,
                                stragglers=strag, title=self.measure.currentText())
        lag = ", ".join(f"#{i}: rank {int(s)} (+{v / 1e6:.2f} ms busy)"
                        for i, (s, v) in enumerate(zip(r.straggler, r.lag)))
        self.note.setText(f"Outlined: the straggler of each iteration (most busy time; the "
                          f"others wait for it at the next collective). {lag}")
        self._sync_selection()

    def _sync_selection(self) -> None:
        r = self.ranks
        s = self.session
        if r is None or s.selected_rank not in r.ranks or s.selected_iteration < 0:
            self.heatmap.set_selected(-1, -1)
            return
        self.heatmap.set_selected(r.ranks.index(s.selected_rank), s.selected_iteration)

    def _on_cell(self, row: int, col: int) -> None:
        rank = self.ranks.ranks[row]
        self.session.select_rank(rank)
        self.session.select_iteration(col)


DOCK = DockSpec("ranks", "Ranks", "bottom", 40, 600, RanksPanel, tab_with="breakdown")
