"""Help ▸ Keyboard Shortcuts (``?``): every shortcut of the menus and the timeline's
mouse gestures, in one window."""

from __future__ import annotations

from PySide6.QtGui import QKeySequence
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QMenu,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
)

#: What the mouse does on the timeline (no menu entry can say it).
GESTURES = (
    ("Click", "select a slice (on the iteration strip: an iteration)"),
    ("Double-click", "select and zoom to it"),
    ("Drag", "zoom to the dragged time range"),
    ("Ctrl+drag", "select a time range over the lanes it crosses (Statistics)"),
    ("Shift+drag / middle drag", "pan"),
    ("Wheel / Shift+wheel", "zoom around the cursor / scroll the lanes"),
    ("Shift+click, Shift+click", "measure between two points (the delta stays drawn)"),
    ("Click on the time ruler", "add a marker there"),
    ("Right-click a slice", "copy, find all like it, zoom, Statistics, flow partner"),
)


def menu_shortcuts(menu_bar) -> list[tuple[str, str, str]]:
    """(menu, entry, keys) for every menu entry that has keys (shown after a tab in
    its text, or set as its shortcuts)."""
    out = []

    def walk(menu: QMenu, where: str) -> None:
        for act in menu.actions():
            if act.menu() is not None:
                walk(act.menu(), f"{where} ▸ {act.menu().title().replace('&', '')}")
                continue
            text, _tab, shown = act.text().partition("\t")
            keys = ", ".join(s.toString(QKeySequence.SequenceFormat.NativeText)
                             for s in act.shortcuts()) or shown
            if keys and not act.isSeparator():
                out.append((where, text.replace("&", ""), keys))

    for act in menu_bar.actions():
        if act.menu() is not None:
            walk(act.menu(), act.menu().title().replace("&", ""))
    return out


class ShortcutSheet(QDialog):
    """A list of every key and gesture, grouped by menu."""

    def __init__(self, window):
        super().__init__(window)
        self.setWindowTitle("Keyboard shortcuts")
        self.tree = QTreeWidget(self)
        self.tree.setHeaderLabels(["Keys", "Does"])
        self.tree.setRootIsDecorated(True)
        groups: dict[str, QTreeWidgetItem] = {}
        for where, text, keys in menu_shortcuts(window.menuBar()):
            if where not in groups:
                groups[where] = QTreeWidgetItem(self.tree, [where, ""])
            QTreeWidgetItem(groups[where], [keys, text])
        mouse = QTreeWidgetItem(self.tree, ["Timeline (mouse)", ""])
        for keys, text in GESTURES:
            QTreeWidgetItem(mouse, [keys, text])
        self.tree.expandAll()
        self.tree.resizeColumnToContents(0)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close, self)
        buttons.rejected.connect(self.reject)
        lay = QVBoxLayout(self)
        lay.addWidget(self.tree)
        lay.addWidget(buttons)
        self.resize(560, 560)

    def entries(self) -> list[tuple[str, str]]:
        """(keys, text) of every row (tests)."""
        out = []
        for g in range(self.tree.topLevelItemCount()):
            group = self.tree.topLevelItem(g)
            out += [(group.child(k).text(0), group.child(k).text(1))
                    for k in range(group.childCount())]
        return out
