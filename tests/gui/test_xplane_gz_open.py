"""The app opens a gzip-compressed XProf capture (``.xplane.pb.gz``) from its Open dialog,
whose filter offers the name, as it opens a plain ``.xplane.pb``."""

from __future__ import annotations

import shutil
from pathlib import Path

from PySide6.QtWidgets import QFileDialog
from test_app_window import LOAD_TIMEOUT_MS, settings, window  # noqa: F401  (fixtures)

from sofa_gui.qt import sliced

CASE = Path(__file__).resolve().parents[1] / "data" / "corpus" / "tf_tape_serial_map"


def test_the_open_dialog_offers_and_opens_a_gzip_xplane(qtbot, request, monkeypatch, tmp_path):
    win = request.getfixturevalue("window")
    gz = Path(shutil.copy(next(CASE.rglob("*.xplane.pb.gz")), tmp_path / "vm.xplane.pb.gz"))
    asked = {}

    def pick(parent, caption, start, filters):
        asked["filters"] = filters
        return str(gz), ""

    monkeypatch.setattr(QFileDialog, "getOpenFileName", staticmethod(pick))
    win.open_file_dialog()
    assert "*.xplane.pb.gz" in asked["filters"]
    s = win.session
    qtbot.waitUntil(lambda: not s.busy, timeout=LOAD_TIMEOUT_MS)
    assert s.analysis_done, f"open failed: {s.last_error}"
    qtbot.waitUntil(lambda: not sliced.pending(), timeout=LOAD_TIMEOUT_MS)
    assert s.path == str(gz) and s.trace.meta.format == "xplane"
    assert len(s.trace.slices) > 1000 and s.findings
    assert not win.docks["tfdata"].isHidden()  # its tf.data pipeline is read from the gzip
