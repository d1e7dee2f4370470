"""Where the main window goes and how its docks share it, from the screen it is on.

The first window of a screen size takes the screen's available geometry; what the user
makes of it (size, place, docks) is remembered per screen size, so a laptop and a desk
monitor each get their own. The dock shares depend on the width class:

- ``wide`` (>= 1920 px): right column 24 %, bottom row 36 %;
- ``medium`` (1281-1919 px, e.g. 1366-1600): right column 28 %, bottom row 33 %;
- ``narrow`` (<= 1280 px): right column 30 %, bottom row 33 %,

so at 1280x800 and 1366x768 the timeline keeps at least 45 % of the height.
"""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import QByteArray, QRect, QSettings, QSize, Qt
from PySide6.QtWidgets import QMainWindow

from .docks import dock_specs

#: Saved window states carry this version; older ones are not restored.
STATE_VERSION = 2  # 2: Statistics and Ranks docks, Details tabbed
#: Size of a window built before it knows its screen (tests, screenshots resize it).
DEFAULT_SIZE = QSize(1600, 1000)


@dataclass(frozen=True)
class ScreenLayout:
    name: str
    right: float  # right column, share of the window width
    bottom: float  # bottom row, share of the window height


WIDE = ScreenLayout("wide", 0.24, 0.36)
MEDIUM = ScreenLayout("medium", 0.28, 0.33)
NARROW = ScreenLayout("narrow", 0.30, 0.33)


def layout_for(width: int) -> ScreenLayout:
    """The dock layout for a window (or screen) ``width`` px wide."""
    if width >= 1920:
        return WIDE
    return MEDIUM if width > 1280 else NARROW


def screen_key(size: QSize) -> str:
    """Settings group of a screen size: ``window/1366x768``."""
    return f"window/{size.width()}x{size.height()}"


def available_geometry(win: QMainWindow) -> QRect:
    screen = win.screen()
    return screen.availableGeometry() if screen is not None else QRect(0, 0, 1600, 1000)


def fit_docks(win: QMainWindow, width: int, height: int) -> None:
    """Dock sizes as shares of the window for its width class (fixed pixels squeeze the
    right column to nothing at 1280x800); the bottom docks share the rest of the width
    by their specs' sizes."""
    horizontal, vertical = Qt.Orientation.Horizontal, Qt.Orientation.Vertical
    shares = layout_for(width)
    specs = [d for d in dock_specs() if not d.tab_with and d.key in win.docks]
    right = [d for d in specs if d.area == "right"]
    bottom = [d for d in specs if d.area == "bottom"]
    if right:
        win.resizeDocks([win.docks[right[0].key]], [int(width * shares.right)], horizontal)
    if bottom:
        win.resizeDocks([win.docks[bottom[0].key]], [int(height * shares.bottom)], vertical)
        usable = width * (1 - shares.right)
        total = sum(d.size for d in bottom) or 1
        win.resizeDocks([win.docks[d.key] for d in bottom],
                        [int(usable * d.size / total) for d in bottom], horizontal)


def restore(win: QMainWindow, settings: QSettings) -> bool:
    """Geometry and docks remembered for this screen size, or the screen's available
    geometry for a first window; True when a saved state was restored."""
    avail = available_geometry(win)
    key = screen_key(avail.size())
    geo, state = settings.value(f"{key}/geometry"), settings.value(f"{key}/state")
    if isinstance(geo, QByteArray) and win.restoreGeometry(geo):
        restored = isinstance(state, QByteArray) and win.restoreState(state, STATE_VERSION)
        return bool(restored)
    win.setGeometry(avail)
    return False


def save(win: QMainWindow, settings: QSettings) -> None:
    """Remember the geometry and docks under the size of the screen the window is on."""
    key = screen_key(available_geometry(win).size())
    settings.setValue(f"{key}/geometry", win.saveGeometry())
    settings.setValue(f"{key}/state", win.saveState(STATE_VERSION))


def raise_useful(win: QMainWindow) -> None:
    """A tab with nothing to show (a panel whose ``has_content()`` is False: Compare
    before a comparison, Ranks of a one-rank trace) gives its place to the first tab of
    its group; an empty Compare is hidden."""
    for spec in dock_specs():
        panel, dock = win.panels.get(spec.key), win.docks.get(spec.key)
        if dock is None or not hasattr(panel, "has_content") or panel.has_content():
            continue
        if spec.key == "compare":
            dock.hide()
        elif spec.tab_with and not dock.isHidden() and not dock.visibleRegion().isEmpty():
            win.docks[spec.tab_with].raise_()
