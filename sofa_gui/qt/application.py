"""The QApplication: created once, with names, icon, colour scheme and quiet offscreen output.

Its own module so that both the app start-up (:mod:`.app`) and headless screenshots
(:mod:`.screenshot`) use it without importing each other.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ORG = "sofa-gui"
APP = "sofa-gui"


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
