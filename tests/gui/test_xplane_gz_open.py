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


def test_view_screenshots_a_gzip_xplane_and_refuses_a_truncated_one(qapp, tmp_path, capsys):
    from PySide6.QtGui import QImage

    from sofa_gui.cli import main

    gz = next(CASE.rglob("*.xplane.pb.gz"))
    out = tmp_path / "shot.png"
    assert main(["view", str(gz), "--screenshot", str(out), "--size", "1024x700"]) == 0, \
        capsys.readouterr().err
    assert (QImage(str(out)).width(), QImage(str(out)).height()) == (1024, 700)
    cut = tmp_path / "cut.xplane.pb.gz"
    cut.write_bytes(gz.read_bytes()[:5000])
    assert main(["view", str(cut), "--screenshot", str(tmp_path / "no.png")]) == 2
    err = capsys.readouterr().err.strip()
    assert str(cut) in err and "truncated gzip" in err and len(err.splitlines()) == 1
