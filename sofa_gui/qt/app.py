"""Start the desktop app: QApplication, settings, main window, event loop.

``run_from_args`` is what ``sofa-gui view`` / ``sofa-gui demo`` call (see cli.py).
"""

from __future__ import annotations

import logging
import os
import sys

from .application import APP, ORG, make_app

log = logging.getLogger(__name__)

__all__ = ["make_app", "run_from_args", "run_window"]


def has_display() -> bool:
    """Whether a window system is reachable (always on macOS / Windows)."""
    if not sys.platform.startswith("linux"):
        return True
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


def parse_size(text: str) -> tuple[int, int]:
    """``"1600x1000"`` -> (1600, 1000); ValueError for anything else."""
    try:
        w, h = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise ValueError(f"size must look like 1600x1000, not {text!r}") from None
    if not (200 <= w <= 16384 and 200 <= h <= 16384):
        raise ValueError(f"size {w}x{h} out of range (200..16384 per side)")
    return w, h


#: Modules the first open of a trace imports (the Chrome/Kineto reader, the trace
#: cache, the analysis results the analysis cache holds). Imported at start-up: on
#: the job thread they held the GIL ~110 ms against the GUI thread mid-open.
OPEN_MODULES = (
    "sofa_gui.core.store",
    "sofa_gui.core.fleet.runset",
    "sofa_gui.core.importers.chrome.rank_folder",
    "sofa_gui.core.importers.chrome.trace",
    "sofa_gui.core.analysis.breakdown",
    "sofa_gui.core.analysis.ranks",
    "sofa_gui.core.analysis.run_facts",
    "sofa_gui.core.analysis.tfdata",  # the analysis cache's result types (codec.result_types)
    "sofa_gui.core.analysis.cache",
    "sofa_gui.view.model",
    "sofa_gui.app.fleet_jobs",
)


def freeze_startup_objects() -> None:
    """Import what an open needs, then move every object alive after start-up out of
    the cyclic GC's reach.

    Qt, pyqtgraph and numpy leave ~100k long-lived objects; a full collection
    walks them all (60-110 ms measured), holding the GIL, which would stall the
    GUI thread whichever thread triggered it.
    """
    import gc
    import importlib

    for name in OPEN_MODULES:
        importlib.import_module(name)
    gc.collect()
    gc.freeze()


def make_settings():
    """QSettings of the app; ``$SOFA_GUI_SETTINGS`` (an .ini path) isolates tests and runs."""
    from PySide6.QtCore import QSettings

    path = os.environ.get("SOFA_GUI_SETTINGS")
    if path:
        return QSettings(path, QSettings.Format.IniFormat)
    return QSettings(QSettings.Format.IniFormat, QSettings.Scope.UserScope, ORG, APP)


def run_from_args(args) -> int:
    """Entry for ``view`` / ``demo``: open the window (or take a screenshot and exit)."""
    path = getattr(args, "path", None)
    if args.command == "demo":
        from ..core.samples import demo_trace_path

        path = str(demo_trace_path())
    try:
        given = getattr(args, "size", None)
        size = parse_size(given) if given else None
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    shot = getattr(args, "screenshot", None)
    if shot and not has_display():
        os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    if shot:
        from .screenshot import take_screenshot

        return take_screenshot(path, shot, size=size or (1600, 1000), iteration=args.iteration,
                               mode=args.iterations)
    return run_window(path, size, mode=args.iterations)


def run_window(path: str | None, size: tuple[int, int] | None, mode: str = "auto") -> int:
    """Show the main window (opening ``path`` if given) and run the event loop; without
    ``size`` it takes what was remembered for this screen size, else the whole screen."""
    from ..app.background_load import prestart
    from . import collector

    prestart()  # a loader child imports its modules while the window is built
    app = make_app()
    gc_on_gui = collector.start(app)  # job threads never run a collection
    try:
        from .main_window import MainWindow

        win = MainWindow(make_settings())
        win.set_iteration_mode(mode)
        freeze_startup_objects()
        if size:
            win.resize(*size)
        win.show()
        restore = _close_on_signals(win)
        if path:
            win.open_path(path)
        try:
            return app.exec()
        finally:
            restore()
    finally:
        gc_on_gui.stop()


def _close_on_signals(win):
    """Ctrl+C / SIGTERM close the window properly (state saved, jobs cancelled).

    Python runs signal handlers only between bytecodes, so a timer wakes the
    interpreter a few times a second while Qt's loop idles in C++. Returns a
    function that puts the previous handlers back.
    """
    import signal

    from PySide6.QtCore import QTimer

    def handler(_signum, _frame):
        win.close()

    old = {}
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            old[sig] = signal.signal(sig, handler)
        except (ValueError, OSError):  # not the main thread / unsupported
            break
    tick = QTimer(win)
    tick.timeout.connect(lambda: None)
    tick.start(250)

    def restore():
        tick.stop()
        for sig, h in old.items():
            signal.signal(sig, h)

    return restore
