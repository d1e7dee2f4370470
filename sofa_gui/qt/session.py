"""The only mutable state of the app: the open trace, its analysis, the view, search.

Widgets never talk to each other; they call a :class:`Session` method (an intent,
e.g. ``select_iteration(3)``) and observe its signals. What is on screen (window,
selection, collapsed groups, highlights) is one Qt-free
:class:`~sofa_gui.view.state.ViewState`, ``session.view``, which the timeline renders.
The session starts and cancels background work through a
:class:`~sofa_gui.qt.worker.Worker` and keeps only results of the request it is
currently waiting for. It hands results to the panels one per event-loop turn
(a cached reopen delivers every analysis part at once; their panel updates back
to back stalled the GUI for 250+ ms), and stays ``busy`` until the last is shown.
"""

from __future__ import annotations

import logging
from collections import deque
from pathlib import Path

import numpy as np
from PySide6.QtCore import QObject, Signal

from ..app import jobs
from ..app.events import AnalysisReady, FleetDone, FleetRankDone, FleetStarted, TraceReady
from ..core.analysis.pipeline import PARTS, Analysis, Options
from ..core.trace import Trace
from ..view.search import SearchQuery, find_matches
from ..view.state import Change, ViewState
from .sliced import SlicedWork
from .worker import Worker

log = logging.getLogger(__name__)


def part_signal_name(part: str) -> str:
    """The session signal emitted when ``analysis.<part>`` is ready."""
    return f"{part}_changed"


class Session(QObject):
    """Trace + analysis + selection + search; see the module docstring."""

    loading_started = Signal(str)  # path
    trace_changed = Signal()  # a new trace is shown (analysis not yet ready)
    # one ``<part>_changed`` signal per Analysis field, emitted when that part is ready
    # (tests/gui/test_session_events.py checks that every part of PARTS has one)
    iterations_changed = Signal()
    breakdown_changed = Signal()
    findings_changed = Signal()
    run_changed = Signal()
    input_pipeline_changed = Signal()
    verdict_changed = Signal()
    warmup_changed = Signal()  # the iterations' warm-up marks are now the advisor's
    analysis_finished = Signal()  # every analysis step of the current request is done
    load_failed = Signal(str, str)  # path, reason
    job_crashed = Signal(str)  # a bug in a background step, with its message
    job_cancelled = Signal()
    busy_changed = Signal(bool)
    progress = Signal(float, str)
    iteration_selected = Signal(int)  # -1: none
    slice_selected = Signal(int)  # -1: none
    rank_selected = Signal(int)  # -1: none
    range_selected = Signal(object)  # (start_ns, end_ns, lanes tuple) or None: cleared
    search_changed = Signal()  # the set of matches changed
    match_changed = Signal()  # the current match (position) changed
    fleet_started = Signal()  # a big rank folder: the fleet analysis runs (heat map first)
    fleet_rank_done = Signal(object)  # one rank's RankSummary
    fleet_changed = Signal()  # the cross-rank result is ready (or cleared)

    def __init__(self, parent: QObject | None = None, load_mode: str = "auto"):
        super().__init__(parent)
        self.load_mode = load_mode
        self.iteration_mode = "auto"
        self.path: str | None = None
        self.pending_path: str | None = None
        self.trace: Trace | None = None
        self.prepared = None  # the timeline's draw index of ``trace``, built off the GUI thread
        self.analysis = Analysis()  # parts fill in as the pipeline finishes them
        self.analysis_done = False
        self.last_error: tuple[str, str] | None = None
        self.view = ViewState()
        self.view.subscribe(self._on_view)
        self.view.highlights_elsewhere = lambda: len(self.matches) > 0
        self.search_query: SearchQuery | None = None
        self.search_error = ""
        self.matches = np.zeros(0, np.int64)
        self.instances_scoped = False  # the matches are a Statistics row's (see show_instances)
        self.match_pos = -1
        # fleet (big rank folders): only the summaries live here, plus the ranks opened
        self.fleet_path: str | None = None
        self.fleet_files: list = []  # RankFile, in rank order
        self.fleet_summaries: list = []  # RankSummary as ranks finish
        self.fleet = None  # FleetResult
        self.open_ranks: list[int] = []  # ranks of the trace shown, when opened from a fleet
        self._want_iteration: tuple | None = None  # (alignment, label, column) to select
        self.worker = Worker(self)
        # results, then the outcome, reach the panels one per event-loop turn, in order
        self._inbox: deque = deque()
        self._delivery = SlicedWork(self, per_turn=1)
        self.worker.result.connect(lambda r: self._deliver(self._on_result, r))
        self.worker.finished.connect(lambda: self._deliver(self._on_finished))
        self.worker.failed.connect(lambda p, r: self._deliver(self._on_failed, p, r))
        self.worker.crashed.connect(lambda m: self._deliver(self._on_crashed, m))
        self.worker.cancelled.connect(self._on_cancelled)
        self.worker.cancelled.connect(self.job_cancelled)
        self.worker.progress.connect(self.progress)
        self.worker.busy_changed.connect(self._on_busy)

    # -- requests -------------------------------------------------------------------
    def open(self, path: str | Path) -> None:
        """Open a trace file or folder in the background (cancels any running request)."""
        path = str(Path(path).expanduser())
        self.pending_path = path
        self.open_ranks = []
        self.last_error = None
        self.analysis_done = False
        self.loading_started.emit(path)
        self._drop_undelivered()
        self.worker.start(jobs.open_job, path, self.options, self.load_mode)

    def open_rank(self, rank: int, alongside: str = "", iteration: tuple | None = None) -> None:
        """Open one rank of the fleet in full (``alongside``: "neighbours" adds ranks r-1 and
        r+1, "median" adds the median rank); the fleet summaries stay.  ``iteration``
        (alignment, label, column) is selected once the rank's iterations are found."""
        from ..app.jobs import open_ranks_job

        by_rank = {f.rank: f for f in self.fleet_files}
        if rank not in by_rank:
            return
        ranks = [rank]
        if alongside == "neighbours":
            ranks = [r for r in (rank - 1, rank, rank + 1) if r in by_rank]
        elif alongside == "median" and self.fleet is not None:
            med = self.fleet.median_rank()
            ranks = sorted({rank, med} & set(by_rank)) if med is not None else ranks
        paths = [str(by_rank[r].path) for r in ranks]
        self.pending_path = paths[0] if len(paths) == 1 else self.fleet_path
        self.open_ranks = ranks
        self._want_iteration = iteration
        self.last_error = None
        self.analysis_done = False
        self.loading_started.emit(", ".join(Path(p).name for p in paths))
        self._drop_undelivered()
        self.worker.start(open_ranks_job, paths, self.options)

    def reanalyze(self, mode: str | None = None) -> None:
        """Run the analysis again on the open trace (``mode``: auto|annotations|pattern)."""
        if mode:
            self.iteration_mode = mode
        if self.trace is None:
            return
        self.analysis_done = False
        self._drop_undelivered()
        self.worker.start(jobs.analysis_job, self.trace, self.options)

    def cancel(self) -> None:
        """Stop the request: its job, and what it still had to show."""
        shown_only = self.busy and not self.worker.busy  # the job ended; results pending
        self._drop_undelivered()
        self.worker.cancel()
        if shown_only:
            self._on_cancelled()
            self.job_cancelled.emit()
            self.busy_changed.emit(False)

    @property
    def options(self) -> Options:
        return Options(iterations=self.iteration_mode)

    # -- analysis results ----------------------------------------------------------------
    def on_analysis(self, part: str, slot) -> None:
        """Call ``slot()`` whenever ``analysis.<part>`` becomes ready (a panel's subscription)."""
        self._part_signal(part).connect(slot)

    def _part_signal(self, part: str):
        if part not in PARTS:
            raise ValueError(f"no analysis part {part!r}; parts: {', '.join(PARTS)}")
        return getattr(self, part_signal_name(part))

    @property
    def iterations(self):
        return self.analysis.iterations

    @property
    def breakdown(self):
        return self.analysis.breakdown

    @property
    def findings(self):
        return self.analysis.findings

    @property
    def busy(self) -> bool:
        """A request is running, or its results are not all shown yet."""
        return self.worker.busy or any(h != self._idle for h, _a in self._inbox)

    # -- delivery: one result per event-loop turn -------------------------------------
    def _deliver(self, handler, *args) -> None:
        self._inbox.append((handler, args))
        if not self._delivery.pending:
            self._delivery.start(self._deliveries)

    def _deliveries(self):
        while self._inbox:
            handler, args = self._inbox.popleft()
            handler(*args)
            yield

    def _drop_undelivered(self) -> None:
        """A new request replaces the old one: what it still had to show is dropped."""
        self._inbox.clear()
        self._delivery.cancel()

    def _on_busy(self, busy: bool) -> None:
        if busy or not self._inbox:  # e.g. a cancel (it drops what was left to show)
            self.busy_changed.emit(busy)
        else:  # idle once the last result is shown
            self._deliver(self._idle)

    def _idle(self) -> None:
        self.busy_changed.emit(self.busy)

    def shutdown(self) -> None:
        self.worker.shutdown()

    # -- selection and navigation (intents on the view state) ----------------------------
    @property
    def selected_iteration(self) -> int:
        return self.view.selected_iteration

    @property
    def selected_slice(self) -> int:
        return self.view.selected_slice

    def select_iteration(self, i: int, zoom: bool = True) -> None:
        """Select iteration ``i`` (-1 clears); with ``zoom`` the timeline shows it whole."""
        self.view.select_iteration(i, zoom)

    def select_slice(self, i: int, reveal: bool = False) -> None:
        """Select slice ``i`` (-1 clears); with ``reveal`` the timeline zooms around it."""
        self.view.select_slice(i, reveal)

    def zoom_to(self, start_ns: int, end_ns: int, pad: bool = False) -> None:
        """Show ``[start_ns, end_ns]`` (absolute ns), with the standard padding if ``pad``."""
        self.view.zoom_to(start_ns, end_ns, pad)

    @property
    def selected_rank(self) -> int:
        return self.view.selected_rank

    def empty_text(self) -> str:
        """What a panel says while there is no trace: loading (and what) or nothing open."""
        if self.trace is None and self.pending_path and self.last_error is None:
            return f"Loading {Path(self.pending_path).name}…"
        return "No trace open"

    def select_rank(self, rank: int) -> None:
        """Select a rank of a multi-rank trace (the breakdown and Ranks dock follow)."""
        self.view.select_rank(rank)

    def finding_rank(self) -> int:
        """Rank the top finding is about (its first evidence's lanes), -1 if none/unknown."""
        if not self.findings or self.trace is None:
            return -1
        for ev in self.findings[0].evidence:
            ranks = {int(self.trace.lanes.rank[lane]) for lane in ev.lanes
                     if 0 <= lane < len(self.trace.lanes)}
            ranks.discard(-1)
            if len(ranks) == 1:
                return ranks.pop()
        return -1

    @property
    def selected_range(self) -> tuple[int, int, tuple[int, ...]] | None:
        """The area selection ``(start_ns, end_ns, lanes)`` in absolute ns, or None."""
        return self.view.abs_range()

    def select_range(self, start_ns: int, end_ns: int, lanes) -> None:
        """Mark a time range over some lanes (absolute ns; the timeline's Ctrl-drag);
        Statistics aggregates it.  An empty range or no lanes clears it."""
        lanes = tuple(lanes)
        if end_ns <= start_ns or not lanes:
            self.view.select_range(None)
            return
        self.view.select_abs_range(start_ns, end_ns, lanes)

    def clear_range(self) -> None:
        self.view.select_range(None)

    def show_instances(self, indexes: np.ndarray, focus: int = -1, scoped: bool = False) -> None:
        """Highlight ``indexes`` like search matches (F3 steps through them) and
        select and reveal ``focus`` (e.g. the longest instance of a statistics row); the
        iteration that holds ``focus`` becomes the selected one, so every panel shows it.
        ``scoped``: the instances belong to the selected iteration's view (a Statistics
        row), so they go when another iteration is selected."""
        if focus >= 0 and self.trace is not None:
            k = self.view.iteration_of(float(int(self.trace.slices.start[focus]) - self.view.t0))
            if k >= 0:
                self.view.select_iteration(k)  # first: an iteration change drops highlights
        self.search_query = None
        self.search_error = ""
        self.matches = np.asarray(indexes, np.int64)
        self.instances_scoped = bool(scoped)
        self.match_pos = int(np.searchsorted(self.matches, focus)) if focus >= 0 else -1
        self.search_changed.emit()
        if focus >= 0:
            self.select_slice(int(focus), reveal=True)

    def step_highlight(self, delta: int) -> None:
        """F3 / Shift+F3: the next / previous search match or Statistics instance, else
        the next highlighted slice whoever highlighted it."""
        if len(self.matches):
            self.step_match(delta)
        else:
            self.view.step_highlight(delta)

    def _drop_instances(self) -> None:
        """Forget highlighted matches (search or Statistics row)."""
        if len(self.matches) or self.search_query is not None:
            self.search(None)

    def _on_view(self, change: Change) -> None:
        if change is Change.SLICE:
            self.slice_selected.emit(self.view.selected_slice)
        elif change is Change.ITERATION:
            if self.instances_scoped and len(self.matches):
                self._drop_instances()  # a Statistics row's instances belong to its scope
            self.iteration_selected.emit(self.view.selected_iteration)
        elif change is Change.RANGE:
            self.range_selected.emit(self.selected_range)
        elif change is Change.RANK:
            self.rank_selected.emit(self.view.selected_rank)
        elif change is Change.HIGHLIGHTS_CLEARED:
            self._drop_instances()

    # -- search ---------------------------------------------------------------------
    def search(self, query: SearchQuery | None) -> None:
        """Find every slice whose name matches ``query`` (None or empty clears)."""
        self.search_query = query
        self.search_error = ""
        self.matches = np.zeros(0, np.int64)
        self.instances_scoped = False
        if query is not None and query.text and self.trace is not None:
            try:
                self.matches = find_matches(self.trace, query)
            except ValueError as exc:
                self.search_error = str(exc)
        self.match_pos = -1
        self.search_changed.emit()

    def step_match(self, delta: int) -> None:
        """Go to the next (+1) or previous (-1) match, wrapping; selects and reveals it."""
        n = len(self.matches)
        if n == 0:
            return
        if self.match_pos < 0:
            self.match_pos = 0 if delta > 0 else n - 1
        else:
            self.match_pos = (self.match_pos + delta) % n
        self.match_changed.emit()
        self.select_slice(int(self.matches[self.match_pos]), reveal=True)

    # -- worker results: one handler per event type (``_HANDLERS``) ---------------------
    def _on_result(self, event) -> None:
        handler = self._HANDLERS.get(type(event))
        if handler is None:
            raise TypeError(f"no session handler for a {type(event).__name__} event")
        handler(self, event)

    def _on_trace_ready(self, ev: TraceReady) -> None:
        self._set_trace(ev.trace, ev.prepared)

    def _on_analysis_ready(self, ev: AnalysisReady) -> None:
        self.analysis = ev.analysis
        if ev.part == "iterations":
            it = self.analysis.iterations
            self.view.select_iteration(-1)
            self.view.set_iterations(it.starts, it.ends)
        self._part_signal(ev.part).emit()
        if (ev.part == "findings" and self.selected_rank < 0
                and len(self.trace.meta.ranks) > 1):
            self.select_rank(self.finding_rank())
        if ev.part == "iterations" and self._want_iteration:
            self._select_wanted(self.analysis.iterations)

    def _select_wanted(self, it) -> None:
        """The iteration clicked in the fleet heat map: by label, else by position."""
        alignment, label, col = self._want_iteration
        self._want_iteration = None
        labels = list(it.labels or [])
        i = labels.index(label) if alignment == "label" and label in labels else (
            col if alignment != "label" else -1)
        if 0 <= i < len(it):
            self.select_iteration(i)

    def _on_fleet_started(self, ev: FleetStarted) -> None:
        self.fleet_path, self.fleet_files = ev.path, list(ev.files)
        self.fleet_summaries, self.fleet = [], None
        self.fleet_started.emit()

    def _on_fleet_rank(self, ev: FleetRankDone) -> None:
        self.fleet_summaries.append(ev.summary)
        self.fleet_rank_done.emit(ev.summary)

    def _on_fleet_done(self, ev: FleetDone) -> None:
        self.fleet = ev.result
        self.fleet_changed.emit()

    _HANDLERS = {
        TraceReady: _on_trace_ready,
        AnalysisReady: _on_analysis_ready,
        FleetStarted: _on_fleet_started,
        FleetRankDone: _on_fleet_rank,
        FleetDone: _on_fleet_done,
    }

    def _set_trace(self, trace: Trace, prepared=None) -> None:
        if not self.open_ranks and (self.fleet_path or self.fleet is not None):
            self.fleet_path, self.fleet_files, self.fleet_summaries = None, [], []
            self.fleet = None  # a plain trace replaced the fleet
            self.fleet_changed.emit()
        self.trace = trace
        self.prepared = prepared
        self.path = self.pending_path
        self.analysis = Analysis()
        self.view.set_trace(trace.start_ns, trace.end_ns - trace.start_ns, len(trace.slices))
        self.matches, self.match_pos = np.zeros(0, np.int64), -1
        self.trace_changed.emit()
        if self.search_query is not None and self.search_query.text:
            self.search(self.search_query)

    def _on_finished(self) -> None:
        self.analysis_done = True
        self.analysis_finished.emit()

    def _on_cancelled(self) -> None:
        self._drop_undelivered()
        if self.trace is None:  # nothing is loading any more
            self.pending_path = None

    def _on_failed(self, path: str, reason: str) -> None:
        self.last_error = (path, reason)
        self.load_failed.emit(path, reason)

    def _on_crashed(self, message: str) -> None:
        self.last_error = (self.pending_path or "", message)
        self.job_crashed.emit(message)
