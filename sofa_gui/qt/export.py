"""File ▸ Export: the timeline view as PNG or SVG, a table as CSV, the report as HTML.

Each writer takes a path and returns it; the menu asks for the path with a save dialog
that starts beside the open trace. A file that cannot be written gives one line in the
status bar and a message box, never a traceback.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

from PySide6.QtCore import QPoint, QRect, QSize, Qt
from PySide6.QtGui import QPainter, QRegion
from PySide6.QtSvg import QSvgGenerator
from PySide6.QtWidgets import QAbstractItemView, QFileDialog, QTableView

from ..core.analysis.report import write_report


def timeline_png(timeline, path: str | Path) -> Path:
    """The timeline as it is on screen (lane labels, axis and lanes)."""
    if not timeline.grab().save(str(path), "PNG"):
        raise OSError(f"{path}: could not write PNG")
    return Path(path)


def timeline_svg(timeline, path: str | Path) -> Path:
    """The timeline drawn into an SVG file of the widget's size."""
    gen = QSvgGenerator()
    gen.setFileName(str(path))
    size = timeline.size()
    gen.setSize(QSize(size))
    gen.setViewBox(QRect(0, 0, size.width(), size.height()))
    gen.setTitle("sofa-gui timeline")
    painter = QPainter()
    if not painter.begin(gen):
        raise OSError(f"{path}: could not write SVG")
    try:
        timeline.render(painter, QPoint(0, 0), QRegion(timeline.rect()))
    finally:
        painter.end()
    return Path(path)


def table_csv_text(view: QAbstractItemView) -> str:
    """Every row of ``view``'s model (in the view's order), headers first, full text."""
    model = view.model()
    hidden = getattr(view, "isColumnHidden", lambda _c: False)
    cols = [c for c in range(model.columnCount()) if not hidden(c)]
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow([model.headerData(c, Qt.Orientation.Horizontal) for c in cols])
    for r in range(model.rowCount()):
        writer.writerow([_cell(model, r, c) for c in cols])
    return out.getvalue()


def _cell(model, r: int, c: int) -> str:
    value = model.index(r, c).data(Qt.ItemDataRole.DisplayRole)
    return "" if value is None else str(value)


def table_csv(view: QAbstractItemView, path: str | Path) -> Path:
    Path(path).write_text(table_csv_text(view), encoding="utf-8")
    return Path(path)


def report_html(session, path: str | Path) -> Path:
    """The performance report of the open trace (what ``sofa-gui report`` writes)."""
    return write_report(session.trace, session.analysis, path)


def tables_of(window) -> dict[str, QAbstractItemView]:
    """Exportable tables by a title: every table view of the docks' panels."""
    out = {}
    for key, panel in window.panels.items():
        seen = panel.findChildren(QTableView)  # QTableWidget included
        for k, view in enumerate(seen):
            name = window.docks[key].windowTitle()
            out[name if len(seen) == 1 else f"{name} ({k + 1})"] = view
    return out


def start_dir(window) -> str:
    """Where save and open dialogs start: beside the open trace, else the last folder."""
    path = window.session.path
    if path:
        p = Path(path)
        return str(p if p.is_dir() else p.parent)
    return str(window.prefs.value("dialog/dir", str(Path.home())))


def ask_path(window, title: str, name: str, filter_: str) -> str:
    path, _ = QFileDialog.getSaveFileName(window, title, str(Path(start_dir(window)) / name),
                                          filter_)
    return path


def run_export(window, write, path: str) -> None:
    """Call ``write(path)``; say where it went, or why not, in one line."""
    if not path:
        return
    try:
        out = write(path)
    except (OSError, ValueError) as exc:
        window.statusBar().showMessage(f"Could not export {path}: {exc}", 10000)
        window.show_error("Export failed", f"{path}\n\n{exc}")
        return
    window.statusBar().showMessage(f"Exported {out}", 8000)
