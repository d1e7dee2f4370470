"""Small helpers every panel shares: plain-text labels, number formats, colours."""

from __future__ import annotations

import html

from PySide6.QtCore import Qt
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import QLabel, QWidget

#: Severity colours (badge background); readable with white text in light and dark themes.
SEVERITY_COLORS = {"high": "#c62828", "medium": "#ef6c00", "low": "#607d8b"}


def plain_label(text: str = "", parent: QWidget | None = None, *, bold: bool = False,
                wrap: bool = False, selectable: bool = False) -> QLabel:
    """A QLabel that never interprets its text as HTML (trace names are untrusted)."""
    lab = QLabel(parent)
    lab.setTextFormat(Qt.TextFormat.PlainText)
    lab.setText(text)
    lab.setWordWrap(wrap)
    if bold:
        f = lab.font()
        f.setBold(True)
        lab.setFont(f)
    if selectable:
        lab.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
    return lab


def rich_label(parent: QWidget | None = None, *, wrap: bool = True) -> QLabel:
    """A QLabel for HTML we build ourselves (every trace string passed through :func:`esc`)."""
    lab = QLabel(parent)
    lab.setTextFormat(Qt.TextFormat.RichText)
    lab.setWordWrap(wrap)
    lab.setOpenExternalLinks(False)
    lab.setTextInteractionFlags(Qt.TextInteractionFlag.LinksAccessibleByMouse
                                | Qt.TextInteractionFlag.LinksAccessibleByKeyboard)
    return lab


def esc(text) -> str:
    """Escape ``text`` for use inside rich text."""
    return html.escape(str(text), quote=True)



def fmt_offset(ns) -> str:
    """A time as an offset from the trace start, in ms with µs resolution."""
    return f"{float(ns) / 1e6:,.3f} ms"


def set_muted(label: QLabel) -> None:
    pal = label.palette()
    pal.setColor(QPalette.ColorRole.WindowText, pal.color(QPalette.ColorRole.PlaceholderText))
    label.setPalette(pal)

