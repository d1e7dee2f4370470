"""File ▸ Record…: the dialog drives a real recording off the GUI thread."""

from __future__ import annotations

import shlex
import sys

import pytest

from sofa_gui.core.importers import load_trace
from sofa_gui.qt.record_dialog import LogView, RecordDialog

SHORT = ("import time\n"
         "for i in range(6):\n"
         "    print('line', i, flush=True)\n"
         "    time.sleep(0.1)\n"
         "print('\\x1b[32mgreen\\x1b[0m done')\n")
SLEEPER = "import time\nprint('ready', flush=True)\nwhile True: time.sleep(0.05)\n"


def _command(code: str) -> str:
    return shlex.join([sys.executable, "-c", code])


@pytest.fixture
def dialog(qtbot, tmp_path):
    d = RecordDialog(cwd=tmp_path)
    qtbot.addWidget(d)
    d.interval_spin.setValue(0.05)
    d.show()
    return d


def test_records_a_short_command_and_emits_a_loadable_folder(dialog, qtbot, tmp_path):
    dialog.command_edit.setText(_command(SHORT))
    with qtbot.waitSignal(dialog.recording_finished, timeout=30000) as sig:
        assert dialog.start_recording()
        assert not dialog.start_button.isEnabled() and dialog.stop_button.isEnabled()
        assert not dialog.form.isEnabled()
    folder = sig.args[0]
    assert folder.startswith(str(tmp_path / "sofa_runs"))  # default: under the working dir
    trace = load_trace(folder)
    assert len(trace.counters) > 0 and trace.meta.extra["recording"]["exit"]["code"] == 0
    text = dialog.log_view.toPlainText()
    assert "line 5" in text and "green done" in text and "\x1b" not in text
    assert dialog.live.values["cpu"].text().endswith("%")
    assert dialog.live.values["rss"].text().endswith("B")
    assert "exit code 0" in dialog.status.text()
    assert dialog.start_button.isEnabled() and not dialog.stop_button.isEnabled()
    assert dialog.result.exit_code == 0


def test_calibrate_cores_checkbox_reaches_the_recording(dialog, qtbot, tmp_path):
    """Clicking "Calibrate cores" asks the recorder for the calibration (as
    ``sofa-gui record --calibrate-cores``); the finished folder carries its result."""
    import json
    from pathlib import Path

    from PySide6.QtCore import Qt
    dialog.command_edit.setText(_command("print('hi')"))
    assert not dialog.calibrate_check.isChecked() and not dialog.config().calibrate_cores
    qtbot.mouseClick(dialog.calibrate_check, Qt.MouseButton.LeftButton)
    assert dialog.calibrate_check.isChecked() and dialog.config().calibrate_cores
    with qtbot.waitSignal(dialog.recording_finished, timeout=60000) as sig:
        assert dialog.start_recording()
        assert dialog.recorder.config.calibrate_cores
    host = json.loads((Path(sig.args[0]) / "manifest.json").read_text())["host"]
    assert "core_interference" in host  # measured (a dict), or None on a one-core machine


def test_stop_button_interrupts_the_command(dialog, qtbot, tmp_path):
    dialog.command_edit.setText(_command(SLEEPER))
    dialog.output_edit.setText(str(tmp_path / "stopped"))
    assert dialog.start_recording()
    qtbot.waitUntil(lambda: "ready" in dialog.log_view.toPlainText(), timeout=20000)
    with qtbot.waitSignal(dialog.recording_finished, timeout=30000) as sig:
        dialog.stop_button.click()
    assert sig.args[0] == str(tmp_path / "stopped")
    assert dialog.result.signal == "SIGINT"
    load_trace(sig.args[0])


def test_command_that_cannot_start_is_reported(dialog, qtbot, tmp_path):
    dialog.command_edit.setText("no-such-program-xyz --help")
    dialog.output_edit.setText(str(tmp_path / "never"))
    with qtbot.waitSignal(dialog.recording_failed, timeout=10000) as sig:
        dialog.start_recording()
    assert "command not found" in sig.args[0]
    assert "command not found" in dialog.status.text()
    assert not (tmp_path / "never").exists()
    assert dialog.start_button.isEnabled() and dialog.form.isEnabled()


def test_invalid_options_never_start(dialog):
    dialog.command_edit.setText("")
    assert not dialog.start_recording()
    assert "enter a command" in dialog.status.text()
    dialog.command_edit.setText("python 'unclosed")
    assert not dialog.start_recording()
    dialog.command_edit.setText("true")
    dialog.torch_check.setChecked(True)
    dialog.window_edit.setText("soon")
    assert not dialog.start_recording()
    assert "START:DURATION" in dialog.status.text()
    assert dialog.recorder is None


def test_log_view_handles_carriage_returns_and_split_lines(qtbot):
    v = LogView()
    qtbot.addWidget(v)
    v.feed("epoch 1: 10%\repoch 1: 50%")
    assert v.toPlainText() == "epoch 1: 50%"
    v.feed("\repoch 1: 100%\nnext li")
    v.feed("ne\n")
    assert v.toPlainText().splitlines() == ["epoch 1: 100%", "next line"]


def test_log_view_keeps_a_progress_line_ending_in_carriage_return(qtbot):
    v = LogView()
    qtbot.addWidget(v)
    v.feed("epoch 1  40%|####\r")
    assert v.toPlainText() == "epoch 1  40%|####"
    v.feed("epoch 1 100%|##########\r\ndone\n")
    assert v.toPlainText().splitlines() == ["epoch 1 100%|##########", "done"]
