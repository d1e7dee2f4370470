"""File ▸ Record…: run a command under the recorder, watch it live, open the result.

The recording runs on a Python thread (:class:`~sofa_gui.recorder.runner.Recorder`
does the work; nothing here blocks the GUI). The thread only appends to a
:class:`_LiveFeed`; a 100 ms timer on the GUI thread drains it into the log view
and the live counters, so a chatty child cannot flood the event loop. Start,
failure and completion cross threads as queued signals.
"""

from __future__ import annotations

import collections
import re
import shlex
import threading
from pathlib import Path

import pyqtgraph as pg
from PySide6.QtCore import QObject, Qt, QTimer, Signal
from PySide6.QtGui import QFont, QFontDatabase, QTextCursor
from PySide6.QtWidgets import (
    QCheckBox,
    QDialog,
    QDoubleSpinBox,
    QFileDialog,
    QFormLayout,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QSizePolicy,
    QVBoxLayout,
    QWidget,
)

from ..core.units import fmt_bytes
from ..recorder.config import (
    DEFAULT_ROOT,
    CommandError,
    RecordConfig,
    default_output,
    parse_window,
)
from ..recorder.pyspy import find_pyspy
from ..recorder.runner import Recorder, RecordResult
from ..recorder.summary import exit_text, summary_text

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")
_HISTORY_S = 120  # seconds of live counters kept in the plot
_LOG_LINES = 5000


class _LiveFeed:
    """Thread-safe hand-over from the recorder thread to the GUI timer."""

    def __init__(self):
        self._lock = threading.Lock()
        self._text: list[str] = []
        self._samples: list[dict] = []
        self._decoders = {}

    def output(self, stream: str, chunk: bytes) -> None:
        import codecs

        dec = self._decoders.setdefault(stream, codecs.getincrementaldecoder("utf-8")("replace"))
        text = dec.decode(chunk)
        with self._lock:
            self._text.append(text)

    def sample(self, live: dict) -> None:
        with self._lock:
            self._samples.append(live)

    def drain(self) -> tuple[str, list[dict]]:
        with self._lock:
            text, samples = "".join(self._text), self._samples
            self._text, self._samples = [], []
        return text, samples


class _Bridge(QObject):
    started = Signal(str)
    failed = Signal(str)
    finished = Signal(object)


class LogView(QPlainTextEdit):
    """The child's output as a terminal would show it: ANSI stripped, ``\\r`` rewrites."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setReadOnly(True)
        self.setMaximumBlockCount(_LOG_LINES)
        self.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        self.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.setPlaceholderText("The command's output appears here.")
        self._partial = ""
        self._follow = True  # stick to the bottom unless the user scrolled up
        bar = self.verticalScrollBar()
        bar.actionTriggered.connect(
            lambda _a: setattr(self, "_follow", bar.sliderPosition() >= bar.maximum() - 1))
        bar.rangeChanged.connect(lambda _lo, hi: bar.setValue(hi) if self._follow else None)

    def feed(self, text: str) -> None:
        if not text:
            return
        text = _ANSI.sub("", text)
        lines = (self._partial + text).split("\n")
        self._partial = lines.pop()
        cursor = self.textCursor()
        cursor.movePosition(QTextCursor.MoveOperation.End)
        cursor.movePosition(QTextCursor.MoveOperation.StartOfBlock,
                            QTextCursor.MoveMode.KeepAnchor)
        cursor.removeSelectedText()  # the previous partial line, redrawn below
        shown = [_visible(ln) for ln in lines]
        shown.append(_visible(self._partial))
        cursor.insertText("\n".join(shown))

    def clear_log(self) -> None:
        self._partial = ""
        self._follow = True
        self.clear()


def _visible(line: str) -> str:
    """What a terminal shows for a line rewritten with ``\r`` (progress bars): the last
    non-empty rewrite (a trailing ``\r`` leaves the text in place)."""
    for part in reversed(line.split("\r")):
        if part:
            return part
    return ""


class LiveCounters(QWidget):
    """Numbers and a rolling plot of machine CPU %, the command's CPU % and GPU %."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        import psutil

        self.cores = psutil.cpu_count() or 1
        self.values = {}
        grid = QGridLayout()
        grid.setContentsMargins(0, 0, 0, 0)
        colors = {"cpu": "#1e88e5", "proc": "#43a047", "gpu": "#e53935"}
        for col, (key, title) in enumerate((("cpu", "CPU (all cores)"),
                                            ("proc", "Command CPU"), ("rss", "Command RSS"),
                                            ("gpu", "GPU utilisation"), ("time", "Elapsed"))):
            cap = QLabel(("■ " if key in colors else "") + title)
            cap.setStyleSheet(f"color: {colors[key]};" if key in colors else "")
            val = QLabel("–")
            f = val.font()
            f.setPointSizeF(f.pointSizeF() * 1.5)
            f.setWeight(QFont.Weight.DemiBold)
            val.setFont(f)
            grid.addWidget(cap, 0, col)
            grid.addWidget(val, 1, col)
            self.values[key] = val
        self.plot = pg.PlotWidget(background=None)
        self.plot.setMinimumHeight(110)
        self.plot.setMaximumHeight(150)
        self.plot.setYRange(-6, 118, padding=0)
        self.plot.setMouseEnabled(False, False)
        self.plot.hideButtons()
        self.plot.showGrid(x=False, y=True, alpha=0.25)
        self.plot.getAxis("left").setWidth(34)
        self.plot.getAxis("left").setStyle(hideOverlappingLabels=False)
        self.plot.getAxis("left").setTicks([[(v, f"{v}%") for v in (0, 50, 100)]])
        self.plot.setLabel("bottom", "seconds since start")
        self.plot.setToolTip("CPU: all cores; command: its processes as % of the machine; "
                             "GPU: mean over GPUs")
        self.curves = {k: self.plot.plot(pen=pg.mkPen(c, width=2)) for k, c in colors.items()}
        self.history = {k: collections.deque(maxlen=4000) for k in ("t", *self.curves)}
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addLayout(grid)
        lay.addWidget(self.plot)

    def reset(self) -> None:
        for d in self.history.values():
            d.clear()
        for c in self.curves.values():
            c.setData([], [])
        for v in self.values.values():
            v.setText("–")

    def add(self, samples: list[dict]) -> None:
        if not samples:
            return
        h = self.history
        for s in samples:
            if "elapsed_s" not in s:
                continue
            gpu = s.get("gpu_util") or []
            tree = s.get("tree_cpu")
            h["t"].append(s["elapsed_s"])
            h["cpu"].append(s.get("cpu_busy", float("nan")))
            h["proc"].append(tree / self.cores if tree is not None else float("nan"))
            h["gpu"].append(sum(gpu) / len(gpu) if gpu else float("nan"))
        self._numbers(samples[-1])
        if not h["t"]:
            return
        t_end = h["t"][-1]
        keep = [i for i, t in enumerate(h["t"]) if t >= t_end - _HISTORY_S]
        ts = [h["t"][i] for i in keep]
        for key, curve in self.curves.items():
            ys = [h[key][i] for i in keep]
            curve.setData(ts, ys, connect="finite")
        self.plot.setXRange(max(0.0, t_end - _HISTORY_S), max(t_end, 5.0), padding=0)

    def _numbers(self, s: dict) -> None:
        v = self.values
        if s.get("cpu_busy") is not None:
            v["cpu"].setText(f"{s['cpu_busy']:.0f} %")
        n = s.get("processes") or 0
        if n and s.get("tree_cpu") is not None:  # after the command ends, keep its last values
            cores = s["tree_cpu"] / 100.0
            v["proc"].setText(f"{100 * cores / self.cores:.0f} % ({cores:.1f} cores"
                              + (f", {n} procs)" if n > 1 else ")"))
        if n and s.get("tree_rss") is not None:
            v["rss"].setText(fmt_bytes(s["tree_rss"]))
        gpu = s.get("gpu_util")
        v["gpu"].setText(" / ".join(f"{g:.0f} %" for g in gpu) if gpu else "no GPU")
        if s.get("elapsed_s") is not None:
            v["time"].setText(f"{s['elapsed_s']:.1f} s")


class RecordDialog(QDialog):
    """Command, working directory and options; live log and counters; Stop; result."""

    recording_finished = Signal(str)  # the recording folder, once complete and loadable
    recording_failed = Signal(str)  # why the command could not start

    def __init__(self, parent: QWidget | None = None, *, command: str = "",
                 cwd: str | Path | None = None):
        super().__init__(parent)
        self.setWindowTitle("Record a profile")
        self.setModal(False)
        self.resize(900, 680)
        self.recorder: Recorder | None = None
        self.result: RecordResult | None = None
        self.folder: str | None = None
        self._close_when_done = False
        self._feed = _LiveFeed()
        self._bridge = _Bridge(self)
        self._bridge.started.connect(self._on_started)
        self._bridge.failed.connect(self._on_failed)
        self._bridge.finished.connect(self._on_finished)
        self._timer = QTimer(self)
        self._timer.setInterval(100)
        self._timer.timeout.connect(self._drain)
        self._build(command, Path(cwd) if cwd else Path.cwd())

    # -- layout ---------------------------------------------------------------------
    def _build(self, command: str, cwd: Path) -> None:
        self.command_edit = QLineEdit(command)
        self.command_edit.setPlaceholderText("python train.py --epochs 1")
        self.cwd_edit = QLineEdit(str(cwd))
        self.output_edit = QLineEdit()
        self.output_edit.setPlaceholderText(f"default: <working directory>/{DEFAULT_ROOT}/"
                                            "<time>-<command>")
        self.interval_spin = QDoubleSpinBox()
        self.interval_spin.setRange(0.01, 10.0)
        self.interval_spin.setDecimals(2)
        self.interval_spin.setSingleStep(0.05)
        self.interval_spin.setValue(0.1)
        self.interval_spin.setSuffix(" s")
        self.torch_check = QCheckBox("torch.profiler inside the Python child (Kineto trace)")
        self.window_edit = QLineEdit()
        self.window_edit.setPlaceholderText("whole run, or START:DURATION in seconds")
        self.window_edit.setEnabled(False)
        self.torch_check.toggled.connect(self.window_edit.setEnabled)
        self.pyspy_check = QCheckBox("py-spy Python stack samples")
        if find_pyspy() is None:
            self.pyspy_check.setEnabled(False)
            self.pyspy_check.setToolTip("py-spy is not installed (pip install 'sofa-gui[profile]')")

        self.calibrate_check = QCheckBox("Calibrate cores after the run (~10 s): how much a "
                                         "busy core slows another, what a loader batch costs")
        self.calibrate_check.setToolTip(
            "Measured after the command ends, so it is not slowed; the advisor's estimates "
            "for DataLoader workers use it (same as sofa-gui record --calibrate-cores)")

        form = QFormLayout()
        form.addRow("Command:", self.command_edit)
        form.addRow("Working directory:", self._with_browse(self.cwd_edit, self._browse_cwd))
        form.addRow("Save to:", self._with_browse(self.output_edit, self._browse_output))
        form.addRow("Sample every:", self.interval_spin)
        form.addRow("Also record:", self.torch_check)
        form.addRow("Profile window:", self.window_edit)
        form.addRow("", self.pyspy_check)
        form.addRow("", self.calibrate_check)
        self.form = QWidget()
        self.form.setLayout(form)

        self.status = QLabel("Always recorded: per-core CPU, memory, disk, network, the "
                             "command's processes, and NVIDIA GPUs when NVML is available.")
        self.status.setWordWrap(True)
        self.status.setTextFormat(Qt.TextFormat.PlainText)
        self.status.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.live = LiveCounters()
        self.log_view = LogView()
        self.log_view.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Expanding)

        self.start_button = QPushButton("Record")
        self.start_button.setDefault(True)
        self.start_button.clicked.connect(self.start_recording)
        self.stop_button = QPushButton("Stop")
        self.stop_button.setEnabled(False)
        self.stop_button.setToolTip("Send Ctrl-C (SIGINT) to the command; SIGTERM, then SIGKILL "
                                    "if it does not end")
        self.stop_button.clicked.connect(self.stop_recording)
        self.close_button = QPushButton("Close")
        self.close_button.clicked.connect(self.close)
        buttons = QHBoxLayout()
        buttons.addStretch(1)
        for b in (self.start_button, self.stop_button, self.close_button):
            buttons.addWidget(b)

        lay = QVBoxLayout(self)
        lay.addWidget(self.form)
        lay.addWidget(self.status)
        lay.addWidget(self.live)
        lay.addWidget(self.log_view, 1)
        lay.addLayout(buttons)

    def _with_browse(self, edit: QLineEdit, slot) -> QWidget:
        w = QWidget()
        h = QHBoxLayout(w)
        h.setContentsMargins(0, 0, 0, 0)
        h.addWidget(edit, 1)
        b = QPushButton("Browse…")
        b.clicked.connect(slot)
        h.addWidget(b)
        return w

    def _browse_cwd(self) -> None:
        d = QFileDialog.getExistingDirectory(self, "Working directory", self.cwd_edit.text())
        if d:
            self.cwd_edit.setText(d)

    def _browse_output(self) -> None:
        d = QFileDialog.getExistingDirectory(self, "Parent folder for the recording",
                                             self.cwd_edit.text())
        if d:
            self.output_edit.setText(str(Path(d) / "recording"))

    # -- actions --------------------------------------------------------------------
    @property
    def running(self) -> bool:
        return self.recorder is not None and self.result is None

    def config(self) -> RecordConfig:
        """The options on screen as a RecordConfig; ValueError says what is wrong."""
        try:
            command = shlex.split(self.command_edit.text())
        except ValueError as exc:
            raise ValueError(f"cannot parse the command: {exc}") from None
        if not command:
            raise ValueError("enter a command to run")
        cwd = Path(self.cwd_edit.text().strip() or ".").expanduser()
        out = self.output_edit.text().strip()
        output = Path(out).expanduser() if out else default_output(command, cwd / DEFAULT_ROOT)
        if not output.is_absolute():
            output = cwd / output
        window = parse_window(self.window_edit.text()) if (
            self.torch_check.isChecked() and self.window_edit.text().strip()) else None
        return RecordConfig(command=tuple(command), cwd=cwd, output=output,
                            interval_s=self.interval_spin.value(),
                            torch=self.torch_check.isChecked(), torch_window=window,
                            py_spy=self.pyspy_check.isChecked(),
                            calibrate_cores=self.calibrate_check.isChecked())

    def start_recording(self) -> bool:
        """Start in the background; False (and a message) when the options are invalid."""
        if self.running:
            return False
        try:
            cfg = self.config()
        except ValueError as exc:
            self._show_status(str(exc), error=True)
            return False
        self.result, self.folder = None, None
        self.log_view.clear_log()
        self.live.reset()
        self._feed = _LiveFeed()
        self.recorder = Recorder(cfg, on_output=self._feed.output, on_sample=self._feed.sample)
        self._set_running(True)
        self._show_status(f"Starting {cfg.command[0]}…")
        threading.Thread(target=self._run, args=(self.recorder, self._bridge),
                         name="sofa-record", daemon=True).start()
        self._timer.start()
        return True

    def stop_recording(self) -> None:
        if self.running:
            self.recorder.request_stop()
            self.stop_button.setEnabled(False)
            self._show_status("Stopping: sent Ctrl-C (SIGINT) to the command…")

    @staticmethod
    def _run(recorder: Recorder, bridge: _Bridge) -> None:
        """Worker thread: start, wait, finalise; report by signals."""
        try:
            folder = recorder.start()
        except CommandError as exc:
            bridge.failed.emit(str(exc))
            return
        except Exception as exc:  # noqa: BLE001 - shown to the user, never a crash
            bridge.failed.emit(f"the recorder failed to start: {type(exc).__name__}: {exc}")
            return
        bridge.started.emit(str(folder))
        try:
            result = recorder.wait()
        except Exception as exc:  # noqa: BLE001
            bridge.failed.emit(f"the recording failed: {type(exc).__name__}: {exc}")
            return
        bridge.finished.emit(result)

    # -- signals from the worker ---------------------------------------------------------
    def _on_started(self, folder: str) -> None:
        self.folder = folder
        pid = self.recorder.proc.pid if self.recorder and self.recorder.proc else "?"
        self._show_status(f"Recording (pid {pid}) into {folder}")

    def _on_failed(self, message: str) -> None:
        self._drain()
        self._timer.stop()
        self.recorder = None
        self._set_running(False)
        self._show_status(message, error=True)
        self.recording_failed.emit(message)
        if self._close_when_done:
            super().close()

    def _on_finished(self, result: RecordResult) -> None:
        self.result = result
        self._drain()
        self.live.values["time"].setText(f"{result.duration_s:.1f} s")
        self._timer.stop()
        self._set_running(False)
        self._show_status(f"Saved {result.folder} ({exit_text(result)}).\n"
                          + summary_text(result), error=result.exit_code != 0)
        self.recording_finished.emit(str(result.folder))
        if self._close_when_done:
            super().close()

    def _drain(self) -> None:
        text, samples = self._feed.drain()
        self.log_view.feed(text)
        self.live.add(samples)

    # -- helpers --------------------------------------------------------------------
    def _set_running(self, running: bool) -> None:
        self.form.setEnabled(not running)
        self.start_button.setEnabled(not running)
        self.stop_button.setEnabled(running)

    def _show_status(self, text: str, error: bool = False) -> None:
        self.status.setText(text)
        self.status.setStyleSheet("color: #c62828;" if error else "")

    def closeEvent(self, event) -> None:  # noqa: N802
        if self.running:
            self._close_when_done = True
            self.stop_recording()
            self._show_status("Stopping the command; this window closes once the recording "
                              "is saved.")
            event.ignore()
            return
        super().closeEvent(event)
