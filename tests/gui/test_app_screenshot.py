"""``sofa-gui view PATH --screenshot`` / ``sofa-gui demo --screenshot``, in process."""

from __future__ import annotations

import numpy as np
from PySide6.QtGui import QImage

from sofa_gui.cli import main
from sofa_gui.core.samples import demo_trace_path


def _colors(path) -> int:
    img = QImage(str(path)).convertToFormat(QImage.Format.Format_RGB32)
    buf = np.frombuffer(img.constBits(), np.uint32, img.width() * img.height())
    return len(np.unique(buf))


def test_view_screenshot_with_iteration(qapp, tmp_path, capsys):
    out = tmp_path / "shot.png"
    rc = main(["view", str(demo_trace_path()), "--screenshot", str(out), "--iteration", "2",
               "--size", "1280x800"])
    assert rc == 0, capsys.readouterr().err
    img = QImage(str(out))
    assert (img.width(), img.height()) == (1280, 800)
    assert _colors(out) > 50  # a rendered window, not a blank image
    assert "wrote" in capsys.readouterr().out


def test_demo_screenshot(qapp, tmp_path):
    out = tmp_path / "demo.png"
    assert main(["demo", "--screenshot", str(out), "--size", "1024x700"]) == 0
    assert QImage(str(out)).width() == 1024


def test_bad_inputs_exit_2_without_writing(qapp, tmp_path, capsys):
    out = tmp_path / "x.png"
    bad = tmp_path / "bad.json"
    bad.write_text("{ not json")
    assert main(["view", str(bad), "--screenshot", str(out)]) == 2
    assert str(bad) in capsys.readouterr().err
    assert main(["view", str(demo_trace_path()), "--screenshot", str(out),
                 "--iteration", "99"]) == 2
    assert "iterations" in capsys.readouterr().err
    assert main(["view", str(demo_trace_path()), "--screenshot", str(out),
                 "--size", "huge"]) == 2
    assert main(["view", str(demo_trace_path()), "--screenshot",
                 str(tmp_path / "missing" / "x.png")]) == 2
    assert not out.exists() and not list(tmp_path.glob(".shot-*"))
