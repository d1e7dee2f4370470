"""Small helpers every panel shares: plain-text labels, number formats, colours."""

from __future__ import annotations

import html
import re

from PySide6.QtCore import QEvent, QSize, Qt
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import QAbstractItemView, QLabel, QStyledItemDelegate, QWidget

from ...view.names import compact_name
from ...view.tooltip import literal_html

#: Severity colours (badge background); readable with white text in light and dark themes.
SEVERITY_COLORS = {"high": "#c62828", "medium": "#ef6c00", "low": "#607d8b"}


def plain_label(text: str = "", parent: QWidget | None = None, *, bold: bool = False,
                wrap: bool = False, selectable: bool = False) -> QLabel:
    """A QLabel that never interprets its text as HTML (trace names are untrusted).
    A wrapping label wraps anything (see :func:`breakable`) and asks for no width."""
    lab = WrapLabel(parent) if wrap else QLabel(parent)
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


#: Longest trace text a label shows (the rest is cut, with the length said).
MAX_SHOWN = 2000
_ZWSP = "\u200b"
_BREAK_AFTER = re.compile(r"((?<!\d)[.,]|[_/:;#()\[\]{}+*&|-])(?=\S)")
_LONG_TOKEN = re.compile(r"\S{24,}")
_LONG_RUN = re.compile(r"[^\s\u200b]{40}")


def breakable(text: str, limit: int = MAX_SHOWN) -> str:
    """``text`` as a label can wrap it: cut to ``limit`` characters, with invisible break
    chances after punctuation in words of 24 characters or more and inside runs of 40
    characters, so one mangled C++ name or a 1 MB string cannot make a label (and the
    window) wider than its dock. Short words ("host_copies") and numbers ("460.614 ms",
    "1,234") never break inside."""
    text = str(text)
    if len(text) > limit:
        text = f"{text[:limit]}… ({len(text):,} characters)"
    text = _LONG_TOKEN.sub(lambda m: _BREAK_AFTER.sub("\\1" + _ZWSP, m.group(0)), text)
    return _LONG_RUN.sub(lambda m: m.group(0) + _ZWSP, text)


def rich_label(parent: QWidget | None = None, *, wrap: bool = True) -> QLabel:
    """A QLabel for HTML we build ourselves (every trace string passed through :func:`esc`)."""
    lab = WrapLabel(parent) if wrap else QLabel(parent)
    lab.setTextFormat(Qt.TextFormat.RichText)
    lab.setWordWrap(wrap)
    lab.setOpenExternalLinks(False)
    lab.setTextInteractionFlags(Qt.TextInteractionFlag.LinksAccessibleByMouse
                                | Qt.TextInteractionFlag.LinksAccessibleByKeyboard)
    return lab


class WrapLabel(QLabel):
    """A word-wrapping label whose text can always wrap (:func:`breakable`); ``text()``
    still returns what was set.  Its minimum width is small, never the longest word.

    Its size hints are remembered until the text, font, style or wrapping changes:
    Qt asks a wrapped rich-text label for them again and again while a layout settles
    (~600 calls for three finding cards, each laying the HTML out anew, ~200 ms).
    """

    _sizes: dict | None = None

    def _remembered(self, key, compute):
        sizes = self._sizes
        if sizes is None:
            sizes = self._sizes = {}
        got = sizes.get(key)
        if got is None:
            got = sizes[key] = compute()
        return got

    def setText(self, text: str) -> None:  # noqa: N802
        self._raw = str(text)
        self._sizes = None
        super().setText(breakable(self._raw) if self.textFormat() != Qt.TextFormat.RichText
                        else text)

    def setTextFormat(self, fmt) -> None:  # noqa: N802
        self._sizes = None
        super().setTextFormat(fmt)

    def setWordWrap(self, on: bool) -> None:  # noqa: N802
        self._sizes = None
        super().setWordWrap(on)

    def changeEvent(self, event) -> None:  # noqa: N802
        if event.type() in _SIZE_EVENTS:
            self._sizes = None
        super().changeEvent(event)

    def text(self) -> str:
        return getattr(self, "_raw", super().text())

    def sizeHint(self):  # noqa: N802
        return QSize(self._remembered("hint", lambda: QLabel.sizeHint(self)))

    def minimumSizeHint(self):  # noqa: N802
        def small():
            hint = QLabel.minimumSizeHint(self)
            hint.setWidth(min(hint.width(), 80))
            return hint

        return QSize(self._remembered("min", small))

    def heightForWidth(self, width: int) -> int:  # noqa: N802
        return self._remembered(width, lambda: QLabel.heightForWidth(self, width))


class FitLabel(WrapLabel):
    """A wrapping label that a short panel can hold to one line (:meth:`set_one_line`):
    the text is then elided to the label's width and the whole of it is the tooltip
    (with ``tip``, the tooltip the label has in either mode, below it)."""

    _one_line = False
    tip = ""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setTextFormat(Qt.TextFormat.PlainText)  # trace names are untrusted
        self.setWordWrap(True)

    def set_one_line(self, on: bool) -> None:
        if on != self._one_line:
            self._one_line = on
            self.setWordWrap(not on)
            self._show()

    def set_tip(self, tip: str) -> None:
        self.tip = tip
        self._show()

    def setText(self, text: str) -> None:  # noqa: N802
        super().setText(text)
        self._show()

    def resizeEvent(self, event) -> None:  # noqa: N802
        super().resizeEvent(event)
        if self._one_line:
            self._show()

    def _show(self) -> None:
        raw = self.text()
        if self._one_line:
            QLabel.setText(self, self.fontMetrics().elidedText(
                raw, Qt.TextElideMode.ElideRight, max(self.contentsRect().width(), 1)))
        else:
            QLabel.setText(self, breakable(raw))
        whole = self._one_line and raw and QLabel.text(self) != raw and raw not in self.tip
        tip = "\n\n".join(t for t in ((raw if whole else ""), self.tip) if t)
        self.setToolTip(literal_html(tip) if tip else "")

    def sizeHint(self):  # noqa: N802
        if self._one_line:
            return QSize(80, self.fontMetrics().height())
        return super().sizeHint()

    def minimumSizeHint(self):  # noqa: N802
        if self._one_line:
            return QSize(40, self.fontMetrics().height())
        return super().minimumSizeHint()


#: Events after which a label's size hints must be computed again.
_SIZE_EVENTS = (QEvent.Type.FontChange, QEvent.Type.StyleChange,
                QEvent.Type.ContentsRectChange, QEvent.Type.LayoutDirectionChange)


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


def row_picker(view: QAbstractItemView) -> QAbstractItemView:
    """A read-only table where a click picks one whole row (the panels' tables)."""
    view.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
    view.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
    view.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
    return view


class TailElideDelegate(QStyledItemDelegate):
    """Paints a name column so its distinctive tail stays readable: a name that does not
    fit loses its return type, argument list and namespaces first
    (:func:`~sofa_gui.view.names.compact_name`, ``compact=True``), then its start
    ("…elementwise_kernel<float>"). The model's text is untouched: tooltips, copy and
    sorting see the full name."""

    def __init__(self, parent=None, compact: bool = True):
        super().__init__(parent)
        self.compact = compact

    def initStyleOption(self, option, index) -> None:  # noqa: N802
        super().initStyleOption(option, index)
        option.textElideMode = Qt.TextElideMode.ElideLeft
        if not self.compact or not option.text:
            return
        room = option.rect.width() - 8 - (option.decorationSize.width() + 4
                                          if option.features & option.ViewItemFeature.HasDecoration
                                          else 0)
        if option.fontMetrics.horizontalAdvance(option.text) > room:
            option.text = compact_name(option.text)


class ComputedWhenSeen:
    """Mixin for a panel whose content is costly: :meth:`refresh` recomputes now when the
    panel is on screen, else when it is next shown. At 1e6 events one Statistics table
    costs ~0.4 s of the GUI thread, which an open must not pay for a tab nobody is looking
    at (it was the longest stall of a cached reopen). The panel defines ``_compute()``
    (which clears ``_stale``); put the mixin before the Qt base class."""

    _stale = True

    def refresh(self) -> None:
        if self.isVisible() and not self.visibleRegion().isEmpty():
            self._compute()
        else:
            self._stale = True

    def showEvent(self, event) -> None:  # noqa: N802
        super().showEvent(event)
        if self._stale and not self.visibleRegion().isEmpty():
            self._compute()

    def dock_visibility_changed(self, visible: bool) -> None:
        """Its dock's tab was chosen (a tabbed dock that is not the current tab stays
        'visible', moved off screen, so no show event comes)."""
        if visible and self._stale:
            self._compute()


def stack(panel: QWidget, top, caption: QLabel, body: QWidget) -> None:
    """The panels' layout: a row of controls, a caption line, then the body."""
    from PySide6.QtWidgets import QVBoxLayout

    lay = QVBoxLayout(panel)
    lay.setContentsMargins(4, 4, 4, 4)
    lay.addLayout(top)
    lay.addWidget(caption)
    lay.addWidget(body, 1)
