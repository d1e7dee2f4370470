"""Details dock: everything about the selected slice, its args and its flow partners.

Flow partners (e.g. the ``cudaLaunchKernel`` that launched a kernel, or the
kernels it launched) are links: activating one selects that slice and reveals it
on the timeline. Observes ``Session.slice_selected`` and ``trace_changed``.
"""

from __future__ import annotations

import json

from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import (
    QFormLayout,
    QHeaderView,
    QPushButton,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from ...core.names import demangle
from ...core.trace import CopyKind, Kind, Trace
from ...core.units import fmt_bytes, fmt_ns, fmt_rate, lane_title
from ...view.tooltip import literal_html
from ..docks import DockSpec
from ..session import Session
from .common import breakable, esc, fmt_offset, plain_label, rich_label, set_muted

#: Flow partners listed before "… and N more".
MAX_PARTNERS = 20


class DetailsPanel(QWidget):
    """The Details dock's widget."""

    def __init__(self, session: Session, parent=None):
        super().__init__(parent)
        self.session = session
        self.placeholder = plain_label("Click a slice on the timeline to see its details.",
                                       self, wrap=True)
        set_muted(self.placeholder)
        self.name = plain_label("", self, bold=True, wrap=True, selectable=True)
        # names over MAX_NAME_CHARS are shown cut; the full text is one click away
        self.copy_full = QPushButton("Copy full name", self)
        self.copy_full.setToolTip("The name is shown cut; copy its full text to the clipboard")
        self.copy_full.clicked.connect(self._copy_full_name)
        self._slice = -1
        self.form = QFormLayout()
        self.form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        self.fields: dict[str, object] = {}
        for key in ("Raw name", "Kind", "Lane", "Start", "Duration", "Depth", "Device", "Copy",
                    "Bytes", "Correlation"):
            lab = plain_label("", self, selectable=True, wrap=True)
            self.fields[key] = lab
            self.form.addRow(key, lab)
        self.partners = rich_label(self)
        self.partners.linkActivated.connect(self._on_link)
        self.args = QTreeWidget(self)
        self.args.setColumnCount(2)
        self.args.setHeaderLabels(["Argument", "Value"])
        self.args.setUniformRowHeights(True)
        self.args.header().setSectionResizeMode(0, QHeaderView.ResizeMode.ResizeToContents)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(6, 6, 6, 6)
        lay.addWidget(self.placeholder)
        lay.addWidget(self.copy_full, 0, Qt.AlignmentFlag.AlignLeft)  # above the long name
        lay.addWidget(self.name)
        lay.addLayout(self.form)
        lay.addWidget(self.partners)
        lay.addWidget(self.args, 1)
        session.slice_selected.connect(self.show_slice)
        session.trace_changed.connect(lambda: self.show_slice(-1))
        self.show_slice(-1)

    def _set_visible(self, on: bool) -> None:
        self.placeholder.setVisible(not on)
        for w in (self.name, self.partners, self.args):
            w.setVisible(on)
        for i in range(self.form.rowCount()):
            self.form.setRowVisible(i, on)

    def show_slice(self, i: int) -> None:
        trace = self.session.trace
        self._slice = i
        self.copy_full.setVisible(False)
        if trace is None or i < 0:
            self._set_visible(False)
            return
        self._set_visible(True)
        s = trace.slices
        raw = trace.name_of(i)
        shown = demangle(raw)
        self.name.setText(shown)
        self.copy_full.setVisible(trace.name_is_cut(i))
        start, dur = int(s.start[i]), int(s.dur[i])
        kind = int(s.kind[i])
        values = {
            "Raw name": raw if shown != raw else "",
            "Kind": Kind(kind).label if kind in Kind._value2member_map_ else str(kind),
            "Lane": _lane(trace, int(s.lane[i])),
            "Start": fmt_offset(start - trace.start_ns),
            "Duration": fmt_ns(dur),
            "Depth": str(int(s.depth[i])),
            "Device": _device_text(int(s.device[i]), int(s.stream[i])),
            "Copy": CopyKind(int(s.copy_kind[i])).name if int(s.copy_kind[i]) else "",
            "Bytes": _bytes_text(int(s.bytes[i]), dur),
            "Correlation": str(int(s.correlation[i])) if int(s.correlation[i]) >= 0 else "",
        }
        self.fields["Start"].setToolTip(f"{start / 1e3:,.3f} µs on the trace's clock")
        self.fields["Duration"].setToolTip(f"{dur:,} ns")
        for key, text in values.items():
            self.fields[key].setText(text)
            self.form.setRowVisible(list(self.fields).index(key), bool(text))
        self._show_partners(trace, i)
        self._show_args(trace.args.get(int(s.args[i])))

    def _show_partners(self, trace: Trace, i: int) -> None:
        f = trace.flows
        outgoing = [(int(j), "→") for j in f.dst[f.src == i]] if len(f) else []
        incoming = [(int(j), "←") for j in f.src[f.dst == i]] if len(f) else []
        partners = incoming + outgoing
        if not partners:
            self.partners.setText("<b>Flow partners:</b> none")
            return
        rows = []
        for j, arrow in partners[:MAX_PARTNERS]:
            where = (f"{_lane(trace, int(trace.slices.lane[j]))}, "
                     f"{fmt_offset(int(trace.slices.start[j]) - trace.start_ns)}")
            rows.append(f"{arrow} <a href='slice:{j}'>{esc(breakable(trace.name_of(j)))}</a> "
                        f"<small>({esc(breakable(where))})</small>")
        more = len(partners) - MAX_PARTNERS
        tail = f"<br>… and {more} more" if more > 0 else ""
        self.partners.setText("<b>Flow partners</b> <small>(click to go there)</small><br>"
                              + "<br>".join(rows) + tail)

    def _show_args(self, args: dict) -> None:
        self.args.clear()
        for key, value in args.items():
            self.args.addTopLevelItem(_arg_item(str(key), value))
        self.args.setVisible(bool(args))

    def _copy_full_name(self) -> None:
        trace = self.session.trace
        if trace is not None and self._slice >= 0:
            QGuiApplication.clipboard().setText(trace.full_name(self._slice))

    def _on_link(self, href: str) -> None:
        if href.startswith("slice:"):
            self.session.select_slice(int(href[6:]), reveal=True)


def _arg_item(key: str, value) -> QTreeWidgetItem:
    if isinstance(value, dict):
        item = QTreeWidgetItem([key, f"{{{len(value)} keys}}"])
        for k, v in value.items():
            item.addChild(_arg_item(str(k), v))
        return item
    if isinstance(value, list) and len(value) > 8 and not all(
            isinstance(x, (int, float)) for x in value):
        item = QTreeWidgetItem([key, f"[{len(value)} items]"])
        for k, v in enumerate(value):
            item.addChild(_arg_item(str(k), v))
        return item
    text = value if isinstance(value, str) else json.dumps(value)
    item = QTreeWidgetItem([key, text])
    item.setToolTip(1, literal_html(text[:2000]))
    item.setFlags(item.flags() | Qt.ItemFlag.ItemIsSelectable)
    return item


def _device_text(device: int, stream: int) -> str:
    if device < 0:
        return ""
    return f"GPU {device}" + (f", stream {stream}" if stream >= 0 else "")


def _bytes_text(n: int, dur: int) -> str:
    if n < 0:
        return ""
    rate = fmt_rate(n, dur)
    return f"{fmt_bytes(n)}  ({rate})" if rate else fmt_bytes(n)


DOCK = DockSpec("details", "Details", "right", 20, 380, DetailsPanel, tab_with="findings")


def _lane(trace: Trace, lane: int) -> str:
    return lane_title(trace.lanes.name[lane], trace.lanes.group[lane])
