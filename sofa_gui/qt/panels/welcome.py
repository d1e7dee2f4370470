"""Start page shown until a trace is open: open buttons, recent traces, drop hint."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QHBoxLayout, QPushButton, QVBoxLayout, QWidget

from .common import esc, plain_label, rich_label, set_muted


class WelcomePage(QWidget):
    """Emits ``open_file``, ``open_folder``, ``open_demo`` or ``open_path(str)``."""

    open_file = Signal()
    open_folder = Signal()
    open_demo = Signal()
    open_path = Signal(str)

    def __init__(self, parent=None):
        super().__init__(parent)
        title = plain_label("Open a trace to start", self, bold=True)
        f = title.font()
        f.setPointSizeF(f.pointSizeF() * 1.6)
        title.setFont(f)
        hint = plain_label(
            "PyTorch / Kineto and Chrome trace JSON (.json, .json.gz), Nsight Systems SQLite,"
            " TensorFlow / JAX XProf (.xplane.pb, .xplane.pb.gz, TensorBoard log folders),"
            " SOFA log folders, recorder folders and per-rank folders.\n"
            "Drop a file or folder anywhere on this window.", self, wrap=True)
        set_muted(hint)
        hint.setAlignment(Qt.AlignmentFlag.AlignCenter)
        buttons = QHBoxLayout()
        buttons.addStretch(1)
        for text, sig in (("Open File…", self.open_file), ("Open Folder…", self.open_folder),
                          ("Open Demo Trace", self.open_demo)):
            b = QPushButton(text, self)
            b.clicked.connect(sig.emit)
            b.setMinimumWidth(110)  # roomy, yet the page never widens a small window
            buttons.addWidget(b)
        buttons.addStretch(1)
        self.recent = rich_label(self)
        self.recent.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.recent.linkActivated.connect(lambda href: self.open_path.emit(href[5:]))
        lay = QVBoxLayout(self)
        lay.addStretch(2)
        lay.addWidget(title, 0, Qt.AlignmentFlag.AlignHCenter)
        lay.addSpacing(8)
        lay.addWidget(hint)
        lay.addSpacing(16)
        lay.addLayout(buttons)
        lay.addSpacing(16)
        lay.addWidget(self.recent)
        lay.addStretch(3)
        self.setMaximumWidth(16777215)

    def set_recent(self, paths: list[str]) -> None:
        if not paths:
            self.recent.setText("")
            return
        links = "<br>".join(
            f"<a href='open:{esc(p)}'>{esc(Path(p).name)}</a> <small>{esc(str(Path(p).parent))}"
            "</small>" for p in paths[:6])
        self.recent.setText("<b>Recent</b><br>" + links)
