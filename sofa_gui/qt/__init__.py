"""Qt layer: main window, timeline, panels, workers.  Only ``cli`` imports it.

This is the one place the Qt binding is chosen: PySide6 is imported before
pyqtgraph (which would otherwise prefer PyQt if installed) and pyqtgraph's
global options are set here.
"""

import os

os.environ.setdefault("PYQTGRAPH_QT_LIB", "PySide6")

import PySide6.QtCore  # noqa: E402,F401,I001  (binding first, then pyqtgraph)
import pyqtgraph as _pg  # noqa: E402

# No antialiasing: the timeline draws pixel-snapped blocks, and AA costs 2-3x per frame.
_pg.setConfigOptions(antialias=False)
