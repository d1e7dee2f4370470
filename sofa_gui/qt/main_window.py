"""Main window: menus, docks, status bar; wires the Session to the widgets.

No analysis and no painting here: the Session owns the state and background work,
the panels and the timeline show it.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from PySide6.QtCore import QSettings, Qt
from PySide6.QtGui import QAction, QActionGroup, QCloseEvent, QKeySequence
from PySide6.QtWidgets import (
    QDockWidget,
    QFileDialog,
    QMainWindow,
    QMessageBox,
    QSizePolicy,
    QStackedWidget,
    QVBoxLayout,
    QWidget,
)

from ..app.recent import RecentFiles
from ..core.importers import trace_file_filter
from . import window_actions
from .docks import AREAS, dock_body, dock_specs
from .export import start_dir
from .panels.fleet import FleetPanel
from .panels.load_report import LoadReportDialog
from .panels.search_bar import SearchBar, SearchHighlighter
from .panels.summary import SummaryHeader, events_loaded
from .panels.welcome import WelcomePage
from .record_dialog import RecordDialog
from .session import Session
from .settings_writer import SettingsWriter
from .status import LoadStatsLink, ProgressWidget
from .timeline import TimelineWidget
from .try_dialog import TryButtons
from .window_layout import DEFAULT_SIZE, STATE_VERSION, fit_docks, raise_useful
from .window_layout import restore as restore_layout
from .window_layout import save as save_layout

log = logging.getLogger(__name__)


class MainWindow(QMainWindow):
    """The application window; ``session`` holds everything it shows."""

    def __init__(self, settings: QSettings, session: Session | None = None,
                 restore_state: bool = True):
        super().__init__()
        self._shown_once = self._restored = False
        self.settings = settings
        self.prefs = SettingsWriter(settings)  # writes while the app runs: saved off-thread
        self.session = session or Session(self)
        self.recent = RecentFiles(self.prefs)
        self.setWindowTitle("sofa-gui")
        self.setAcceptDrops(True)
        self.setDockOptions(QMainWindow.DockOption.AnimatedDocks
                            | QMainWindow.DockOption.AllowTabbedDocks)
        self._build_central()
        self._build_docks()
        self._build_status()
        self._build_menus()
        window_actions.install(self)
        self._connect()
        self.resize(DEFAULT_SIZE)
        self._default_state = self.saveState(STATE_VERSION)
        if restore_state:
            self.restore_window_state()
        self._refresh_recent()

    # -- construction ---------------------------------------------------------------
    def _build_central(self) -> None:
        s = self.session
        self.summary = SummaryHeader(s, self)
        self.search_bar = SearchBar(s, self)
        self.search_bar.hide()
        self.timeline = TimelineWidget(self, view=s.view)  # renders the session's view
        self.welcome = WelcomePage(self)
        self.fleet_panel = FleetPanel(s, self)
        self.stack = QStackedWidget(self)
        self.stack.addWidget(self.welcome)
        self.stack.addWidget(self.timeline)
        self.stack.addWidget(self.fleet_panel)
        self.stack.currentChanged.connect(self._size_pages)
        self._size_pages()
        central = QWidget(self)
        lay = QVBoxLayout(central)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(0)
        lay.addWidget(self.summary)
        lay.addWidget(self.search_bar)
        lay.addWidget(self.stack, 1)
        self.setCentralWidget(central)

    def _build_docks(self) -> None:
        """One dock per entry of the dock table (see :mod:`sofa_gui.qt.docks`)."""
        self.panels: dict[str, QWidget] = {}
        self.docks: dict[str, QDockWidget] = {}
        self.setCorner(Qt.Corner.BottomRightCorner, AREAS["right"][0])
        for area, (qt_area, direction, _thickness) in AREAS.items():
            specs = [d for d in dock_specs() if d.area == area]
            placed = []
            for spec in specs:
                dock = self._add_dock(spec, qt_area)
                if spec.tab_with in self.docks and spec.tab_with != spec.key:
                    self.tabifyDockWidget(self.docks[spec.tab_with], dock)
                elif placed:
                    self.splitDockWidget(self.docks[placed[-1]], dock, direction)
                if not spec.tab_with:
                    placed.append(spec.key)
            for key in placed:  # the first tab of each group is the one shown
                self.docks[key].raise_()
        # Compare stays out of the way until File ▸ Compare with… (or View) shows it
        self.docks["compare"].hide()
        self._fit_docks(DEFAULT_SIZE.width(), DEFAULT_SIZE.height())

    def _fit_docks(self, width: int, height: int) -> None:
        fit_docks(self, width, height)

    def showEvent(self, event) -> None:  # noqa: N802
        super().showEvent(event)
        if not self._shown_once:
            self._shown_once = True
            if not self._restored:
                self._fit_docks(self.width(), self.height())
            raise_useful(self)

    def _add_dock(self, spec, qt_area) -> QDockWidget:
        panel = self.panels[spec.key] = spec.factory(self.session)
        dock = self.docks[spec.key] = QDockWidget(spec.title, self)
        dock.setObjectName(spec.object_name)
        dock.setWidget(dock_body(panel))
        if hasattr(panel, "dock_visibility_changed"):  # panels that compute only when seen
            dock.visibilityChanged.connect(panel.dock_visibility_changed)
        self.addDockWidget(qt_area, dock)
        return dock

    def _build_status(self) -> None:
        self.progress_widget = ProgressWidget(self.session, self)
        self.load_stats_link = LoadStatsLink(self.session, self)
        self.load_stats_link.clicked.connect(self.show_load_stats)
        self.statusBar().addPermanentWidget(self.load_stats_link)
        self.statusBar().addPermanentWidget(self.progress_widget)

    def _action(self, menu, text: str, slot, shortcut=None, tip: str = "") -> QAction:
        """A menu action; ``shortcut`` is a key string or a list of them / StandardKeys."""
        act = QAction(text, self)
        if shortcut is not None:
            act.setShortcuts(_key_list(shortcut))
        if tip:
            act.setStatusTip(tip)
        act.triggered.connect(slot)
        menu.addAction(act)
        return act

    def _build_menus(self) -> None:
        K = QKeySequence.StandardKey
        m = self.file_menu = self.menuBar().addMenu("&File")
        self._action(m, "&Open File…", self.open_file_dialog, [K.Open, "Ctrl+O"],
                     "Open a trace file")
        self._action(m, "Open &Folder…", self.open_folder_dialog, "Ctrl+Shift+O",
                     "Open a trace folder (SOFA logdir, recording, per-rank traces)")
        self.recent_menu = m.addMenu("Open &Recent")
        self.compare_action = self._action(m, "&Compare with…", self.compare_dialog, None,
                                           "Compare the open run with another trace")
        self._action(m, "Open &Demo Trace", self.open_demo)
        self.record_action = self._action(m, "R&ecord…", self.open_record_dialog, None,
                                          "Run a command and record a profile")
        m.addSeparator()
        self.reload_action = self._action(m, "Re&load", self.reload, [K.Refresh, "F5"])
        self.report_action = self._action(m, "Load &Report…", self.show_load_stats)
        m.addSeparator()
        self._action(m, "&Quit", self.close, [K.Quit, "Ctrl+Q"])

        v = self.view_menu = self.menuBar().addMenu("&View")
        self._action(v, "&Find…", self.search_bar.open_bar, [K.Find, "Ctrl+F"])
        self._action(v, "Find &Next", lambda: self.search_bar.step(+1), [K.FindNext, "F3"])
        self._action(v, "Find &Previous", lambda: self.search_bar.step(-1),
                     [K.FindPrevious, "Shift+F3"])
        self.fleet_action = self._action(v, "Fleet &Overview (all ranks)", self.show_fleet,
                                         "Ctrl+Shift+R", "Back to the rank x iteration overview")
        self.fleet_action.setEnabled(False)
        v.addSeparator()
        self._action(v, "&Zoom to Fit", self.timeline.reset_zoom, "Ctrl+0")
        self._action(v, "Zoom to Selected &Iteration",
                     lambda: self.session.select_iteration(self.session.selected_iteration),
                     "Ctrl+I")
        v.addSeparator()
        for dock in self.docks.values():
            v.addAction(dock.toggleViewAction())
        self._action(v, "Reset &Layout", self.reset_layout)
        v.addSeparator()
        self.fullscreen_action = self._action(v, "F&ull Screen", self.toggle_full_screen,
                                              ["F11", K.FullScreen])

        a = self.menuBar().addMenu("&Analysis")
        group = QActionGroup(self)
        self.mode_actions = {}
        for mode, text in (("auto", "Iterations: &Automatic"),
                           ("annotations", "Iterations from &Step Annotations"),
                           ("pattern", "Iterations from Repeating &Pattern")):
            act = self._action(a, text, lambda _c=False, m=mode: self.session.reanalyze(m))
            act.setCheckable(True)
            act.setChecked(mode == self.session.iteration_mode)
            group.addAction(act)
            self.mode_actions[mode] = act
        a.addSeparator()
        self._action(a, "&Re-run Analysis", lambda: self.session.reanalyze())
        self.cancel_action = self._action(a, "&Cancel", self.session.cancel, "Ctrl+.")

        h = self.help_menu = self.menuBar().addMenu("&Help")
        self._action(h, "&About sofa-gui", self.show_about)

    def _connect(self) -> None:
        s, tl = self.session, self.timeline
        s.loading_started.connect(self._on_loading_started)
        s.trace_changed.connect(self._on_trace_changed)
        s.on_analysis("iterations", lambda: tl.set_iterations(s.iterations))
        s.on_analysis("warmup", lambda: tl.set_iteration_marks(s.iterations))
        s.slice_selected.connect(self._raise_details)
        tl.tracks_changed.connect(self._remember_tracks)
        self.panels["breakdown"].category_clicked.connect(self._open_category)
        s.range_selected.connect(self._on_range)
        self.highlighter = SearchHighlighter(s, tl, self)
        self.try_buttons = TryButtons(self)  # Try it on a recording's fixes
        s.load_failed.connect(self._on_load_failed)
        s.job_crashed.connect(self._on_job_crashed)
        s.job_cancelled.connect(lambda: self.statusBar().showMessage("Cancelled", 5000))
        s.analysis_finished.connect(self._on_analysis_finished)
        s.fleet_started.connect(self._on_fleet_started)
        s.fleet_changed.connect(lambda: self.fleet_action.setEnabled(s.fleet_path is not None))
        s.busy_changed.connect(lambda busy: self.cancel_action.setEnabled(busy))
        self.welcome.open_file.connect(self.open_file_dialog)
        self.welcome.open_folder.connect(self.open_folder_dialog)
        self.welcome.open_demo.connect(self.open_demo)
        self.welcome.open_path.connect(self.open_path)
        self.cancel_action.setEnabled(False)

    def set_iteration_mode(self, mode: str) -> None:
        """How the next analysis finds iterations (auto|annotations|pattern); no re-run."""
        self.session.iteration_mode = mode
        self.mode_actions[mode].setChecked(True)

    # -- opening ----------------------------------------------------------------------
    def open_path(self, path: str | Path) -> None:
        """Open a trace file or folder (in the background; a newer open cancels this one)."""
        self.session.open(path)

    def open_file_dialog(self) -> None:
        start = start_dir(self)  # beside the open trace
        path, _ = QFileDialog.getOpenFileName(self, "Open trace file", start,
                                              trace_file_filter())
        if path:
            self.prefs.set_value("dialog/dir", str(Path(path).parent))
            self.open_path(path)

    def open_folder_dialog(self) -> None:
        start = start_dir(self)  # beside the open trace
        path = QFileDialog.getExistingDirectory(self, "Open trace folder", start)
        if path:
            self.prefs.set_value("dialog/dir", str(Path(path).parent))
            self.open_path(path)

    def compare_dialog(self) -> None:
        """File ▸ Compare with…: pick the other run; the Compare dock shows the diff."""
        start = start_dir(self)  # beside the open trace
        path, _ = QFileDialog.getOpenFileName(self, "Compare with trace", start,
                                              trace_file_filter())
        if path:
            self.compare_with(path)

    def compare_with(self, path: str | Path) -> None:
        self.docks["compare"].show()
        self.docks["compare"].raise_()
        self.panels["compare"].compare_with(path)

    def open_demo(self) -> None:
        from ..core.samples import demo_trace_path

        self.open_path(demo_trace_path())

    def reload(self) -> None:
        if self.session.path:
            self.open_path(self.session.path)

    def open_record_dialog(self) -> None:
        """File ▸ Record…: run a command under the recorder; open the recording after."""
        dlg = RecordDialog(self)
        dlg.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dlg.recording_finished.connect(self.open_path)
        dlg.show()
        self.record_dialog = dlg

    # -- drag and drop ----------------------------------------------------------------
    def dragEnterEvent(self, event) -> None:  # noqa: N802
        if _dropped_path(event.mimeData()):
            event.acceptProposedAction()

    def dropEvent(self, event) -> None:  # noqa: N802
        path = _dropped_path(event.mimeData())
        if path:
            event.acceptProposedAction()
            self.open_path(path)

    # -- session reactions ------------------------------------------------------------
    def _on_loading_started(self, path: str) -> None:
        self.statusBar().showMessage(f"Opening {path}")

    def _on_fleet_started(self) -> None:
        s = self.session
        self.fleet_action.setEnabled(True)
        self.show_fleet()
        self.setWindowTitle(f"{Path(s.fleet_path or '').name} ({len(s.fleet_files)} ranks) "
                            "— sofa-gui")
        if s.fleet_path:
            self.recent.add(s.fleet_path)
            self._refresh_recent()

    def show_fleet(self) -> None:
        """The fleet overview of the open rank folder (heat map, ranks, stragglers)."""
        if self.session.fleet_path:
            self._show_page(self.fleet_panel)

    def _size_pages(self, *_args) -> None:
        """Only the page shown sets the central area's minimum size (a stack takes the
        largest of all its pages otherwise: the fleet page would raise it with a trace)."""
        ignored, preferred = QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred
        for i in range(self.stack.count()):
            page = self.stack.widget(i)
            policy = preferred if page is self.stack.currentWidget() else ignored
            page.setSizePolicy(policy, policy)

    def _show_page(self, page: QWidget) -> None:
        """Switch the central page; the per-trace docks and header give the fleet
        overview the whole window and come back as they were with a trace."""
        fleet = page is self.fleet_panel
        if fleet == (self.stack.currentWidget() is self.fleet_panel):
            self.stack.setCurrentWidget(page)
            return
        docks = list(self.docks.values())
        if fleet:
            self._dock_shown = [d for d in docks if not d.isHidden()]
            for d in docks:
                d.hide()
        else:
            for d in getattr(self, "_dock_shown", docks):
                d.show()
        self.summary.setVisible(not fleet)
        self.stack.setCurrentWidget(page)

    def _on_trace_changed(self) -> None:
        s = self.session
        self._show_page(self.timeline)
        self.timeline.set_trace(s.prepared if s.prepared is not None else s.trace)
        self.timeline.set_iterations(None)
        self.timeline.set_track_state(self._remembered_tracks())
        window_actions.load_markers(self)
        title = Path(s.path or "").name
        if s.open_ranks:
            ranks = ", ".join(str(r) for r in s.open_ranks)
            title = f"rank {ranks} of {Path(s.fleet_path or '').name}"
        self.setWindowTitle(f"{title} — sofa-gui")
        if s.path:
            self.recent.add(s.path)
            self._refresh_recent()
        self.statusBar().showMessage(f"Loaded {events_loaded(s.trace):,} events; analyzing…")

    def _tracks_key(self) -> str:
        t = self.session.trace
        return f"tracks/{(t.meta.format if t is not None else '') or 'unknown'}"

    def _remembered_tracks(self) -> dict | None:
        """Lane group order, pins and label width last used for this kind of trace."""
        raw = self.prefs.value(self._tracks_key())
        try:
            state = json.loads(raw) if isinstance(raw, str) else None
        except ValueError:
            return None
        return state if isinstance(state, dict) else None

    def _remember_tracks(self) -> None:
        self.prefs.set_value(self._tracks_key(), json.dumps(self.timeline.track_state()))

    def _raise_details(self, i: int) -> None:
        """A selected slice brings the Details tab forward; clearing it leaves the right
        dock as it is (a click on empty timeline does not flip it)."""
        if i >= 0:
            self.docks["details"].raise_()

    def _open_category(self, category: str) -> None:
        if self.panels["statistics"].open_category(category):
            self._bring_forward("statistics")
        else:
            self.statusBar().showMessage(f"No statistics table for {category}", 5000)

    def _on_range(self, rng) -> None:
        """A range selection (the timeline's Ctrl-drag) brings its statistics forward."""
        if rng is not None:
            self._bring_forward("statistics")

    def _bring_forward(self, key: str) -> None:
        """Show dock ``key`` (if hidden) as the current tab of its group."""
        self.docks[key].show()
        self.docks[key].raise_()

    def _on_analysis_finished(self) -> None:
        s = self.session
        if self.stack.currentWidget() is self.fleet_panel and s.fleet is not None:
            k = len(s.fleet.stragglers)
            self.statusBar().showMessage(f"Fleet analysis done: {len(s.fleet.summaries)} ranks, "
                                         f"{k} straggler{'s' if k != 1 else ''}", 8000)
            return
        raise_useful(self)
        n = len(self.session.findings or [])
        self.statusBar().showMessage(f"Analysis done: {n} finding{'s' if n != 1 else ''}", 8000)

    def _on_load_failed(self, path: str, reason: str) -> None:
        self.statusBar().showMessage(f"Could not open {path}", 8000)
        self.show_error("Cannot open trace", f"{path}\n\n{reason}")

    def _on_job_crashed(self, message: str) -> None:
        what = "analyzing" if self.session.trace is not None else "opening"
        self.statusBar().showMessage(f"Error while {what}: {message}", 15000)
        self.show_error(f"Error while {what} the trace",
                        f"{message}\n\nThis is a bug in sofa-gui; details are in the log.")

    def show_error(self, title: str, text: str) -> QMessageBox:
        """A non-blocking, window-modal error box; the text is never read as HTML."""
        box = QMessageBox(QMessageBox.Icon.Warning, title, text, QMessageBox.StandardButton.Ok,
                          self)
        box.setTextFormat(Qt.TextFormat.PlainText)
        box.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        box.open()
        return box

    def show_load_stats(self) -> None:
        if self.session.trace is not None:
            LoadReportDialog(self.session.trace, self).open()

    def show_about(self) -> None:
        from .. import __version__

        QMessageBox.about(self, "About sofa-gui",
                          f"sofa-gui {__version__}\n\nTrace viewer and performance advisor "
                          "for deep-learning programs.")

    # -- window state -----------------------------------------------------------------
    def toggle_full_screen(self) -> None:
        self.showNormal() if self.isFullScreen() else self.showFullScreen()

    def reset_layout(self) -> None:
        self.restoreState(self._default_state, STATE_VERSION)
        for dock in self.docks.values():
            dock.show()
        raise_useful(self)

    def restore_window_state(self) -> None:
        """The geometry and docks remembered for this screen size, else the screen's
        available geometry; Compare (empty until File ▸ Compare with…) stays hidden."""
        self._restored = restore_layout(self, self.settings)
        raise_useful(self)

    def save_window_state(self) -> None:
        if self.stack.currentWidget() is self.fleet_panel:
            self._show_page(self.timeline)  # save the docks as the user left them
        self.prefs.flush()  # then this one save on the GUI thread, at close
        save_layout(self, self.settings)
        self.settings.sync()

    def _refresh_recent(self) -> None:
        self.recent_menu.clear()
        paths = self.recent.paths()
        for p in paths:
            act = self.recent_menu.addAction(p)
            act.triggered.connect(lambda _c=False, p=p: self.open_path(p))
        self.recent_menu.addSeparator()
        clear = self.recent_menu.addAction("Clear Recent")
        clear.triggered.connect(lambda: (self.recent.clear(), self._refresh_recent()))
        self.recent_menu.setEnabled(True)
        self.welcome.set_recent(paths)

    def closeEvent(self, event: QCloseEvent) -> None:  # noqa: N802
        self.save_window_state()
        self.panels["compare"].shutdown()
        self.session.shutdown()
        super().closeEvent(event)


def _key_list(spec) -> list[QKeySequence]:
    """Shortcuts from a key string, a StandardKey, or a list of both (platform keys kept,
    our defaults added where the platform has none), without duplicates."""
    out: dict[str, QKeySequence] = {}
    for item in spec if isinstance(spec, list) else [spec]:
        seqs = (QKeySequence.keyBindings(item) if isinstance(item, QKeySequence.StandardKey)
                else [QKeySequence(item)])
        for seq in seqs:
            if not seq.isEmpty():
                out.setdefault(seq.toString(), seq)
    return list(out.values())


def _dropped_path(mime) -> str | None:
    if not mime.hasUrls():
        return None
    for url in mime.urls():
        if url.isLocalFile() and Path(url.toLocalFile()).exists():
            return url.toLocalFile()
    return None
