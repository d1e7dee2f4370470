"""Start the desktop app: QApplication, settings, main window, event loop.

``run_from_args`` is what ``sofa-gui view`` / ``sofa-gui demo`` call (see cli.py).
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

log = logging.getLogger(__name__)

ORG = "sofa-gui"
APP = "sofa-gui"


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


def make_app(argv: list[str] | None = None):
    """The QApplication (created once), with names, icon and high-DPI policy set."""
    from PySide6.QtCore import Qt
    from PySide6.QtGui import QGuiApplication, QIcon
    from PySide6.QtWidgets import QApplication

    app = QApplication.instance()
    if app is not None:
        return app
    QGuiApplication.setHighDpiScaleFactorRoundingPolicy(
        Qt.HighDpiScaleFactorRoundingPolicy.PassThrough)
    _quiet_offscreen_warnings()
    app = QApplication(argv if argv is not None else [sys.argv[0]])
    app.setOrganizationName(ORG)
    app.setApplicationName(APP)
    app.setApplicationDisplayName("sofa-gui")
    app.setDesktopFileName("io.github.sofa_gui.SofaGui")
    _apply_color_scheme(app)
    icon = _icon_path()
    if icon is not None:
        app.setWindowIcon(QIcon(str(icon)))
    return app


#: Harmless warnings of the offscreen platform plugin (headless screenshots, tests).
_NOISE = ("does not support propagateSizeHints",)


def _quiet_offscreen_warnings() -> None:
    """Drop known-harmless platform warnings; everything else still reaches stderr."""
    from PySide6.QtCore import qInstallMessageHandler

    def handler(_mode, _context, message: str) -> None:
        if not any(n in message for n in _NOISE):
            sys.stderr.write(message + "\n")

    if os.environ.get("QT_QPA_PLATFORM") == "offscreen":
        qInstallMessageHandler(handler)


def _apply_color_scheme(app) -> None:
    """Light/dark follows the system palette; ``$SOFA_GUI_COLOR_SCHEME=dark|light`` forces
    one (for headless screenshots and checks, where there is no system theme)."""
    want = os.environ.get("SOFA_GUI_COLOR_SCHEME", "").lower()
    if want not in ("dark", "light"):
        return
    app.setStyle("Fusion")
    app.setPalette(_dark_palette() if want == "dark" else app.style().standardPalette())


_DARK = {
    "Window": "#2b2b2b", "WindowText": "#e6e6e6", "Base": "#1f1f1f", "AlternateBase": "#272727",
    "ToolTipBase": "#3a3a3a", "ToolTipText": "#e6e6e6", "PlaceholderText": "#8f8f8f",
    "Text": "#e6e6e6", "Button": "#353535", "ButtonText": "#e6e6e6", "BrightText": "#ff6b6b",
    "Light": "#505050", "Midlight": "#404040", "Mid": "#5a5a5a", "Dark": "#1a1a1a",
    "Shadow": "#000000", "Highlight": "#2f65ca", "HighlightedText": "#ffffff",
    "Link": "#6ab0ff", "LinkVisited": "#b48cff",
}


def _dark_palette():
    from PySide6.QtGui import QColor, QPalette

    pal = QPalette()
    for role, color in _DARK.items():
        pal.setColor(getattr(QPalette.ColorRole, role), QColor(color))
    grey = QColor("#7a7a7a")
    for role in ("WindowText", "Text", "ButtonText"):
        pal.setColor(QPalette.ColorGroup.Disabled, getattr(QPalette.ColorRole, role), grey)
    return pal


def _icon_path() -> Path | None:
    from ..core.samples import resources_dir

    try:
        p = resources_dir() / "icons" / "sofa-gui.svg"
    except FileNotFoundError:
        return None
    return p if p.is_file() else None


def freeze_startup_objects() -> None:
    """Move every object alive after start-up out of the cyclic GC's reach.

    Qt, pyqtgraph and numpy leave ~100k long-lived objects; a full collection
    walks them all (60-110 ms measured), holding the GIL, which would stall the
    GUI thread whichever thread triggered it.
    """
    import gc

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
        size = parse_size(getattr(args, "size", "1600x1000") or "1600x1000")
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    shot = getattr(args, "screenshot", None)
    if shot and not has_display():
        os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    if shot:
        from .screenshot import take_screenshot

        return take_screenshot(path, shot, size=size, iteration=args.iteration,
                               mode=args.iterations)
    return run_window(path, size, mode=args.iterations)


def run_window(path: str | None, size: tuple[int, int], mode: str = "auto") -> int:
    """Show the main window (opening ``path`` if given) and run the event loop."""
    app = make_app()
    from .main_window import MainWindow

    win = MainWindow(make_settings())
    win.set_iteration_mode(mode)
    freeze_startup_objects()
    if not win.settings.contains("window/geometry"):
        win.resize(*size)
    win.show()
    restore = _close_on_signals(win)
    if path:
        win.open_path(path)
    try:
        return app.exec()
    finally:
        restore()


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
