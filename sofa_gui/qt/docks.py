"""The dock table: every side panel declares its dock where it is defined.

A panel module in :mod:`sofa_gui.qt.panels` that sets ``DOCK = DockSpec(...)`` gets a
dock in the main window, an entry in View, and a place in Reset Layout; nothing else
lists it. Docks of one area are stacked in ``order`` (right: top to bottom, bottom: left
to right) with ``size`` pixels along that direction; a spec with ``tab_with`` becomes a
tab of that dock instead (Details with Bottlenecks: it is empty until a slice is clicked).
A panel sits in a :func:`dock_body`, so no dock has a minimum size from its content.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFrame, QScrollArea, QWidget

#: area -> (Qt area, direction docks of the area are stacked in, its initial thickness px)
AREAS = {
    "right": (Qt.DockWidgetArea.RightDockWidgetArea, Qt.Orientation.Vertical, 440),
    "bottom": (Qt.DockWidgetArea.BottomDockWidgetArea, Qt.Orientation.Horizontal, 330),
}


@dataclass(frozen=True)
class DockSpec:
    key: str  # "findings": window.panels["findings"], dock object name "findingsDock"
    title: str  # dock title and View menu entry
    area: str  # a key of AREAS
    order: int  # place within the area
    size: int  # initial extent along the area's stacking direction, px
    factory: Callable  # factory(session) -> the panel widget
    tab_with: str = ""  # key of the dock this one is a tab of ("" = its own place)

    @property
    def object_name(self) -> str:  # saved window states refer to docks by this name
        return f"{self.key}Dock"


def dock_specs() -> list[DockSpec]:
    """Every panel module's ``DOCK``, in area then order."""
    from . import panels

    specs = []
    for info in pkgutil.iter_modules(panels.__path__):
        mod = importlib.import_module(f"{panels.__name__}.{info.name}")
        spec = getattr(mod, "DOCK", None)
        if isinstance(spec, DockSpec):
            specs.append(spec)
    return sorted(specs, key=lambda s: (list(AREAS).index(s.area), s.order, s.key))


def dock_body(panel: QWidget) -> QScrollArea:
    """``panel`` inside a frameless scroll area: the dock can be made as small as the user
    likes (the window never grows for a long combo entry or a row of buttons), and when it
    is smaller than what the panel needs, the panel scrolls instead of being cut."""
    area = QScrollArea()
    area.setObjectName(f"{panel.objectName() or type(panel).__name__}Body")
    area.setFrameShape(QFrame.Shape.NoFrame)
    area.setWidgetResizable(True)
    area.setWidget(panel)
    return area
