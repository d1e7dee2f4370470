"""Guard against the PySide6 6.12.0 bug (Python 3.11): void Qt calls decref ``None``.

A pyqtgraph window then aborts with ``none_dealloc`` after ~60 repaints; 6.11.3 is clean.
"""

import sys

import pytest

pytest.importorskip("PySide6")


def test_pyside_does_not_leak_none_refs(qapp):
    from PySide6 import QtGui

    img = QtGui.QImage(8, 8, QtGui.QImage.Format.Format_ARGB32)
    painter = QtGui.QPainter(img)
    pen = QtGui.QPen()
    before = sys.getrefcount(None)
    for _ in range(1000):
        painter.setPen(pen)
    painter.end()
    assert sys.getrefcount(None) >= before - 10
