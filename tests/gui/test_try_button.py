"""Try it: a recording's tryable fixes get a button that re-runs the program with the fix,
shows progress, can be cancelled, opens the result in the Compare dock and marks the fix."""

from __future__ import annotations

import hashlib
import importlib.util
import shutil
import sys
from pathlib import Path

import pytest
from PySide6.QtWidgets import QLabel, QPushButton

from sofa_gui.core.analysis.tryable import TRYABLE
from sofa_gui.qt.try_dialog import TryDialog
from sofa_gui.recorder.cli import main as record_main

DATA = Path(__file__).resolve().parents[1] / "data" / "try"
#: Waits for a file named "go-on" in its working directory (present while it is recorded).
WAITS = ("import os, time\n"
         "print('waiting', flush=True)\n"
         "while not os.path.exists('go-on'):\n"
         "    time.sleep(0.05)\n")


def _button(panel, fix_id: str) -> QPushButton | None:
    return panel.findChild(QPushButton, f"try-{fix_id}")


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch is not installed")
@pytest.mark.slow
def test_try_it_runs_the_fix_and_shows_the_measured_and_predicted_gain(
        qtbot, open_window, tmp_path):
    script = tmp_path / "train.py"
    shutil.copy(DATA / "train_loader.py", script)
    digest = hashlib.sha256(script.read_bytes()).hexdigest()
    rec = tmp_path / "rec"
    assert record_main(["-o", str(rec), "--torch", "-C", str(tmp_path), "--",
                        sys.executable, "train.py", "1"]) == 0
    w = open_window(rec)
    panel = w.panels["findings"]
    qtbot.waitUntil(lambda: _button(panel, "loader-workers") is not None, timeout=20000)
    _button(panel, "loader-workers").click()
    dialog = w.try_buttons.dialog
    assert isinstance(dialog, TryDialog) and dialog.command[-2:] == ["train.py", "1"]
    dialog.rounds.setValue(1)
    dialog.steps.setValue(2)
    seen = []
    dialog.bridge.progress.connect(lambda done, total, what: seen.append((done, total)))
    with qtbot.waitSignal(dialog.tried, timeout=600000):
        dialog.start_button.click()
        assert not dialog.start_button.isEnabled()
    assert seen[0] == (0, 2) and (1, 2) in seen
    result = dialog.result
    assert dialog.progress.value() == dialog.progress.maximum()
    assert dialog.status.text() == result["verdict"]
    compare = w.panels["compare"]
    assert compare.tabs.currentWidget() is compare.verdict
    assert result["verdict"] in compare.verdict.toPlainText()
    assert compare.summary.text().startswith("Tried loader-workers:")
    label = panel.findChild(QLabel, "tried-loader-workers")
    assert label.text().startswith("tried: ") and "measured" in label.text()
    assert hashlib.sha256(script.read_bytes()).hexdigest() == digest
    (folder,) = (rec / "tries").iterdir()
    assert Path(result["folder"]) == folder and (folder / "try.json").is_file()
    assert folder.name in label.toolTip()  # the history of the fix's tries


def test_cancel_stops_the_running_try(qtbot, tmp_path):
    (tmp_path / "go-on").write_text("")
    rec = tmp_path / "rec"
    assert record_main(["-o", str(rec), "-C", str(tmp_path), "--",
                        sys.executable, "-c", WAITS]) == 0
    (tmp_path / "go-on").unlink()  # the re-run now waits until cancelled
    dialog = TryDialog(rec, TRYABLE["xla-auto-jit"])
    qtbot.addWidget(dialog)
    dialog.show()
    dialog.rounds.setValue(1)
    dialog.start()
    qtbot.waitUntil(lambda: (rec / "tries").is_dir() and any(
        (d / "b1" / "stdout.txt").exists() or (d / "b1" / "manifest.json").exists()
        for d in (rec / "tries").iterdir()), timeout=20000)
    dialog.cancel_button.click()
    qtbot.waitUntil(lambda: not dialog.running(), timeout=30000)
    assert dialog.status.text().startswith("Cancelled")
    assert dialog.result is None
    assert dialog.cancel_button.text() == "Close"
